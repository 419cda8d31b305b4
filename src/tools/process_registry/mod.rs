//! The registry of detached commands (the `terminal` tool's `background` flag; Python
//! `tools/process_registry.py`): ids `proc_<12 hex>`, a rolling 200,000-character output
//! buffer each, the `process` tool's actions, at most 64 tracked with finished ones
//! pruned after 30 minutes. It also remembers each session's shell working directory, and
//! broadcasts the end of every process started from a chat (`exits.rs`).

mod actions;
mod exits;
mod session;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use super::local::{ShellCommand, exit_code, spawn};
use super::output::Utf8Decoder;
pub use exits::{EXIT_TAIL_CHARS, ProcessExit, ProcessOrigin};
pub use session::{MAX_OUTPUT_CHARS, ProcessSession};
use session::{ProcState, clean_shell_noise, lock};

pub const FINISHED_TTL: Duration = Duration::from_secs(1800);
pub const MAX_PROCESSES: usize = 64;
/// How long after the shell exits its output may still arrive before the exit is reported.
const EXIT_DRAIN_GRACE: Duration = Duration::from_millis(300);

/// All background processes of this daemon, and each session's shell cwd.
#[derive(Debug)]
pub struct ProcessRegistry {
    sessions: Mutex<BTreeMap<String, Arc<ProcessSession>>>,
    session_cwds: Mutex<HashMap<String, PathBuf>>,
    /// The ends of processes started from a chat.
    exits: tokio::sync::broadcast::Sender<ProcessExit>,
}

impl Default for ProcessRegistry {
    fn default() -> Self {
        Self {
            sessions: Mutex::default(),
            session_cwds: Mutex::default(),
            exits: exits::channel(),
        }
    }
}

