//! A foreground command in the container, with the local backend's contract: stdout and
//! stderr merged and bounded to `max_chars`, the same status lines and exit codes (124 after
//! a timeout, 130 after an interrupt), and on either the command's processes really killed
//! inside the container (see `scripts.rs`).

use std::sync::Arc;
use std::time::Duration;

use bollard::container::LogOutput;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::container::DockerBackend;
use super::exec::{KillOnDrop, Output, kill, sh, start};
use super::scripts::{EndMark, WRAPPER};
use crate::tools::backend::{BackendError, Exec, RunResult};
use crate::tools::output::{BoundedOutput, Utf8Decoder};

/// After the command ended, how long to keep reading output a backgrounded child still
/// writes: stop once it has been quiet this long (as the local backend does) ...
const DRAIN_IDLE: Duration = Duration::from_millis(300);
/// ... and in any case after this long.
const DRAIN_MAX: Duration = Duration::from_secs(5);
/// How often, and how far apart, to ask for an exit code the engine has not recorded yet.
const INSPECT_TRIES: usize = 10;
const INSPECT_PAUSE: Duration = Duration::from_millis(50);

/// The merged, bounded output of one command.
struct Sink {
    mark: EndMark,
    decoder: Utf8Decoder,
    collector: BoundedOutput,
}

impl Sink {
    fn push(&mut self, frame: LogOutput) {
        let bytes = match frame {
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                self.mark.feed(&message)
            }
            LogOutput::StdErr { message } => message.to_vec(),
            LogOutput::StdIn { .. } => return,
        };
        let text = self.decoder.decode(&bytes);
        self.collector.push(&text);
    }

    fn finish(&mut self) {
        let held = self.mark.finish();
        let mut text = self.decoder.decode(&held);
        text.push_str(&self.decoder.finish());
        self.collector.push(&text);
    }
}

/// Reads what is still coming until the stream ends, [`DRAIN_IDLE`] of silence or
/// [`DRAIN_MAX`].
async fn drain(output: &mut Output, sink: &mut Sink) {
    let until = tokio::time::Instant::now() + DRAIN_MAX;
    loop {
        let next = tokio::time::timeout(DRAIN_IDLE, output.next());
        match tokio::time::timeout_at(until, next).await {
            Ok(Ok(Some(Ok(frame)))) => sink.push(frame),
            _ => break,
        }
    }
    sink.finish();
}

enum End {
    /// The wrapper printed its end mark with this status.
    Done(i32),
    /// The stream ended (or broke) without an end mark.
    Closed(Option<bollard::errors::Error>),
    TimedOut,
    Interrupted,
}

impl DockerBackend {
    pub(super) async fn run_command(
        &self,
        exec: &Exec,
        cancel: &CancellationToken,
    ) -> Result<RunResult, BackendError> {
        self.check_open()?;
        let client = self.engine.client().await?;
        let token = format!("{:016x}", rand::random::<u64>());
        let cmd = sh(WRAPPER, &[&exec.script, &token, &exec.cwd]);
        let env = exec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut started = match start(client, &self.id, cmd, env, self.cwd, false).await {
            Ok(started) => started,
            Err(e) => return Err(self.explain("starting a command", e).await),
        };
        let guard = KillOnDrop {
            engine: Arc::clone(&self.engine),
            container: self.id.clone(),
            token: Some(token.clone()),
        };
        let mut sink = Sink {
            mark: EndMark::new(&token),
            decoder: Utf8Decoder::default(),
            collector: BoundedOutput::new(exec.max_chars),
        };
        let deadline = tokio::time::Instant::now() + exec.timeout;
        let end = loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => break End::Interrupted,
                () = tokio::time::sleep_until(deadline) => break End::TimedOut,
                frame = started.output.next() => match frame {
                    Some(Ok(frame)) => {
                        sink.push(frame);
                        if let Some(status) = sink.mark.status() {
                            break End::Done(status);
                        }
                    }
                    Some(Err(e)) => break End::Closed(Some(e)),
                    None => break End::Closed(None),
                },
            }
        };
        let result = match end {
            End::Done(status) => {
                drain(&mut started.output, &mut sink).await;
                Ok(RunResult {
                    output: sink.collector.render(""),
                    exit_code: status,
                    timed_out: false,
                    interrupted: false,
                })
            }
            End::Closed(broken) => {
                sink.finish();
                self.closed_without_mark(&started.id, broken)
                    .await
                    .map(|exit_code| RunResult {
                        output: sink.collector.render(""),
                        exit_code,
                        timed_out: false,
                        interrupted: false,
                    })
            }
            End::TimedOut => {
                kill(&self.engine, &self.id, &token).await;
                drain(&mut started.output, &mut sink).await;
                let suffix = format!("\n[Command timed out after {}s]", exec.timeout.as_secs());
                let rendered = sink.collector.render(&suffix);
                let output = if sink.collector.total_chars() == 0 {
                    rendered.trim_start().to_owned()
                } else {
                    rendered
                };
                Ok(RunResult {
                    output,
                    exit_code: 124,
                    timed_out: true,
                    interrupted: false,
                })
            }
            End::Interrupted => {
                kill(&self.engine, &self.id, &token).await;
                drain(&mut started.output, &mut sink).await;
                Ok(RunResult {
                    output: sink.collector.render("\n[Command interrupted]"),
                    exit_code: 130,
                    timed_out: false,
                    interrupted: true,
                })
            }
        };
        guard.disarm();
        result
    }

    /// The wrapper ended without its mark: it was killed (by the command itself, the
    /// kernel's OOM killer, or with its container) or the stream broke. The exit code is
    /// the engine's; a container that no longer runs makes the backend gone.
    async fn closed_without_mark(
        &self,
        exec_id: &str,
        broken: Option<bollard::errors::Error>,
    ) -> Result<i32, BackendError> {
        if let Some(reason) = self.gone_reason().await? {
            return Err(self.gone(reason));
        }
        if let Some(error) = broken {
            return Err(self.engine.failed("reading a command's output", &error));
        }
        let client = self.engine.client().await?;
        // An engine may close the stream a moment before it records the exit code: ask a
        // few times, briefly.
        let mut inspected = None;
        for _ in 0..INSPECT_TRIES {
            let answer = match client.inspect_exec(exec_id).await {
                Ok(answer) => answer,
                Err(e) => return Err(self.explain("inspecting a command", e).await),
            };
            let settled = answer.running != Some(true) && answer.exit_code.is_some();
            inspected = Some(answer);
            if settled {
                break;
            }
            tokio::time::sleep(INSPECT_PAUSE).await;
        }
        let inspected = inspected.unwrap_or_default();
        match (inspected.running, inspected.exit_code) {
            (Some(true), _) | (_, None) => Err(BackendError::Unavailable {
                kind: "docker",
                detail: format!(
                    "the engine at {} closed a command's output while it still ran",
                    self.engine.shown()
                ),
            }),
            (_, Some(code)) => Ok(i32::try_from(code).unwrap_or(-1)),
        }
    }
}
