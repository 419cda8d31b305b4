//! One scope's running container as a [`Backend`]: commands and files go through exec,
//! and any sign that the container is no longer running (the engine says 404 or 409, a
//! stream breaks, a process dies by a signal) is checked against the container's state, so
//! a dead or removed container is reported as gone with what happened to it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bollard::errors::Error as EngineError;
use bollard::query_parameters::{RemoveContainerOptions, StopContainerOptions};
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::engine::{Engine, status};
use crate::tools::backend::{Backend, BackendError, BackendFuture, Exec, RunResult};

/// Seconds the engine waits for PID 1 to leave on stop before it kills the container.
const STOP_GRACE_SECS: i32 = 2;

#[derive(Debug)]
pub struct DockerBackend {
    pub(super) engine: Arc<Engine>,
    pub(super) id: String,
    pub(super) name: String,
    pub(super) cwd: &'static str,
    closed: AtomicBool,
}

impl DockerBackend {
    pub(super) fn new(engine: Arc<Engine>, id: String, name: String, cwd: &'static str) -> Self {
        Self {
            engine,
            id,
            name,
            cwd,
            closed: AtomicBool::new(false),
        }
    }

    /// Gone once [`shutdown`](Backend::shutdown) ran.
    pub(super) fn check_open(&self) -> Result<(), BackendError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(self.gone(format!("container {} was stopped", self.name)));
        }
        Ok(())
    }

    pub(super) fn gone(&self, detail: String) -> BackendError {
        BackendError::Gone {
            kind: "docker",
            detail,
        }
    }

    /// Why the container can no longer run commands, `None` while it runs.
    pub(super) async fn gone_reason(&self) -> Result<Option<String>, BackendError> {
        let client = self.engine.client().await?;
        let inspected = match client.inspect_container(&self.id, None).await {
            Ok(inspected) => inspected,
            Err(e) if status(&e) == Some(404) => {
                return Ok(Some(format!("container {} was removed", self.name)));
            }
            // Podman reports states Docker's API does not define (`stopped`, `configured`,
            // `initialized`), which bollard's typed answer refuses; every one of them means
            // "not running" (only `running` is, and it deserializes).
            Err(e) if let Some(word) = undefined_state(&e) => {
                return Ok(Some(format!("container {} {word}", self.name)));
            }
            Err(e) => return Err(self.engine.failed("inspecting the container", &e)),
        };
        let state = inspected.state.unwrap_or_default();
        if state.running == Some(true) && state.paused != Some(true) {
            return Ok(None);
        }
        let word = state
            .status
            .map(|s| s.to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "stopped".to_owned());
        let mut detail = format!("container {} {word}", self.name);
        if let Some(code) = state.exit_code.filter(|_| state.running != Some(true)) {
            detail.push_str(&format!(" (exit {code}"));
            if state.oom_killed == Some(true) {
                detail.push_str(", killed for using too much memory");
            } else if code == 137 {
                detail.push_str(", killed");
            }
            detail.push(')');
        }
        Ok(Some(detail))
    }

    /// Turns a failed engine request into the error the sandbox layer acts on: gone when
    /// the container no longer runs, else the engine's failure.
    pub(super) async fn explain(&self, what: &str, error: EngineError) -> BackendError {
        match self.gone_reason().await {
            Ok(Some(reason)) => self.gone(reason),
            Ok(None) => self.engine.failed(what, &error),
            Err(unreachable) => unreachable,
        }
    }
}

/// The state word of an inspect answer bollard could not read because the engine used a
/// state Docker does not define (podman's `stopped`), from serde's "unknown variant" text.
fn undefined_state(error: &EngineError) -> Option<String> {
    let text = error.to_string();
    let rest = text.split_once("unknown variant `")?.1;
    let word = rest.split_once('`')?.0;
    (!word.is_empty() && word.chars().all(|c| c.is_ascii_alphabetic())).then(|| word.to_owned())
}

impl Backend for DockerBackend {
    fn kind(&self) -> &'static str {
        "docker"
    }

    fn default_cwd(&self) -> String {
        self.cwd.to_owned()
    }

    fn host_roots(&self) -> Option<Vec<std::path::PathBuf>> {
        None
    }

    fn run<'a>(
        &'a self,
        exec: &'a Exec,
        cancel: &'a CancellationToken,
    ) -> BackendFuture<'a, RunResult> {
        Box::pin(self.run_command(exec, cancel))
    }

    fn read_file<'a>(&'a self, path: &'a str) -> BackendFuture<'a, Option<Vec<u8>>> {
        Box::pin(self.read(path))
    }

    fn write_file<'a>(&'a self, path: &'a str, data: &'a [u8]) -> BackendFuture<'a, ()> {
        Box::pin(self.write(path, data))
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.closed.swap(true, Ordering::AcqRel) {
                return;
            }
            let Ok(client) = self.engine.client().await else {
                tracing::warn!(container = %self.name, "engine unreachable; the container is left for the next start's sweep");
                return;
            };
            let stop = StopContainerOptions {
                t: Some(STOP_GRACE_SECS),
                signal: None,
            };
            let stopping = client.stop_container(&self.id, Some(stop));
            // The engine answers a stop within the grace plus its kill; do not hang on it.
            let bound = Duration::from_secs(u64::from(STOP_GRACE_SECS.unsigned_abs()) + 20);
            let _ = tokio::time::timeout(bound, stopping).await;
            let remove = RemoveContainerOptions {
                force: true,
                v: true,
                link: false,
            };
            match client.remove_container(&self.id, Some(remove)).await {
                Ok(()) => tracing::info!(container = %self.name, "container removed"),
                Err(e) if status(&e) == Some(404) => {}
                Err(e) => tracing::warn!(
                    container = %self.name,
                    error = %super::engine::describe(&e),
                    "could not remove the container"
                ),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn podman_states_docker_does_not_define_are_read_from_the_refusal() {
        let refused = EngineError::JsonDataError {
            message: "unknown variant `stopped`, expected one of ``, `created`, `running`"
                .to_owned(),
            column: 235,
        };
        assert_eq!(undefined_state(&refused).as_deref(), Some("stopped"));
        let other = EngineError::JsonDataError {
            message: "missing field `Id`".to_owned(),
            column: 1,
        };
        assert_eq!(undefined_state(&other), None);
    }
}
