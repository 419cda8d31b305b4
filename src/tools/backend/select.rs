//! Which backend `terminal:` asks for, built once per daemon: `None` for the host itself
//! (`local` shared by everyone, hermesd's behaviour before sandboxes), else the scoped
//! [`Sandboxes`]. A backend that cannot be built (bubblewrap missing, a bad Docker
//! setting) is not replaced by the host: every call gets the reason instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{Backend, BackendError, BackendFactory, BackendFuture, BwrapFactory, Sandboxes, Scope};
use crate::config::{SandboxScope, TerminalBackend, TerminalConfig};

/// Refuses every call with the reason the configured backend could not be built.
#[derive(Debug)]
pub struct UnavailableFactory {
    kind: &'static str,
    reason: String,
}

impl BackendFactory for UnavailableFactory {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn open<'a>(&'a self, _scope: &'a Scope) -> BackendFuture<'a, Arc<dyn Backend>> {
        Box::pin(async move {
            Err(BackendError::Unavailable {
                kind: self.kind,
                detail: self.reason.clone(),
            })
        })
    }

    fn probe(&self) -> BackendFuture<'_, String> {
        Box::pin(async move {
            Err(BackendError::Unavailable {
                kind: self.kind,
                detail: self.reason.clone(),
            })
        })
    }
}

/// Where per-scope sandboxes keep their files: `terminal.sandbox_dir`, else
/// `$HERMES_HOME/sandboxes`.
pub fn sandbox_base(terminal: &TerminalConfig, home: &Path) -> PathBuf {
    terminal
        .sandbox_dir
        .clone()
        .unwrap_or_else(|| home.join("sandboxes"))
}

/// The daemon user's home directory (`HOME`, else the system's record of it).
fn user_home(env: &BTreeMap<String, String>) -> PathBuf {
    env.get("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(std::env::home_dir)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// The sandboxes `terminal` configures, or `None` when commands run on the host.
pub fn sandboxes(
    terminal: &TerminalConfig,
    home: &Path,
    env: &BTreeMap<String, String>,
) -> Option<Arc<Sandboxes>> {
    let factory: Result<Arc<dyn BackendFactory>, (&'static str, String)> = match terminal.backend {
        TerminalBackend::Local if terminal.sandbox_scope == SandboxScope::Shared => return None,
        TerminalBackend::Local => BwrapFactory::new(
            sandbox_base(terminal, home).join("local"),
            terminal.sandbox_network,
            terminal.cwd.as_ref().map(PathBuf::from),
            env,
        )
        .map(|f| Arc::new(f) as Arc<dyn BackendFactory>)
        .map_err(|e| ("sandbox", e)),
        TerminalBackend::Docker => super::docker_factory(terminal, home).map_err(|e| ("docker", e)),
        TerminalBackend::Ssh => {
            super::ssh_factory(terminal, &user_home(env)).map_err(|e| ("ssh", e))
        }
    };
    let factory = factory.unwrap_or_else(|(kind, reason)| {
        tracing::error!(
            backend = kind,
            "{reason}; terminal and file tools will refuse to run"
        );
        Arc::new(UnavailableFactory { kind, reason })
    });
    Some(Arc::new(Sandboxes::new(
        factory,
        Duration::from_secs(terminal.lifetime_seconds.max(1)),
    )))
}
