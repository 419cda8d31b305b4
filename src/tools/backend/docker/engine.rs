//! The connection to the engine: `DOCKER_HOST` (`unix:///path` or plain `tcp://host:port`)
//! or the default socket, opened on first use and agreeing on the API version the engine
//! speaks (an older Docker or podman answers at its own version, a newer one refuses a
//! version it dropped). Errors are sorted into what the sandbox layer acts on: the engine
//! cannot be reached, or it answered with a status.

use std::path::PathBuf;
use std::time::Duration;

use bollard::errors::Error as EngineError;
use bollard::{API_DEFAULT_VERSION, Docker};
use tokio::sync::OnceCell;

use crate::tools::backend::BackendError;

/// How long one request may wait for the engine's answer (not a stream's whole length).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq)]
enum Address {
    Unix(PathBuf),
    Tcp(String),
}

#[derive(Debug)]
pub(super) struct Engine {
    address: Address,
    /// The address as shown in errors and `doctor`.
    shown: String,
    client: OnceCell<Docker>,
}

impl Engine {
    /// Reads `DOCKER_HOST`'s value (or the default socket). Schemes hermesd cannot speak are
    /// refused here, so the daemon does not start with a backend that can never work.
    pub(super) fn new(host: Option<&str>) -> Result<Self, String> {
        let host = host
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .unwrap_or("unix:///var/run/docker.sock");
        let address = if let Some(path) = host.strip_prefix("unix://") {
            if !path.starts_with('/') {
                return Err(format!(
                    "DOCKER_HOST {host}: a unix socket needs an absolute path (unix:///run/docker.sock)"
                ));
            }
            Address::Unix(PathBuf::from(path))
        } else if let Some(rest) = host
            .strip_prefix("tcp://")
            .or_else(|| host.strip_prefix("http://"))
        {
            let authority = rest.trim_end_matches('/');
            if authority.is_empty() || authority.contains('/') || authority.contains('@') {
                return Err(
                    "DOCKER_HOST: a tcp address is tcp://host:port (no user, no path)".to_owned(),
                );
            }
            Address::Tcp(format!("tcp://{authority}"))
        } else {
            let scheme = host.split("://").next().unwrap_or(host);
            return Err(format!(
                "DOCKER_HOST scheme '{scheme}' is not supported by hermesd's docker backend: use unix:///path/to/socket or tcp://host:port (plain HTTP; TLS and ssh:// are not supported)"
            ));
        };
        let shown = match &address {
            Address::Unix(path) => format!("unix://{}", path.display()),
            Address::Tcp(addr) => addr.clone(),
        };
        Ok(Self {
            address,
            shown,
            client: OnceCell::new(),
        })
    }

    pub(super) fn shown(&self) -> &str {
        &self.shown
    }

    /// The client, connected and version-agreed on first use; a failure is not kept, so the
    /// next call tries again (an engine started after the daemon is found).
    pub(super) async fn client(&self) -> Result<&Docker, BackendError> {
        self.client
            .get_or_try_init(|| async {
                let docker = match &self.address {
                    Address::Unix(path) => Docker::connect_with_unix(
                        &path.display().to_string(),
                        REQUEST_TIMEOUT.as_secs(),
                        API_DEFAULT_VERSION,
                    ),
                    Address::Tcp(addr) => Docker::connect_with_http(
                        addr,
                        REQUEST_TIMEOUT.as_secs(),
                        API_DEFAULT_VERSION,
                    ),
                }
                .map_err(|e| self.unavailable(&e))?;
                docker
                    .negotiate_version()
                    .await
                    .map_err(|e| self.unavailable(&e))
            })
            .await
    }

    /// The engine could not be reached or did not answer as an engine.
    pub(super) fn unavailable(&self, error: &EngineError) -> BackendError {
        BackendError::Unavailable {
            kind: "docker",
            detail: format!("no Docker engine at {}: {}", self.shown, describe(error)),
        }
    }

    /// An answer the engine gave that is not about the container being gone.
    pub(super) fn failed(&self, what: &str, error: &EngineError) -> BackendError {
        match status(error) {
            Some(_) => BackendError::Unavailable {
                kind: "docker",
                detail: format!(
                    "{what}: the engine at {} said {}",
                    self.shown,
                    describe(error)
                ),
            },
            None => self.unavailable(error),
        }
    }
}

/// The HTTP status of an engine answer, `None` for a transport failure.
pub(super) fn status(error: &EngineError) -> Option<u16> {
    match error {
        EngineError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// One line about an engine error: the status and message the engine sent, or the transport
/// failure.
pub(super) fn describe(error: &EngineError) -> String {
    match error {
        EngineError::DockerResponseServerError {
            status_code,
            message,
        } => format!("{status_code} {}", message.trim()),
        EngineError::SocketNotFoundError(path) => format!("socket {path} does not exist"),
        EngineError::RequestTimeoutError => {
            format!("no answer within {}s", REQUEST_TIMEOUT.as_secs())
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_read_or_refused_clearly() {
        let default = Engine::new(None).expect("default");
        assert_eq!(default.shown(), "unix:///var/run/docker.sock");
        let tcp = Engine::new(Some("tcp://127.0.0.1:2375")).expect("tcp");
        assert_eq!(tcp.address, Address::Tcp("tcp://127.0.0.1:2375".to_owned()));
        for bad in [
            "ssh://me@host",
            "npipe:////./pipe/docker_engine",
            "unix://relative.sock",
            "tcp://user:secret@host:2375",
        ] {
            let err = Engine::new(Some(bad)).expect_err(bad);
            assert!(err.contains("DOCKER_HOST"), "{err}");
            assert!(!err.contains("secret"), "{err}");
        }
    }
}
