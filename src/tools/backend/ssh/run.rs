//! A foreground command on the remote machine: one channel on the shared connection, the
//! output bounded and decoded as the local backend does, the same status lines and exit
//! codes for a timeout (124) or an interrupt (130). Closing a channel does not stop a
//! process that has no terminal, so a timeout, an interrupt or a dropped call kills the
//! command's process group over a second channel.

use std::sync::Arc;
use std::time::Duration;

use russh::{ChannelMsg, Sig};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::connection::{Conn, Link};
use super::script::{self, PGID_MARKER};
use crate::tools::backend::{BackendError, Exec, RunResult};
use crate::tools::output::{BoundedOutput, Utf8Decoder};

/// How long to keep reading after the command exits (a backgrounded grandchild may keep the
/// output open): stop after this much silence, as the local backend does.
const DRAIN_IDLE: Duration = Duration::from_millis(300);

/// The kill over a second channel gets this long (it waits up to about a second itself).
const KILL_TIMEOUT: Duration = Duration::from_secs(15);

pub(super) fn gone(link: &Link, what: &str) -> BackendError {
    BackendError::Gone {
        kind: "ssh",
        detail: format!("the connection to {} dropped {what}", link.target().label()),
    }
}

/// 128 + the signal's number, as a shell reports it.
fn signal_code(sig: &Sig) -> i32 {
    128 + match sig {
        Sig::HUP => 1,
        Sig::INT => 2,
        Sig::QUIT => 3,
        Sig::ILL => 4,
        Sig::ABRT => 6,
        Sig::FPE => 8,
        Sig::KILL => 9,
        Sig::USR1 => 10,
        Sig::SEGV => 11,
        Sig::PIPE => 13,
        Sig::ALRM => 14,
        Sig::TERM => 15,
        Sig::Custom(_) => 127,
    }
}

/// The wrapper's stderr: first the process-group line, then (rarely) text of its own,
/// which joins the output.
#[derive(Default)]
struct Stderr {
    pending: Vec<u8>,
    pgid: Option<u32>,
    past_marker: bool,
    decoder: Utf8Decoder,
}

impl Stderr {
    fn push(&mut self, bytes: &[u8], output: &mut BoundedOutput) {
        if self.past_marker {
            output.push(&self.decoder.decode(bytes));
            return;
        }
        self.pending.extend_from_slice(bytes);
        let Some(end) = self.pending.iter().position(|&b| b == b'\n') else {
            return;
        };
        let line = String::from_utf8_lossy(&self.pending[..end]).into_owned();
        let rest = self.pending.split_off(end + 1);
        self.pending.clear();
        self.past_marker = true;
        match line.strip_prefix(PGID_MARKER).map(str::parse::<u32>) {
            Some(Ok(pgid)) if pgid > 1 => self.pgid = Some(pgid),
            _ => output.push(&self.decoder.decode(format!("{line}\n").as_bytes())),
        }
        output.push(&self.decoder.decode(&rest));
    }
}

/// Kills the group if the caller stops awaiting the command (the turn was dropped).
struct KillOnDrop {
    conn: Arc<Conn>,
    pgid: Option<u32>,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let (Some(pgid), Ok(rt)) = (self.pgid, tokio::runtime::Handle::try_current()) {
            let conn = Arc::clone(&self.conn);
            rt.spawn(async move { kill_group(&conn, pgid).await });
        }
    }
}

/// TERM, then KILL, to the remote group over a channel of its own.
async fn kill_group(conn: &Conn, pgid: u32) {
    let attempt = async {
        let mut channel = conn.channel_open_session().await.ok()?;
        channel.exec(true, script::kill_line(pgid)).await.ok()?;
        while let Some(msg) = channel.wait().await {
            if matches!(msg, ChannelMsg::ExitStatus { .. } | ChannelMsg::Close) {
                break;
            }
        }
        Some(())
    };
    if tokio::time::timeout(KILL_TIMEOUT, attempt)
        .await
        .ok()
        .flatten()
        .is_none()
    {
        tracing::warn!(
            pgid,
            "could not kill a remote command's process group over ssh"
        );
    }
}

enum End {
    Exited(i32),
    TimedOut,
    Interrupted,
}

