//! Whether the server is the machine the operator meant: its host key must be listed for
//! `[host]:port` (or `host` on port 22, as OpenSSH writes it) in the known-hosts file. An
//! unknown or changed key refuses the connection with the key's fingerprint and the command
//! that would add it; nothing is ever learned silently.

use std::path::Path;

use russh::keys::known_hosts::known_host_keys_path;
use russh::keys::{HashAlg, PublicKey, PublicKeyOrCertificate};

/// `[host]:port`, or `host` for port 22: the name known-hosts files use.
fn host_entry(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_owned()
    } else {
        format!("[{host}]:{port}")
    }
}

fn describe(key: &PublicKey) -> String {
    format!("{} {}", key.algorithm(), key.fingerprint(HashAlg::Sha256))
}

/// Ok when `offered` is listed for the host in `known_hosts`; else why not, in one message.
pub fn verify(
    host: &str,
    port: u16,
    known_hosts: &Path,
    offered: &PublicKeyOrCertificate,
) -> Result<(), String> {
    let entry = host_entry(host, port);
    let key = match offered {
        PublicKeyOrCertificate::PublicKey { key, .. } => key,
        PublicKeyOrCertificate::Certificate(_) => {
            return Err(format!(
                "{entry} offered a host certificate; hermesd checks plain host keys only: list the server's host key in {}",
                known_hosts.display()
            ));
        }
    };
    let recorded = known_host_keys_path(host, port, known_hosts).map_err(|e| {
        format!(
            "cannot read the known-hosts file {}: {e}",
            known_hosts.display()
        )
    })?;
    if recorded.iter().any(|(_, known)| known == key) {
        return Ok(());
    }
    let add = format!(
        "ssh-keyscan -p {port} {host} >> {}",
        shell_word(&known_hosts.display().to_string())
    );
    match recorded
        .iter()
        .find(|(_, known)| known.algorithm() == key.algorithm())
    {
        Some((line, known)) => Err(format!(
            "the host key of {entry} CHANGED: it now offers {}, but line {line} of {} lists {}. \
             Someone may be in the middle; if the change is expected, remove the old entry \
             (ssh-keygen -R '{entry}' -f {}) and add the new one ({add})",
            describe(key),
            known_hosts.display(),
            describe(known),
            shell_word(&known_hosts.display().to_string()),
        )),
        None => Err(format!(
            "the host key of {entry} ({}) is not in {}; if that is the machine you mean, add it with: {add}",
            describe(key),
            known_hosts.display(),
        )),
    }
}

/// A path quoted for a copy-pasted command when it needs it.
fn shell_word(text: &str) -> String {
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-~+".contains(c))
    {
        text.to_owned()
    } else {
        crate::process::shell_quote(text)
    }
}
