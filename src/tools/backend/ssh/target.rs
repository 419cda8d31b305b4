//! Which machine, as whom, with which key, checked against which known-hosts file: the
//! `terminal.ssh_*` settings resolved once, when the backend is built, so a missing host, a
//! missing key or a key protected by a passphrase is reported at start and not on the first
//! command.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use russh::keys::{HashAlg, PrivateKey};

use crate::config::SshSettings;

/// Where and how to connect.
#[derive(Clone)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub key_file: PathBuf,
    pub key: Arc<PrivateKey>,
    pub known_hosts: PathBuf,
    /// False accepts any host key (`terminal.ssh_host_key_checking: false`).
    pub check_host_key: bool,
}

impl fmt::Debug for Target {
    /// Everything but the key itself.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("key_file", &self.key_file)
            .field("known_hosts", &self.known_hosts)
            .field("check_host_key", &self.check_host_key)
            .finish_non_exhaustive()
    }
}

impl Target {
    /// Resolves the settings; `home` is the daemon user's home, where `~/.ssh` is.
    pub fn resolve(settings: &SshSettings, home: &Path) -> Result<Self, String> {
        let host = settings
            .host
            .as_deref()
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .ok_or("the ssh backend needs a host: set terminal.ssh_host (or TERMINAL_SSH_HOST)")?
            .to_owned();
        if settings.port == 0 {
            return Err("terminal.ssh_port must be between 1 and 65535".to_owned());
        }
        let user = match settings.user.as_deref().map(str::trim) {
            Some(user) if !user.is_empty() => user.to_owned(),
            _ => daemon_user().ok_or(
                "the ssh backend could not tell the daemon user's name: set terminal.ssh_user",
            )?,
        };
        let key_file = key_file(settings.key.as_deref(), home)?;
        let key = load_key(&key_file)?;
        let known_hosts = settings
            .known_hosts
            .clone()
            .unwrap_or_else(|| home.join(".ssh").join("known_hosts"));
        Ok(Self {
            host,
            port: settings.port,
            user,
            key_file,
            key: Arc::new(key),
            known_hosts,
            check_host_key: settings.host_key_checking,
        })
    }

    /// `user@host:port`, for messages.
    pub fn label(&self) -> String {
        format!("{}@{}:{}", self.user, self.host, self.port)
    }

    /// The public half's fingerprint, safe to show.
    pub fn key_fingerprint(&self) -> String {
        self.key
            .public_key()
            .fingerprint(HashAlg::Sha256)
            .to_string()
    }
}

/// The configured key, else `~/.ssh/id_ed25519`, else `~/.ssh/id_rsa`.
fn key_file(configured: Option<&Path>, home: &Path) -> Result<PathBuf, String> {
    if let Some(path) = configured {
        if path.is_file() {
            return Ok(path.to_owned());
        }
        return Err(format!(
            "terminal.ssh_key {}: no such key file (give the path of an OpenSSH private key)",
            path.display()
        ));
    }
    let ssh = home.join(".ssh");
    let tried = [ssh.join("id_ed25519"), ssh.join("id_rsa")];
    tried.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        format!(
            "the ssh backend found no key: set terminal.ssh_key (or TERMINAL_SSH_KEY); looked for {} and {}",
            tried[0].display(),
            tried[1].display()
        )
    })
}

/// Reads an unencrypted private key. Errors name the file, never its contents.
fn load_key(path: &Path) -> Result<PrivateKey, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the ssh key {}: {e}", path.display()))?;
    match russh::keys::decode_secret_key(&text, None) {
        Ok(key) => Ok(key),
        Err(russh::keys::Error::KeyIsEncrypted) => Err(format!(
            "the ssh key {} is protected by a passphrase, which hermesd cannot enter: give it a key without one (e.g. a dedicated key for this machine)",
            path.display()
        )),
        Err(russh::keys::Error::UnsupportedKeyType {
            key_type_string, ..
        }) => Err(format!(
            "the ssh key {} has a type hermesd does not support ({key_type_string}); use ed25519, ecdsa or rsa",
            path.display()
        )),
        Err(_) => Err(format!(
            "the ssh key {} is not an OpenSSH or PEM private key hermesd can read",
            path.display()
        )),
    }
}

/// The name of the user the daemon runs as: `$USER`, else `$LOGNAME`, else the passwd entry
/// of the process's uid.
fn daemon_user() -> Option<String> {
    for var in ["USER", "LOGNAME"] {
        if let Ok(name) = std::env::var(var)
            && !name.trim().is_empty()
        {
            return Some(name);
        }
    }
    let uid = rustix::process::getuid().as_raw().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        (fields.nth(1)? == uid).then(|| name.to_owned())
    })
}
