//! Processes in a container through the exec API: start one with its output attached (the
//! multiplexed stdout/stderr stream) and optionally stdin, collect a small program's output,
//! and kill a command that ran out of time. The command runner itself is in `run.rs`.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as EngineError;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use futures_util::{Stream, StreamExt};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::engine::Engine;
use super::scripts::KILL;

pub(super) type Output = Pin<Box<dyn Stream<Item = Result<LogOutput, EngineError>> + Send>>;

/// How long the kill program may take (it waits a second between TERM and KILL).
const KILL_WITHIN: Duration = Duration::from_secs(15);

/// A started exec: its id (for inspect) and its attached streams.
pub(super) struct Started {
    pub id: String,
    pub output: Output,
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
}

/// `sh -c PROGRAM hermesd ARGS...`: the program sees ARGS as `$1`, `$2`, ...
pub(super) fn sh(program: &str, args: &[&str]) -> Vec<String> {
    let mut cmd = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        program.to_owned(),
        "hermesd".to_owned(),
    ];
    cmd.extend(args.iter().map(|a| (*a).to_owned()));
    cmd
}

/// Creates and starts an exec with stdout and stderr attached (and stdin when asked).
pub(super) async fn start(
    client: &Docker,
    container: &str,
    cmd: Vec<String>,
    env: Vec<String>,
    cwd: &str,
    stdin: bool,
) -> Result<Started, EngineError> {
    let created = client
        .create_exec(
            container,
            CreateExecOptions::<String> {
                attach_stdin: Some(stdin),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                tty: Some(false),
                env: Some(env),
                cmd: Some(cmd),
                working_dir: Some(cwd.to_owned()),
                ..CreateExecOptions::default()
            },
        )
        .await?;
    let options = StartExecOptions {
        detach: false,
        tty: false,
        output_capacity: Some(64 * 1024),
    };
    match client.start_exec(&created.id, Some(options)).await? {
        StartExecResults::Attached { output, input } => Ok(Started {
            id: created.id,
            output,
            input,
        }),
        StartExecResults::Detached => Err(EngineError::DockerStreamError {
            error: "the engine started the exec detached".to_owned(),
        }),
    }
}

/// A finished small program's output.
#[derive(Debug, Default)]
pub(super) struct Collected {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The engine's exit code; `None` when it has none (the process did not end normally).
    pub exit: Option<i64>,
}

#[derive(Debug)]
pub(super) enum CollectError {
    /// The engine refused or failed a request (create, start, inspect).
    Engine(EngineError),
    /// The attached stream broke before the process ended.
    Stream(EngineError),
    /// Stdout passed the limit.
    TooLarge,
}

/// Runs a program to its end, feeding `input` to its stdin, keeping stdout up to `limit`
/// bytes (more is [`CollectError::TooLarge`]) and a little of stderr.
pub(super) async fn collect(
    client: &Docker,
    container: &str,
    cmd: Vec<String>,
    cwd: &str,
    input: Option<&[u8]>,
    limit: usize,
) -> Result<Collected, CollectError> {
    let mut started = start(client, container, cmd, Vec::new(), cwd, input.is_some())
        .await
        .map_err(CollectError::Engine)?;
    if let Some(data) = input {
        let sent = async {
            started.input.write_all(data).await?;
            started.input.shutdown().await
        };
        if let Err(e) = sent.await {
            return Err(CollectError::Stream(EngineError::IOError { err: e }));
        }
    }
    let mut out = Collected::default();
    while let Some(frame) = started.output.next().await {
        match frame.map_err(CollectError::Stream)? {
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                if out.stdout.len() + message.len() > limit {
                    return Err(CollectError::TooLarge);
                }
                out.stdout.extend_from_slice(&message);
            }
            LogOutput::StdErr { message } => {
                let room = 4096usize.saturating_sub(out.stderr.len());
                out.stderr
                    .extend_from_slice(&message[..message.len().min(room)]);
            }
            LogOutput::StdIn { .. } => {}
        }
    }
    let inspected = client
        .inspect_exec(&started.id)
        .await
        .map_err(CollectError::Engine)?;
    out.exit = match inspected.running {
        Some(true) => None,
        _ => inspected.exit_code,
    };
    Ok(out)
}

/// Kills the command of `token` (see [`KILL`]); failures are logged, not returned: the
/// caller reports the timeout either way.
pub(super) async fn kill(engine: &Engine, container: &str, token: &str) {
    let killed = async {
        let client = engine.client().await.map_err(|e| e.to_string())?;
        collect(client, container, sh(KILL, &[token]), "/", None, 4096)
            .await
            .map_err(|e| format!("{e:?}"))
    };
    match tokio::time::timeout(KILL_WITHIN, killed).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => {
            tracing::warn!(%error, "could not kill a timed-out command in its container")
        }
        Err(_) => tracing::warn!(
            "the kill of a timed-out command did not finish within {}s",
            KILL_WITHIN.as_secs()
        ),
    }
}

/// Kills the command if the caller stops awaiting it (the turn was dropped), so no command
/// outlives the tool call that started it.
pub(super) struct KillOnDrop {
    pub engine: Arc<Engine>,
    pub container: String,
    pub token: Option<String>,
}

impl KillOnDrop {
    pub(super) fn disarm(mut self) {
        self.token = None;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let Some(token) = self.token.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let engine = Arc::clone(&self.engine);
            let container = self.container.clone();
            runtime.spawn(async move { kill(&engine, &container, &token).await });
        }
    }
}