impl ProcessRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// The ends of background processes started from a chat, from now on.
    pub fn subscribe_exits(&self) -> tokio::sync::broadcast::Receiver<ProcessExit> {
        self.exits.subscribe()
    }

    /// The directory the session's last command finished in.
    pub fn session_cwd(&self, session_id: &str) -> Option<PathBuf> {
        lock(&self.session_cwds).get(session_id).cloned()
    }

    pub fn set_session_cwd(&self, session_id: &str, cwd: &Path) {
        lock(&self.session_cwds).insert(session_id.to_owned(), cwd.to_owned());
    }

    pub fn forget_session_cwd(&self, session_id: &str) {
        lock(&self.session_cwds).remove(session_id);
    }

    /// Sessions whose cwd is remembered.
    pub fn cwds_tracked(&self) -> usize {
        lock(&self.session_cwds).len()
    }

    pub fn get(&self, id: &str) -> Option<Arc<ProcessSession>> {
        lock(&self.sessions).get(id).cloned()
    }

    /// Drops finished processes older than [`FINISHED_TTL`], then the oldest finished one
    /// while the registry is full.
    fn prune(sessions: &mut BTreeMap<String, Arc<ProcessSession>>) {
        sessions.retain(|_, s| {
            lock(&s.state)
                .finished_at
                .is_none_or(|at| at.elapsed() < FINISHED_TTL)
        });
        while sessions.len() >= MAX_PROCESSES {
            let oldest = sessions
                .values()
                .filter(|s| s.has_exited())
                .min_by_key(|s| s.started_at)
                .map(|s| s.id.clone());
            match oldest {
                Some(id) => {
                    sessions.remove(&id);
                }
                None => break,
            }
        }
    }

    /// Starts `command` in the background and tracks it; its end is broadcast when it has
    /// an `origin` chat.
    pub fn spawn(
        &self,
        command: &str,
        cwd: &Path,
        session_key: &str,
        env: BTreeMap<String, String>,
        origin: Option<ProcessOrigin>,
    ) -> std::io::Result<Arc<ProcessSession>> {
        self.spawn_as(command, command, cwd, session_key, env, origin)
    }

    /// [`spawn`](Self::spawn) running `script` (a sandbox's wrapper around `command`) while
    /// listing the process as `command`.
    pub fn spawn_as(
        &self,
        command: &str,
        script: &str,
        cwd: &Path,
        session_key: &str,
        mut env: BTreeMap<String, String>,
        origin: Option<ProcessOrigin>,
    ) -> std::io::Result<Arc<ProcessSession>> {
        env.insert("PYTHONUNBUFFERED".to_owned(), "1".to_owned());
        let mut process = spawn(&ShellCommand {
            script: script.to_owned(),
            cwd: cwd.to_owned(),
            env,
            stdin: true,
        })?;
        let id = format!("proc_{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
        let (exited, _) = watch::channel(false);
        let session = Arc::new(ProcessSession {
            id: id.clone(),
            command: command.to_owned(),
            session_key: session_key.to_owned(),
            cwd: cwd.to_owned(),
            pid: process.child.id(),
            started_at: SystemTime::now(),
            pgid: process.pgid,
            origin,
            state: Mutex::new(ProcState {
                completion_reason: "exited".to_owned(),
                ..ProcState::default()
            }),
            exited,
            stdin: tokio::sync::Mutex::new(process.child.stdin.take()),
        });
        {
            let mut sessions = lock(&self.sessions);
            Self::prune(&mut sessions);
            sessions.insert(id, Arc::clone(&session));
        }
        let reader_session = Arc::clone(&session);
        let mut output = process.output;
        let mut reader = tokio::spawn(async move {
            let mut decoder = Utf8Decoder::default();
            let mut buf = vec![0u8; 4096];
            let mut first = true;
            while let Ok(n) = output.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut text = decoder.decode(&buf[..n]);
                if first {
                    text = clean_shell_noise(&text);
                    first = false;
                }
                lock(&reader_session.state).push(&text);
            }
            let tail = decoder.finish();
            lock(&reader_session.state).push(&tail);
        });
        let waiter_session = Arc::clone(&session);
        let mut child = process.child;
        let exits = self.exits.clone();
        tokio::spawn(async move {
            let code = child.wait().await.ok().map(exit_code);
            // Collect the output still in the pipe, unless a backgrounded grandchild keeps
            // it open: then the exit is reported after a short grace period anyway.
            let _ = tokio::time::timeout(EXIT_DRAIN_GRACE, &mut reader).await;
            waiter_session.finish(code, "exited", "");
            // Killed or not, the process is gone now: its chat hears of it (no listener,
            // no gateway: nothing to do).
            if let Some(exit) = waiter_session.exit_news() {
                let _ = exits.send(exit);
            }
        });
        Ok(session)
    }

    /// Processes started by `session_key` (all when `None`), oldest first.
    pub fn list(&self, session_key: Option<&str>) -> Vec<Value> {
        let sessions: Vec<Arc<ProcessSession>> = lock(&self.sessions).values().cloned().collect();
        let mut sessions: Vec<_> = sessions
            .into_iter()
            .filter(|s| session_key.is_none_or(|k| s.session_key == k))
            .collect();
        sessions.sort_by_key(|s| s.started_at);
        sessions
            .iter()
            .map(|s| {
                let state = lock(&s.state);
                let started = s
                    .started_at
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(0.0);
                let mut entry = json!({
                    "session_id": s.id,
                    "command": s.command.chars().take(200).collect::<String>(),
                    "cwd": s.cwd.display().to_string(),
                    "pid": s.pid,
                    "started_at": super::timefmt::iso_utc(started),
                    "uptime_seconds": s.uptime_seconds(),
                    "status": if state.exited { "exited" } else { "running" },
                    "output_preview": state.tail(200),
                });
                if state.exited {
                    entry["exit_code"] = json!(state.exit_code);
                }
                entry
            })
            .collect()
    }

    /// Kills every running process (of one session, or all); returns how many.
    pub async fn kill_all(&self, session_key: Option<&str>) -> usize {
        let targets: Vec<String> = lock(&self.sessions)
            .values()
            .filter(|s| !s.has_exited() && session_key.is_none_or(|k| s.session_key == k))
            .map(|s| s.id.clone())
            .collect();
        let mut killed = 0;
        for id in targets {
            let result = self.kill(&id, "kill_all").await;
            if matches!(result["status"].as_str(), Some("killed" | "already_exited")) {
                killed += 1;
            }
        }
        killed
    }

    /// How many processes are still running.
    pub fn count_running(&self) -> usize {
        lock(&self.sessions)
            .values()
            .filter(|s| !s.has_exited())
            .count()
    }
}
