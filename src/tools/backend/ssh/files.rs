//! Whole-file reads and writes on the remote machine over the shared connection: `cat` of the
//! file for a read, `cat >` fed on the channel's stdin for a write. Bytes pass through
//! untouched (no text conversion), so binary files round-trip.

use std::time::Duration;

use russh::ChannelMsg;

use super::connection::Link;
use super::run::gone;
use super::script::{self, MISSING_FILE_EXIT};
use crate::tools::backend::BackendError;

/// A file transfer that takes longer than this is abandoned.
const FILE_TIMEOUT: Duration = Duration::from_secs(300);

/// A read larger than this is refused rather than held in memory.
pub const MAX_READ_BYTES: usize = 256 * 1024 * 1024;

/// What a command printed and how it ended.
struct Collected {
    status: Option<u32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Runs `line` with `stdin` (then end of input) and collects its output, at most
/// [`MAX_READ_BYTES`] of it.
async fn collect(link: &Link, line: String, stdin: &[u8]) -> Result<Collected, BackendError> {
    let opened = link.open().await?;
    let (conn, own) = (std::sync::Arc::clone(&opened.conn), opened.own);
    let (mut rx, tx) = opened.channel.split();
    let work = async {
        tx.exec(true, line)
            .await
            .map_err(|_| gone(link, "before the file transfer started"))?;
        let send = async {
            if !stdin.is_empty() {
                tx.data(stdin).await?;
            }
            tx.eof().await
        };
        let receive = async {
            let mut got = Collected {
                status: None,
                stdout: Vec::new(),
                stderr: Vec::new(),
            };
            let mut dropped = true;
            while let Some(msg) = rx.wait().await {
                match msg {
                    ChannelMsg::Data { data } => {
                        if got.stdout.len() + data.len() > MAX_READ_BYTES {
                            return Err(BackendError::File(format!(
                                "the file is larger than {} MiB, too large to read whole",
                                MAX_READ_BYTES / (1024 * 1024)
                            )));
                        }
                        got.stdout.extend_from_slice(&data);
                    }
                    ChannelMsg::ExtendedData { data, .. } if got.stderr.len() < 4096 => {
                        got.stderr.extend_from_slice(&data);
                    }
                    ChannelMsg::ExitStatus { exit_status } => got.status = Some(exit_status),
                    ChannelMsg::ExitSignal { .. } => got.status = Some(255),
                    ChannelMsg::Close => {
                        dropped = false;
                        break;
                    }
                    _ => {}
                }
            }
            Ok((got, dropped))
        };
        // The receiver decides: a command that failed early closes the channel while the
        // sender may still wait for window space that never comes.
        tokio::pin!(send, receive);
        let mut sent = None;
        let (got, dropped) = loop {
            tokio::select! {
                result = &mut send, if sent.is_none() => sent = Some(result.is_ok()),
                done = &mut receive => break done?,
            }
        };
        if dropped && got.status.is_none() {
            return Err(gone(link, "during a file transfer"));
        }
        if sent == Some(false) && got.status.is_none() {
            return Err(gone(link, "while sending a file"));
        }
        Ok(got)
    };
    let result = match tokio::time::timeout(FILE_TIMEOUT, work).await {
        Ok(result) => result,
        Err(_) => Err(BackendError::File(format!(
            "the file transfer over ssh took longer than {}s",
            FILE_TIMEOUT.as_secs()
        ))),
    };
    let _ = tx.close().await;
    link.release(&conn, own).await;
    result
}

/// The remote command's complaint, in short.
fn complaint(stderr: &[u8], status: Option<u32>) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    if text.is_empty() {
        format!(
            "exit status {}",
            status.map_or("unknown".to_owned(), |s| s.to_string())
        )
    } else {
        text.chars().take(500).collect()
    }
}

pub async fn read(link: &Link, cwd: &str, path: &str) -> Result<Option<Vec<u8>>, BackendError> {
    let got = collect(link, script::read_line(cwd, path), &[]).await?;
    match got.status {
        Some(0) => Ok(Some(got.stdout)),
        Some(MISSING_FILE_EXIT) => Ok(None),
        status => Err(BackendError::File(format!(
            "cannot read {path} on the ssh machine: {}",
            complaint(&got.stderr, status)
        ))),
    }
}

pub async fn write(link: &Link, cwd: &str, path: &str, data: &[u8]) -> Result<(), BackendError> {
    let got = collect(link, script::write_line(cwd, path), data).await?;
    match got.status {
        Some(0) => Ok(()),
        status => Err(BackendError::File(format!(
            "cannot write {path} on the ssh machine: {}",
            complaint(&got.stderr, status)
        ))),
    }
}
