//! Whole files in the container, byte for byte: read with `cat` on the exec's stdout, written
//! through the exec's stdin. Exec rather than the archive endpoints because the engine's
//! archive copy does not see a tmpfs mounted in the container (`/root` and `/workspace` are
//! tmpfs when `container_persistent` is false), and exec runs as the container's user, so
//! file ownership matches what a command would create.

use std::time::Duration;

use super::container::DockerBackend;
use super::exec::{CollectError, Collected, collect, sh};
use super::scripts::{READ, READ_MISSING, READ_NOT_FILE, WRITE};
use crate::tools::backend::BackendError;

/// The largest file read into the daemon's memory.
const MAX_READ_BYTES: usize = 64 * 1024 * 1024;
/// How long one file operation may take.
const FILE_WITHIN: Duration = Duration::from_secs(120);

impl DockerBackend {
    pub(super) async fn read(&self, path: &str) -> Result<Option<Vec<u8>>, BackendError> {
        let done = self
            .file_program(sh(READ, &[path]), None, MAX_READ_BYTES)
            .await
            .map_err(|e| match e {
                FileError::Backend(e) => e,
                FileError::TooLarge => BackendError::File(format!(
                    "{path} is larger than {} MiB; read a part of it with a command",
                    MAX_READ_BYTES / 1024 / 1024
                )),
            })?;
        match done.exit {
            Some(0) => Ok(Some(done.stdout)),
            Some(READ_MISSING) => Ok(None),
            Some(READ_NOT_FILE) => Err(BackendError::File(format!("{path} is not a regular file"))),
            _ => Err(BackendError::File(format!(
                "could not read {path} in the container: {}",
                stderr_line(&done)
            ))),
        }
    }

    pub(super) async fn write(&self, path: &str, data: &[u8]) -> Result<(), BackendError> {
        if path.is_empty() {
            return Err(BackendError::File("no file path given".to_owned()));
        }
        let done = self
            .file_program(sh(WRITE, &[path]), Some(data), 4096)
            .await
            .map_err(|e| match e {
                FileError::Backend(e) => e,
                FileError::TooLarge => {
                    BackendError::File(format!("writing {path} printed unexpected output"))
                }
            })?;
        match done.exit {
            Some(0) => Ok(()),
            _ => Err(BackendError::File(format!(
                "could not write {path} in the container: {}",
                stderr_line(&done)
            ))),
        }
    }

    /// Runs a file program; a process that died without an exit code, or any engine
    /// failure, is checked against the container's state.
    async fn file_program(
        &self,
        cmd: Vec<String>,
        input: Option<&[u8]>,
        limit: usize,
    ) -> Result<Collected, FileError> {
        self.check_open()?;
        let client = self.engine.client().await?;
        let run = collect(client, &self.id, cmd, self.cwd, input, limit);
        let done = match tokio::time::timeout(FILE_WITHIN, run).await {
            Err(_) => {
                return Err(FileError::Backend(BackendError::File(format!(
                    "the file operation did not finish within {}s",
                    FILE_WITHIN.as_secs()
                ))));
            }
            Ok(Err(CollectError::TooLarge)) => return Err(FileError::TooLarge),
            Ok(Err(CollectError::Engine(e) | CollectError::Stream(e))) => {
                return Err(self.explain("a file operation", e).await.into());
            }
            Ok(Ok(done)) => done,
        };
        if done.exit.is_none_or(|code| code >= 128)
            && let Some(reason) = self.gone_reason().await?
        {
            return Err(self.gone(reason).into());
        }
        Ok(done)
    }
}

enum FileError {
    Backend(BackendError),
    TooLarge,
}

impl From<BackendError> for FileError {
    fn from(e: BackendError) -> Self {
        FileError::Backend(e)
    }
}

/// The first line of what the program printed on stderr, or its exit code.
fn stderr_line(done: &Collected) -> String {
    let text = String::from_utf8_lossy(&done.stderr);
    match text.lines().map(str::trim).find(|l| !l.is_empty()) {
        Some(line) => line.to_owned(),
        None => match done.exit {
            Some(code) => format!("exit status {code}"),
            None => "the process did not finish".to_owned(),
        },
    }
}