/// Runs `exec` on the remote machine.
pub async fn run(
    link: &Link,
    exec: &Exec,
    cancel: &CancellationToken,
) -> Result<RunResult, BackendError> {
    let inner = script::inner_script(&exec.cwd, &exec.env, &exec.script)
        .map_err(|e| BackendError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
    let opened = link.open().await?;
    let (conn, own) = (Arc::clone(&opened.conn), opened.own);
    let result = drive(link, opened.channel, &conn, &inner, exec, cancel).await;
    link.release(&conn, own).await;
    result
}

async fn drive(
    link: &Link,
    channel: russh::Channel<russh::client::Msg>,
    conn: &Arc<Conn>,
    inner: &str,
    exec: &Exec,
    cancel: &CancellationToken,
) -> Result<RunResult, BackendError> {
    let (mut rx, tx) = channel.split();
    let started = async {
        tx.exec(true, script::command_line()).await?;
        tx.data(inner.as_bytes()).await?;
        tx.eof().await
    };
    // Starting is bounded by the timeout and the interrupt too (a stalled link).
    let deadline = Instant::now() + exec.timeout;
    let early = tokio::select! {
        biased;
        () = cancel.cancelled() => Some(End::Interrupted),
        () = tokio::time::sleep_until(deadline) => Some(End::TimedOut),
        sent = started => {
            sent.map_err(|_| gone(link, "before the command started"))?;
            None
        }
    };
    let mut guard = KillOnDrop {
        conn: Arc::clone(conn),
        pgid: None,
    };
    let mut output = BoundedOutput::new(exec.max_chars);
    let mut decoder = Utf8Decoder::default();
    let mut stderr = Stderr::default();
    let mut status: Option<i32> = None;
    let mut eof = false;
    let end = if let Some(end) = early {
        end
    } else {
        loop {
            let msg = tokio::select! {
                biased;
                () = cancel.cancelled() => break End::Interrupted,
                () = tokio::time::sleep_until(deadline) => break End::TimedOut,
                msg = rx.wait() => msg,
            };
            match msg {
                Some(ChannelMsg::Data { data }) => output.push(&decoder.decode(&data)),
                Some(ChannelMsg::ExtendedData { data, .. }) => {
                    stderr.push(&data, &mut output);
                    guard.pgid = stderr.pgid;
                }
                Some(ChannelMsg::ExitStatus { exit_status }) => {
                    status = Some(i32::try_from(exit_status).unwrap_or(255));
                }
                Some(ChannelMsg::ExitSignal { signal_name, .. }) => {
                    status = Some(signal_code(&signal_name));
                }
                Some(ChannelMsg::Eof) => eof = true,
                Some(ChannelMsg::Failure) => {
                    return Err(BackendError::Unavailable {
                        kind: "ssh",
                        detail: format!("{} refused to run a command", link.target().label()),
                    });
                }
                Some(ChannelMsg::Close) => break End::Exited(status.unwrap_or(255)),
                Some(_) => {}
                None => match status {
                    Some(code) => break End::Exited(code),
                    None => {
                        guard.pgid = None;
                        return Err(gone(link, "while the command ran"));
                    }
                },
            }
            if let Some(code) = status
                && eof
            {
                break End::Exited(code);
            }
            if status.is_some() {
                drain(&mut rx, &mut output, &mut decoder, &mut stderr).await;
                break End::Exited(status.unwrap_or(255));
            }
        }
    };
    let result = match end {
        End::Exited(code) => {
            output.push(&decoder.finish());
            RunResult {
                output: output.render(""),
                exit_code: code,
                timed_out: false,
                interrupted: false,
            }
        }
        End::TimedOut | End::Interrupted => {
            match guard.pgid {
                Some(pgid) => kill_group(conn, pgid).await,
                None => tracing::warn!(
                    "a remote command ended early before it reported its process group"
                ),
            }
            drain(&mut rx, &mut output, &mut decoder, &mut stderr).await;
            output.push(&decoder.finish());
            if matches!(end, End::TimedOut) {
                let suffix = format!("\n[Command timed out after {}s]", exec.timeout.as_secs());
                let rendered = output.render(&suffix);
                RunResult {
                    output: if output.total_chars() == 0 {
                        rendered.trim_start().to_owned()
                    } else {
                        rendered
                    },
                    exit_code: 124,
                    timed_out: true,
                    interrupted: false,
                }
            } else {
                RunResult {
                    output: output.render("\n[Command interrupted]"),
                    exit_code: 130,
                    timed_out: false,
                    interrupted: true,
                }
            }
        }
    };
    guard.pgid = None;
    let _ = tx.close().await;
    Ok(result)
}

/// Reads what is still coming until the output ends or [`DRAIN_IDLE`] of silence.
async fn drain(
    rx: &mut russh::ChannelReadHalf,
    output: &mut BoundedOutput,
    decoder: &mut Utf8Decoder,
    stderr: &mut Stderr,
) {
    while let Ok(Some(msg)) = tokio::time::timeout(DRAIN_IDLE, rx.wait()).await {
        match msg {
            ChannelMsg::Data { data } => output.push(&decoder.decode(&data)),
            ChannelMsg::ExtendedData { data, .. } => stderr.push(&data, output),
            ChannelMsg::Eof | ChannelMsg::Close => break,
            _ => {}
        }
    }
}
