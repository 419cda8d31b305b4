//! `terminal.backend: ssh`: commands and files on a remote machine over one SSH connection
//! (russh, pure Rust, ring crypto). The server's host key must be in the known-hosts file
//! unless checking was switched off; authentication is by an unencrypted private key.
//!
//! Every scope uses the same machine and the same connection: a scope's backend is a cheap
//! handle on it, and the connection closes once no scope holds one. Separating people from
//! each other needs the docker backend or the local sandbox; see docs/sandbox-ssh.md.

mod connection;
mod files;
mod host_key;
mod run;
mod script;
mod target;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use futures_util::future::BoxFuture;
use russh::{ChannelMsg, Disconnect};
use tokio_util::sync::CancellationToken;

use super::{Backend, BackendError, BackendFactory, BackendFuture, Exec, RunResult, Scope};
use crate::config::{SshSettings, TerminalConfig};
use connection::Link;
use target::Target;

/// Opens ssh backends: one shared connection behind every scope.
#[derive(Debug)]
pub struct SshFactory {
    link: Arc<Link>,
    cwd: String,
    /// Backends handed out and not yet shut down.
    users: Arc<AtomicUsize>,
}

impl SshFactory {
    /// Reads the `terminal.ssh_*` settings. `home` is the daemon user's home directory, where
    /// the default key (`~/.ssh/id_ed25519`, then `id_rsa`) and `~/.ssh/known_hosts` are.
    /// A missing host, a missing or unreadable key, or a key with a passphrase is an error.
    pub fn new(
        settings: &SshSettings,
        terminal: &TerminalConfig,
        home: &Path,
    ) -> Result<Self, String> {
        let target = Arc::new(Target::resolve(settings, home)?);
        Ok(Self {
            link: Arc::new(Link::new(target, terminal.persistent_shell)),
            cwd: terminal.cwd.clone().unwrap_or_else(|| "~".to_owned()),
            users: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// How many SSH connections this factory has opened (the probe's own not counted).
    pub fn connections_opened(&self) -> u64 {
        self.link.connects()
    }

    /// The private key file in use.
    pub fn key_file(&self) -> PathBuf {
        self.link.target().key_file.clone()
    }
}

impl BackendFactory for SshFactory {
    fn kind(&self) -> &'static str {
        "ssh"
    }

    fn open<'a>(&'a self, _scope: &'a Scope) -> BackendFuture<'a, Arc<dyn Backend>> {
        Box::pin(async move {
            self.link.check().await?;
            self.users.fetch_add(1, Ordering::SeqCst);
            let backend: Arc<dyn Backend> = Arc::new(SshBackend {
                link: Arc::clone(&self.link),
                cwd: self.cwd.clone(),
                users: Arc::clone(&self.users),
                stopped: AtomicBool::new(false),
            });
            Ok(backend)
        })
    }

    fn probe(&self) -> BackendFuture<'_, String> {
        Box::pin(async move {
            let target = self.link.target();
            let conn = connection::connect(target).await?;
            let ran = async {
                let mut channel = conn.channel_open_session().await.ok()?;
                channel.exec(true, "true").await.ok()?;
                while let Some(msg) = channel.wait().await {
                    if let ChannelMsg::ExitStatus { exit_status } = msg {
                        return Some(exit_status);
                    }
                }
                None
            }
            .await;
            let _ = conn.disconnect(Disconnect::ByApplication, "", "en").await;
            match ran {
                Some(0) => Ok(format!(
                    "ssh {} reachable ({})",
                    target.label(),
                    if target.check_host_key {
                        "host key verified"
                    } else {
                        "host key NOT checked: terminal.ssh_host_key_checking is false"
                    }
                )),
                other => Err(BackendError::Unavailable {
                    kind: "ssh",
                    detail: format!(
                        "{} accepted the connection but running `true` failed (exit status {other:?})",
                        target.label()
                    ),
                }),
            }
        })
    }
}

/// A scope's handle on the shared connection.
#[derive(Debug)]
pub struct SshBackend {
    link: Arc<Link>,
    cwd: String,
    users: Arc<AtomicUsize>,
    stopped: AtomicBool,
}

impl SshBackend {
    fn check_open(&self) -> Result<(), BackendError> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(BackendError::Gone {
                kind: "ssh",
                detail: "this ssh backend was shut down".to_owned(),
            });
        }
        Ok(())
    }
}

impl Backend for SshBackend {
    fn kind(&self) -> &'static str {
        "ssh"
    }

    /// `terminal.cwd` as written (`~` is the remote home), else the remote home.
    fn default_cwd(&self) -> String {
        self.cwd.clone()
    }

    fn host_roots(&self) -> Option<Vec<PathBuf>> {
        None
    }

    fn run<'a>(
        &'a self,
        exec: &'a Exec,
        cancel: &'a CancellationToken,
    ) -> BackendFuture<'a, RunResult> {
        Box::pin(async move {
            self.check_open()?;
            run::run(&self.link, exec, cancel).await
        })
    }

    fn read_file<'a>(&'a self, path: &'a str) -> BackendFuture<'a, Option<Vec<u8>>> {
        Box::pin(async move {
            self.check_open()?;
            files::read(&self.link, &self.cwd, path).await
        })
    }

    fn write_file<'a>(&'a self, path: &'a str, data: &'a [u8]) -> BackendFuture<'a, ()> {
        Box::pin(async move {
            self.check_open()?;
            files::write(&self.link, &self.cwd, path, data).await
        })
    }

    /// Closes the connection when this was the last scope using it.
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.stopped.swap(true, Ordering::SeqCst) {
                return;
            }
            if self.users.fetch_sub(1, Ordering::SeqCst) == 1 {
                self.link.close().await;
            }
        })
    }
}
