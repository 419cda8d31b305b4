//! One background process: its rolling output buffer (the last 200,000 characters) and
//! completion state.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use rustix::process::Pid;
use tokio::process::ChildStdin;
use tokio::sync::watch;

use crate::tools::ansi::strip_ansi;

pub const MAX_OUTPUT_CHARS: usize = 200_000;

/// Lines bash prints when it has no terminal; dropped from the first output chunk.
const SHELL_NOISE: [&str; 5] = [
    "bash: cannot set terminal process group",
    "bash: no job control in this shell",
    "no job control in this shell",
    "cannot set terminal process group",
    "tcsetattr: Inappropriate ioctl for device",
];

#[derive(Debug, Default)]
pub(super) struct ProcState {
    pub(super) output: String,
    pub(super) output_chars: usize,
    pub(super) exited: bool,
    pub(super) exit_code: Option<i32>,
    pub(super) completion_reason: String,
    pub(super) termination_source: String,
    pub(super) finished_at: Option<Instant>,
}

impl ProcState {
    pub(super) fn push(&mut self, text: &str) {
        self.output.push_str(text);
        self.output_chars += text.chars().count();
        if self.output_chars > MAX_OUTPUT_CHARS {
            let excess = self.output_chars - MAX_OUTPUT_CHARS;
            let cut = self
                .output
                .char_indices()
                .nth(excess)
                .map_or(self.output.len(), |(i, _)| i);
            self.output.drain(..cut);
            self.output_chars = MAX_OUTPUT_CHARS;
        }
    }

    /// The last `n` characters, ANSI-stripped.
    pub(super) fn tail(&self, n: usize) -> String {
        let skip = self.output_chars.saturating_sub(n);
        let start = self
            .output
            .char_indices()
            .nth(skip)
            .map_or(self.output.len(), |(i, _)| i);
        strip_ansi(&self.output[start..]).into_owned()
    }
}

/// One background process.
#[derive(Debug)]
pub struct ProcessSession {
    pub id: String,
    pub command: String,
    /// The agent session that started it.
    pub session_key: String,
    pub cwd: PathBuf,
    pub pid: Option<u32>,
    pub started_at: SystemTime,
    pub(super) pgid: Option<Pid>,
    /// The chat that started it, told when it ends; `None` for the operator's.
    pub origin: Option<super::ProcessOrigin>,
    pub(super) state: Mutex<ProcState>,
    pub(super) exited: watch::Sender<bool>,
    pub(super) stdin: tokio::sync::Mutex<Option<ChildStdin>>,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ProcessSession {
    pub fn has_exited(&self) -> bool {
        lock(&self.state).exited
    }

    pub fn exit_code(&self) -> Option<i32> {
        lock(&self.state).exit_code
    }

    pub(super) fn uptime_seconds(&self) -> u64 {
        SystemTime::now()
            .duration_since(self.started_at)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }

    pub(super) fn status(&self) -> &'static str {
        if self.has_exited() {
            "exited"
        } else {
            "running"
        }
    }

    pub(super) fn finish(&self, code: Option<i32>, reason: &str, source: &str) {
        let mut state = lock(&self.state);
        if state.exited {
            return;
        }
        state.exited = true;
        if state.completion_reason != "killed" {
            state.exit_code = code;
            state.completion_reason = reason.to_owned();
            state.termination_source = source.to_owned();
        }
        state.finished_at = Some(Instant::now());
        drop(state);
        self.exited.send_replace(true);
    }

    /// What its chat is told of its end; `None` while it runs or without a chat.
    pub(super) fn exit_news(&self) -> Option<super::ProcessExit> {
        let origin = self.origin.clone()?;
        let state = lock(&self.state);
        state.exited.then(|| super::ProcessExit {
            id: self.id.clone(),
            command: self.command.clone(),
            exit_code: state.exit_code,
            output_tail: state.tail(super::EXIT_TAIL_CHARS),
            origin,
            started_at: self.started_at,
            runtime_secs: self.uptime_seconds(),
        })
    }

    pub(super) fn completion_fields(&self, tail: usize) -> (Option<i32>, String, String, String) {
        let state = lock(&self.state);
        (
            state.exit_code,
            state.completion_reason.clone(),
            state.termination_source.clone(),
            state.tail(tail),
        )
    }
}
pub(super) fn clean_shell_noise(text: &str) -> String {
    text.split_inclusive('\n')
        .filter(|line| !SHELL_NOISE.iter().any(|noise| line.contains(noise)))
        .collect()
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_buffer_rolls() {
        let mut state = ProcState::default();
        state.push(&"a".repeat(MAX_OUTPUT_CHARS));
        state.push("bcd");
        assert_eq!(state.output_chars, MAX_OUTPUT_CHARS);
        assert!(state.output.ends_with("abcd"));
        assert_eq!(state.output.chars().count(), MAX_OUTPUT_CHARS);
        assert_eq!(state.tail(3), "bcd");
    }

    #[test]
    fn shell_noise_is_dropped() {
        let text = "bash: no job control in this shell\nreal output\n";
        assert_eq!(clean_shell_noise(text), "real output\n");
    }
}
