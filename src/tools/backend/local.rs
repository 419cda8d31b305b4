//! The host itself: commands run under bash in the daemon's own namespace, files are the
//! host's files under the configured roots. One instance serves every scope.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::{Backend, BackendError, BackendFactory, BackendFuture, Exec, RunResult, Scope};
use crate::tools::local::{ShellCommand, run_foreground};

#[derive(Debug, Clone)]
pub struct LocalBackend {
    cwd: PathBuf,
    roots: Vec<PathBuf>,
}

impl LocalBackend {
    /// Commands start in `cwd`; file tools may touch `roots`.
    pub fn new(cwd: PathBuf, roots: Vec<PathBuf>) -> Self {
        Self { cwd, roots }
    }
}

impl Backend for LocalBackend {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn default_cwd(&self) -> String {
        self.cwd.display().to_string()
    }

    fn host_roots(&self) -> Option<Vec<PathBuf>> {
        Some(self.roots.clone())
    }

    fn host_command(
        &self,
        script: &str,
        _cwd: &str,
        _env: &std::collections::BTreeMap<String, String>,
    ) -> Option<String> {
        Some(script.to_owned())
    }

    fn run<'a>(
        &'a self,
        exec: &'a Exec,
        cancel: &'a CancellationToken,
    ) -> BackendFuture<'a, RunResult> {
        Box::pin(async move {
            let shell = ShellCommand {
                script: exec.script.clone(),
                cwd: PathBuf::from(&exec.cwd),
                env: exec.env.clone(),
                stdin: false,
            };
            Ok(run_foreground(&shell, exec.timeout, cancel, exec.max_chars).await?)
        })
    }

    fn read_file<'a>(&'a self, path: &'a str) -> BackendFuture<'a, Option<Vec<u8>>> {
        Box::pin(read_host_file(self.cwd.join(path)))
    }

    fn write_file<'a>(&'a self, path: &'a str, data: &'a [u8]) -> BackendFuture<'a, ()> {
        Box::pin(write_host_file(self.cwd.join(path), data))
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// A host file's bytes, `None` when it does not exist (backends whose files are the host's).
pub(super) async fn read_host_file(path: PathBuf) -> Result<Option<Vec<u8>>, BackendError> {
    match tokio::fs::read(path).await {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Creates or replaces a host file, making missing parent directories.
pub(super) async fn write_host_file(path: PathBuf, data: &[u8]) -> Result<(), BackendError> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await?;
    }
    Ok(tokio::fs::write(path, data).await?)
}

/// Hands every scope the same host backend.
#[derive(Debug)]
pub struct LocalFactory(pub Arc<LocalBackend>);

impl BackendFactory for LocalFactory {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn open<'a>(&'a self, _scope: &'a Scope) -> BackendFuture<'a, Arc<dyn Backend>> {
        let backend: Arc<dyn Backend> = self.0.clone();
        Box::pin(async move { Ok(backend) })
    }

    fn probe(&self) -> BackendFuture<'_, String> {
        Box::pin(async move {
            Ok(format!(
                "commands run on this host, starting in {}",
                self.0.cwd.display()
            ))
        })
    }
}
