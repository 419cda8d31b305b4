//! The local shell backend: `bash -c` in its own process group with stdout and stderr on
//! one pipe, a bounded foreground run with timeout and interrupt, and process-group kill
//! (TERM, then KILL after a second) so a command's children die with it.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::output::{BoundedOutput, Utf8Decoder};
pub use crate::process::{exit_code, find_bash, kill_group};

/// How long to keep reading after the shell exits: a backgrounded grandchild may hold the
/// pipe open forever, so stop once it has been idle this long.
const DRAIN_IDLE: Duration = Duration::from_millis(300);

/// A script for `bash -c`.
#[derive(Debug, Clone)]
pub struct ShellCommand {
    pub script: String,
    pub cwd: PathBuf,
    pub env: BTreeMap<String, String>,
    /// Give the process a stdin pipe (background processes accept `write`/`submit`).
    pub stdin: bool,
}

/// A running shell: the child, the merged output pipe and its process group.
#[derive(Debug)]
pub struct ShellProcess {
    pub child: Child,
    pub output: pipe::Receiver,
    pub pgid: Option<Pid>,
}

/// Starts the script in a new process group.
pub fn spawn(command: &ShellCommand) -> std::io::Result<ShellProcess> {
    let (reader, writer) = std::io::pipe()?;
    let mut cmd = Command::new(find_bash(&command.env));
    cmd.arg("-c")
        .arg(&command.script)
        .current_dir(&command.cwd)
        .env_clear()
        .envs(&command.env)
        .stdin(if command.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(writer.try_clone()?)
        .stderr(writer)
        .process_group(0);
    let child = cmd.spawn()?;
    // The command holds our copies of the pipe's write end; drop them so EOF can arrive.
    drop(cmd);
    let output = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
    Ok(ShellProcess {
        child,
        output,
        pgid,
    })
}

/// How a foreground command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResult {
    /// Bounded output, with the timeout/interrupt status line appended when relevant.
    pub output: String,
    /// The exit code; 124 after a timeout, 130 after an interrupt.
    pub exit_code: i32,
    pub timed_out: bool,
    pub interrupted: bool,
}

/// Reads whatever is still in the pipe until EOF or [`DRAIN_IDLE`] of silence.
async fn drain(
    output: &mut pipe::Receiver,
    collector: &mut BoundedOutput,
    decoder: &mut Utf8Decoder,
) {
    let mut buf = vec![0u8; 8192];
    while let Ok(Ok(n)) = tokio::time::timeout(DRAIN_IDLE, output.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        collector.push(&decoder.decode(&buf[..n]));
    }
    collector.push(&decoder.finish());
}

/// Runs a command to completion, keeping at most `max_chars` of output. On timeout or
/// cancellation the process group is killed.
pub async fn run_foreground(
    command: &ShellCommand,
    timeout: Duration,
    cancel: &CancellationToken,
    max_chars: usize,
) -> std::io::Result<RunResult> {
    let ShellProcess {
        mut child,
        mut output,
        pgid,
    } = spawn(command)?;
    let guard = GroupGuard(pgid);
    let mut collector = BoundedOutput::new(max_chars);
    let mut decoder = Utf8Decoder::default();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut buf = vec![0u8; 8192];
    let mut eof = false;
    enum End {
        Exited(ExitStatus),
        TimedOut,
        Interrupted,
    }
    let end = loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => break End::Interrupted,
            () = tokio::time::sleep_until(deadline) => break End::TimedOut,
            read = output.read(&mut buf), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => collector.push(&decoder.decode(&buf[..n])),
            },
            status = child.wait() => break End::Exited(status?),
        }
    };
    let result = match end {
        End::Exited(status) => {
            drain(&mut output, &mut collector, &mut decoder).await;
            RunResult {
                output: collector.render(""),
                exit_code: exit_code(status),
                timed_out: false,
                interrupted: false,
            }
        }
        End::TimedOut => {
            kill_group(&mut child, pgid).await;
            drain(&mut output, &mut collector, &mut decoder).await;
            let suffix = format!("\n[Command timed out after {}s]", timeout.as_secs());
            let rendered = collector.render(&suffix);
            let output = if collector.total_chars() == 0 {
                rendered.trim_start().to_owned()
            } else {
                rendered
            };
            RunResult {
                output,
                exit_code: 124,
                timed_out: true,
                interrupted: false,
            }
        }
        End::Interrupted => {
            kill_group(&mut child, pgid).await;
            drain(&mut output, &mut collector, &mut decoder).await;
            RunResult {
                output: collector.render("\n[Command interrupted]"),
                exit_code: 130,
                timed_out: false,
                interrupted: true,
            }
        }
    };
    guard.disarm();
    Ok(result)
}

/// Kills the process group if the caller stops awaiting the command (the agent turn was
/// dropped), so no shell outlives the tool call that started it.
struct GroupGuard(Option<Pid>);

impl GroupGuard {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            let _ = kill_process_group(pgid, Signal::KILL);
        }
    }
}
