//! Where the terminal and the file tools act (`terminal.backend`): the host itself (`local`),
//! a bubblewrap sandbox per scope (`local` with `terminal.sandbox_scope`), a container on a
//! Docker-compatible engine (`docker`) or a remote machine (`ssh`).
//!
//! Every backend runs a shell script and reads and writes whole files; the terminal tool builds
//! the script (approval, cwd marker, timeout) the same way for all of them, so the rules that
//! guard a command do not depend on where it runs. [`Sandboxes`] hands each tool call the
//! backend of its scope (everyone, the chat, or the person) and stops idle ones.

mod bwrap;
mod docker;
mod local;
mod sandboxes;
mod scope;
mod select;
mod ssh;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

pub use super::local::RunResult;

pub use bwrap::{BwrapFactory, find_bwrap};
pub use docker::{DockerBackend, DockerFactory};
pub use local::{LocalBackend, LocalFactory};
pub use sandboxes::{BackendFactory, Sandboxes};
pub use scope::Scope;
pub use select::{sandbox_base, sandboxes};
pub use ssh::{SshBackend, SshFactory};

/// A boxed future returned by a backend (the trait is used as `dyn Backend`).
pub type BackendFuture<'a, T> = BoxFuture<'a, Result<T, BackendError>>;

/// One foreground command: a complete script for a POSIX shell (the terminal tool's wrapper
/// already changes into the right directory and prints the cwd marker).
#[derive(Debug, Clone)]
pub struct Exec {
    pub script: String,
    /// Where the process starts (the script `cd`s again; this only has to exist).
    pub cwd: String,
    /// On a host backend (local, bubblewrap) the command's whole environment: nothing of the
    /// daemon's own is added. On a remote backend (docker, ssh) the variables set on top of
    /// the target's own environment (its PATH and HOME stay).
    pub env: BTreeMap<String, String>,
    pub timeout: Duration,
    /// Output kept, in characters (head and tail).
    pub max_chars: usize,
}

/// Why a backend could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The sandbox, container or connection went away (it died, was removed, the link
    /// dropped): this instance is discarded and the next call gets a fresh one.
    #[error("the {kind} sandbox went away: {detail}")]
    Gone { kind: &'static str, detail: String },
    /// The backend cannot be reached or started (no engine, refused connection, bad key).
    #[error("the {kind} backend is unavailable: {detail}")]
    Unavailable { kind: &'static str, detail: String },
    /// A file operation failed for a reason the model can act on (not found is `Ok(None)`).
    #[error("{0}")]
    File(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl BackendError {
    pub fn is_gone(&self) -> bool {
        matches!(self, BackendError::Gone { .. })
    }
}

/// Where a tool call acts. Implementations are cheap to share (`Arc<dyn Backend>`) and safe
/// to call from several tool calls at once.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// `local`, `sandbox`, `docker` or `ssh`: shown in logs, errors and `doctor`.
    fn kind(&self) -> &'static str;

    /// The directory a session starts in.
    fn default_cwd(&self) -> String;

    /// When the backend's files are the host's files at the same paths, the directories the
    /// file tools may touch (local, bubblewrap); `None` when files live elsewhere (a container,
    /// a remote machine) and must go through [`read_file`](Self::read_file) and
    /// [`write_file`](Self::write_file).
    fn host_roots(&self) -> Option<Vec<PathBuf>>;

    /// For backends that run commands as host processes: the command line for `bash -c` on
    /// the host that runs `script` inside this backend, starting in `cwd` with `env` (the
    /// terminal's background processes use it). `None` on remote backends, where background
    /// processes are not offered.
    fn host_command(
        &self,
        _script: &str,
        _cwd: &str,
        _env: &BTreeMap<String, String>,
    ) -> Option<String> {
        None
    }

    /// Runs `exec` to completion, its timeout or `cancel`, whichever comes first. A timeout
    /// or an interrupt is a normal result (`timed_out` / `interrupted`), not an error.
    fn run<'a>(
        &'a self,
        exec: &'a Exec,
        cancel: &'a CancellationToken,
    ) -> BackendFuture<'a, RunResult>;

    /// A file's bytes, `None` when it does not exist. Relative paths are relative to
    /// [`default_cwd`](Self::default_cwd).
    fn read_file<'a>(&'a self, path: &'a str) -> BackendFuture<'a, Option<Vec<u8>>>;

    /// Creates or replaces a file, making missing parent directories.
    fn write_file<'a>(&'a self, path: &'a str, data: &'a [u8]) -> BackendFuture<'a, ()>;

    /// Stops and removes what this instance started (idle reaping, shutdown). Calls after it
    /// fail with [`BackendError::Gone`].
    fn shutdown(&self) -> BoxFuture<'_, ()>;
}

/// The sandbox a tool call acts in: its scope among the daemon's open backends. Resolved
/// only when a tool needs it, so a turn that runs no command starts no container.
#[derive(Debug, Clone)]
pub struct SandboxRef {
    pub sandboxes: std::sync::Arc<Sandboxes>,
    pub scope: Scope,
}

impl SandboxRef {
    /// The scope's backend, opened on first use.
    pub async fn backend(&self) -> Result<std::sync::Arc<dyn Backend>, BackendError> {
        self.sandboxes.get(&self.scope).await
    }

    /// Forgets `backend` after it went away; the next call opens a fresh one.
    pub async fn discard(&self, backend: &std::sync::Arc<dyn Backend>) {
        self.sandboxes.discard(&self.scope, backend).await;
    }
}

/// The docker backend's factory.
fn docker_factory(
    terminal: &crate::config::TerminalConfig,
    home: &std::path::Path,
) -> Result<std::sync::Arc<dyn BackendFactory>, String> {
    let factory = DockerFactory::new(&terminal.docker, terminal, home)?;
    Ok(std::sync::Arc::new(factory))
}

/// The ssh backend's factory; `user_home` is where `~/.ssh` (keys, known hosts) is looked up.
fn ssh_factory(
    terminal: &crate::config::TerminalConfig,
    user_home: &std::path::Path,
) -> Result<std::sync::Arc<dyn BackendFactory>, String> {
    let factory = SshFactory::new(&terminal.ssh, terminal, user_home)?;
    Ok(std::sync::Arc::new(factory))
}
