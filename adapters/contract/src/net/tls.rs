//! The TLS client configuration every outbound connection shares: rustls with ring,
//! trusting the operating system's store (rustls-native-certs), Mozilla's bundle
//! (webpki-roots, so a minimal container without CA certificates still works) and any extra
//! CA files the operator names (`SSL_CERT_FILE`, `tls.ca_certificates`), for a private CA or
//! a TLS-inspecting proxy.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde::Serialize;

/// An extra CA file and the setting that named it (for errors and `doctor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CaFile {
    pub path: PathBuf,
    pub source: String,
}

/// How many trust anchors came from where.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RootCounts {
    pub os: usize,
    pub mozilla: usize,
    pub extra: usize,
}

/// The shared client config and what it trusts; errors name the file and its setting.
pub fn client_config(
    ca_files: &[CaFile],
) -> Result<(Arc<rustls::ClientConfig>, RootCounts), Vec<String>> {
    let mut roots = RootCertStore::empty();
    let mut counts = RootCounts::default();
    // Unreadable entries of the OS store are skipped: the Mozilla bundle still stands, and a
    // broken distro store must not keep the daemon from starting.
    let native = rustls_native_certs::load_native_certs();
    let (added, _ignored) = roots.add_parsable_certificates(native.certs);
    counts.os = added;
    let before = roots.len();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    counts.mozilla = roots.len() - before;
    let mut errors = Vec::new();
    for file in ca_files {
        match extra_certificates(file) {
            Ok(certs) => {
                for cert in certs {
                    match roots.add(cert) {
                        Ok(()) => counts.extra += 1,
                        Err(e) => errors.push(format!(
                            "{}: a certificate in {} is not a usable CA: {e}",
                            file.source,
                            file.path.display()
                        )),
                    }
                }
            }
            Err(error) => errors.push(error),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| vec![format!("TLS: {e}")])?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok((Arc::new(config), counts))
}

fn extra_certificates(file: &CaFile) -> Result<Vec<CertificateDer<'static>>, String> {
    let name = || format!("{}: {}", file.source, file.path.display());
    let certs = CertificateDer::pem_file_iter(&file.path)
        .map_err(|e| format!("{}: cannot read ({e})", name()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not a PEM certificate file ({e})", name()))?;
    if certs.is_empty() {
        return Err(format!("{}: holds no PEM certificate", name()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusts_mozilla_and_reports_a_bad_extra_file_by_its_setting() {
        let (_config, counts) = client_config(&[]).unwrap();
        assert!(counts.mozilla > 100, "{counts:?}");
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let errors = client_config(&[
            CaFile {
                path: empty.clone(),
                source: "SSL_CERT_FILE".into(),
            },
            CaFile {
                path: dir.join("missing.pem"),
                source: "tls.ca_certificates[0]".into(),
            },
        ])
        .unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].starts_with("SSL_CERT_FILE: ") && errors[0].contains("no PEM certificate"),
            "{errors:?}"
        );
        assert!(
            errors[1].starts_with("tls.ca_certificates[0]: ") && errors[1].contains("cannot read"),
            "{errors:?}"
        );
    }
}
