//! What the `process` tool can do with a background process: poll, read the log, wait,
//! kill (TERM to the process group, KILL after a second), write to stdin and close it.

use std::time::Duration;

use rustix::process::{Signal, kill_process_group};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

use super::ProcessRegistry;
use super::session::lock;
use crate::tools::ansi::strip_ansi;

fn not_found(id: &str) -> Value {
    json!({"status": "not_found", "error": format!("No process with ID {id}")})
}

impl ProcessRegistry {
    /// Status and the last 1,000 characters of output.
    pub fn poll(&self, id: &str) -> Value {
        let Some(session) = self.get(id) else {
            return not_found(id);
        };
        let (code, reason, source, preview) = session.completion_fields(1000);
        let mut result = json!({
            "session_id": session.id,
            "command": session.command,
            "status": session.status(),
            "pid": session.pid,
            "uptime_seconds": session.uptime_seconds(),
            "output_preview": preview,
        });
        if session.has_exited() {
            result["exit_code"] = json!(code);
            result["completion_reason"] = json!(reason);
            result["termination_source"] = json!(source);
        }
        result
    }

    /// Output lines: the last `limit` by default (`offset == 0`), else a page.
    pub fn read_log(&self, id: &str, offset: usize, limit: usize) -> Value {
        let Some(session) = self.get(id) else {
            return not_found(id);
        };
        let full = {
            let state = lock(&session.state);
            strip_ansi(&state.output).into_owned()
        };
        let lines: Vec<&str> = full.lines().collect();
        let total = lines.len();
        let selected: &[&str] = if offset == 0 && limit > 0 {
            &lines[total.saturating_sub(limit)..]
        } else {
            let start = offset.min(total);
            &lines[start..(start + limit).min(total)]
        };
        json!({
            "session_id": session.id,
            "command": session.command,
            "status": session.status(),
            "output": selected.join("\n"),
            "total_lines": total,
            "showing": format!("{} lines", selected.len()),
        })
    }

    /// Blocks until the process exits, `timeout` (clamped to `max_timeout`) passes, or the
    /// turn is interrupted.
    pub async fn wait(
        &self,
        id: &str,
        timeout: Option<u64>,
        max_timeout: u64,
        cancel: &CancellationToken,
    ) -> Value {
        let Some(session) = self.get(id) else {
            return not_found(id);
        };
        let mut note = None;
        let effective = match timeout {
            Some(t) if t > max_timeout => {
                note = Some(format!(
                    "Waited {max_timeout}s, the configured maximum, not the {t}s asked for"
                ));
                max_timeout
            }
            Some(t) if t > 0 => t,
            _ => max_timeout,
        };
        let mut exited = session.exited.subscribe();
        let outcome = tokio::select! {
            r = tokio::time::timeout(Duration::from_secs(effective), exited.wait_for(|e| *e)) => {
                if r.is_ok() { "exited" } else { "timeout" }
            }
            () = cancel.cancelled() => "interrupted",
        };
        let mut result = match outcome {
            "exited" => {
                let (code, reason, source, output) = session.completion_fields(2000);
                json!({"status": "exited", "command": session.command, "exit_code": code,
                    "completion_reason": reason, "termination_source": source, "output": output})
            }
            "interrupted" => {
                let output = session.completion_fields(1000).3;
                json!({"status": "interrupted", "command": session.command, "output": output,
                    "note": "User sent a new message -- wait interrupted"})
            }
            _ => {
                let output = session.completion_fields(1000).3;
                json!({"status": "timeout", "command": session.command, "output": output})
            }
        };
        match note {
            Some(note) => result["timeout_note"] = json!(note),
            None if outcome == "timeout" => {
                result["timeout_note"] =
                    json!(format!("Waited {effective}s, process still running"))
            }
            None => {}
        }
        result
    }

    /// Kills the process group (TERM, then KILL after a second).
    pub async fn kill(&self, id: &str, source: &str) -> Value {
        let Some(session) = self.get(id) else {
            return not_found(id);
        };
        if session.has_exited() {
            let (code, reason, term, output) = session.completion_fields(2000);
            return json!({"status": "already_exited", "command": session.command,
                "exit_code": code, "completion_reason": reason, "termination_source": term,
                "output": output});
        }
        {
            let mut state = lock(&session.state);
            state.completion_reason = "killed".to_owned();
            state.termination_source = source.to_owned();
            state.exit_code = Some(-15);
        }
        if let Some(pgid) = session.pgid {
            let _ = kill_process_group(pgid, Signal::TERM);
            let mut exited = session.exited.subscribe();
            let gone = tokio::time::timeout(Duration::from_secs(1), exited.wait_for(|e| *e)).await;
            if gone.is_err() {
                let _ = kill_process_group(pgid, Signal::KILL);
            }
        }
        // Report the kill even if the group was already gone.
        session.finish(Some(-15), "killed", source);
        let output = session.completion_fields(2000).3;
        json!({"status": "killed", "session_id": session.id, "completion_reason": "killed",
            "termination_source": source, "output": output})
    }

    /// Sends raw data to the process's stdin.
    pub async fn write_stdin(&self, id: &str, data: &str) -> Value {
        let Some(session) = self.get(id) else {
            return not_found(id);
        };
        if session.has_exited() {
            return json!({"status": "already_exited", "error": "Process has already finished"});
        }
        let mut stdin = session.stdin.lock().await;
        let Some(pipe) = stdin.as_mut() else {
            return json!({"status": "error",
                "error": "This process no longer takes input (its stdin is closed)"});
        };
        match async {
            pipe.write_all(data.as_bytes()).await?;
            pipe.flush().await
        }
        .await
        {
            Ok(()) => json!({"status": "ok", "bytes_written": data.chars().count()}),
            Err(e) => json!({"status": "error", "error": e.to_string()}),
        }
    }

    /// Closes stdin (EOF) without killing the process.
    pub async fn close_stdin(&self, id: &str) -> Value {
        let Some(session) = self.get(id) else {
            return not_found(id);
        };
        if session.has_exited() {
            return json!({"status": "already_exited", "error": "Process has already finished"});
        }
        match session.stdin.lock().await.take() {
            Some(_) => json!({"status": "ok", "message": "stdin closed"}),
            None => json!({"status": "error",
                "error": "This process no longer takes input (its stdin is closed)"}),
        }
    }
}
