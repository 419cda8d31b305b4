//! Outbound networking settings: the proxy variables (`HTTPS_PROXY`, `HTTP_PROXY`,
//! `ALL_PROXY`, `NO_PROXY`) and the extra CA files (`SSL_CERT_FILE`, `tls.ca_certificates`).
//! Only their shape is checked here; the files are read once, when the daemon (or `doctor`)
//! builds its `Net`, and an unreadable one stops the start naming its setting.

use std::collections::BTreeMap;
use std::path::PathBuf;

use hermes_adapter::net::NetSettings;

use super::known_keys::warn_unknown;
use super::parse::{Issues, at};
use super::raw::{RawTls, Section};

pub fn network(
    issues: &mut Issues,
    section: Option<&Section<RawTls>>,
    env: &BTreeMap<String, String>,
) -> NetSettings {
    let raw = issues.section("tls", section).unwrap_or_default();
    warn_unknown(issues, "tls", &raw.unknown, &[]);
    let ca_certificates: Vec<PathBuf> = issues
        .list(
            at("tls.ca_certificates", raw.ca_certificates.as_ref()),
            true,
        )
        .unwrap_or_default()
        .into_iter()
        .map(PathBuf::from)
        .collect();
    match NetSettings::from_env(env, &ca_certificates) {
        Ok(settings) => settings,
        Err(errors) => {
            for error in errors {
                let (key, message) = error.split_once(": ").unwrap_or(("network", &error));
                issues.error(key, message);
            }
            NetSettings::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{load_err, load_ok};

    #[test]
    fn proxies_and_ca_files_come_from_the_environment_and_the_tls_key() {
        let loaded = load_ok(
            "tls:\n  ca_certificates: [/etc/corp/ca.pem]\n",
            &[
                ("HTTPS_PROXY", "http://proxy.corp:3128"),
                ("NO_PROXY", "localhost,.internal"),
                ("SSL_CERT_FILE", "/etc/ssl/extra.pem"),
            ],
        );
        let network = &loaded.config.network;
        assert_eq!(
            network.proxies.https.as_ref().map(|p| p.url.as_str()),
            Some("http://proxy.corp:3128/")
        );
        assert_eq!(network.proxies.no_proxy, ["localhost", ".internal"]);
        let sources: Vec<(&str, &str)> = network
            .ca_files
            .iter()
            .map(|f| (f.source.as_str(), f.path.to_str().unwrap()))
            .collect();
        assert_eq!(
            sources,
            [
                ("SSL_CERT_FILE", "/etc/ssl/extra.pem"),
                ("tls.ca_certificates[0]", "/etc/corp/ca.pem"),
            ]
        );
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    }

    #[test]
    fn a_bad_proxy_is_a_config_error_naming_the_variable_not_the_password() {
        let errors = load_err("", &[("ALL_PROXY", "gopher://u:hunter2@p:70")]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("config error: ALL_PROXY: unsupported proxy scheme"),
            "{errors:?}"
        );
        assert!(!errors[0].contains("hunter2"), "{errors:?}");
    }
}
