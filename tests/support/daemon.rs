//! The real `hermesd run` binary as a child process for end-to-end tests: started with a
//! clean environment in a temp home, its stderr collected on a thread, the bound API and
//! admin addresses read from its "hermesd started" line (ports come from 127.0.0.1:0).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub const HERMESD: &str = env!("CARGO_BIN_EXE_hermesd");

/// The daemon binary `Daemon` starts: `HERMESD_BIN` when set (CI points the soak at the
/// release binary `.ci/release-build` made, the one the image ships), else the binary cargo
/// built beside this target.
pub fn daemon_binary() -> PathBuf {
    std::env::var_os("HERMESD_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(HERMESD))
}
/// Runs one `hermesd` command on `home` as a user would, with nothing of this process's
/// environment but `PATH`.
pub fn cli(home: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(daemon_binary())
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.join("user-home"))
        .env("HERMES_HOME", home)
        .env("HERMES_TEST_ISOLATION", "1")
        .output()
        .expect("run hermesd")
}

/// Generous: a loaded 2-core machine may take a while to start a debug binary.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
pub const API_KEY: &str = "test-api-key-0123456789abcdef";

#[derive(Debug, Default)]
struct Log {
    lines: Mutex<Vec<String>>,
    /// Set when stderr closed (the process is gone).
    closed: Mutex<bool>,
    grew: Condvar,
}

#[derive(Debug)]
pub struct Daemon {
    child: Child,
    pub home: PathBuf,
    pub api: Option<String>,
    pub admin: Option<String>,
    log: Arc<Log>,
}

/// Drops ANSI colour sequences from a log line.
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A field of a log line, text (`name=value`) or JSON (`"name":"value"`).
pub fn field(line: &str, name: &str) -> Option<String> {
    if line.trim_start().starts_with('{') {
        let json: serde_json::Value = serde_json::from_str(line).ok()?;
        return json
            .get(name)
            .or_else(|| json.get("fields").and_then(|f| f.get(name)))
            .and_then(|v| v.as_str())
            .filter(|v| !v.is_empty())
            .map(str::to_owned);
    }
    let start = line.find(&format!(" {name}="))? + name.len() + 2;
    let value: String = line[start..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    (!value.is_empty()).then_some(value)
}

/// The environment every test daemon gets: a clean slate, ports from the OS.
pub fn base_env(home: &Path) -> Vec<(String, String)> {
    [
        ("HOME", home.join("user").display().to_string()),
        ("HERMES_HOME", home.display().to_string()),
        ("HERMES_TEST_ISOLATION", "1".to_owned()),
        ("RUST_LOG", "info".to_owned()),
        ("NO_COLOR", "1".to_owned()),
        ("API_SERVER_PORT", "0".to_owned()),
        ("HERMES__ADMIN__PORT", "0".to_owned()),
        ("PATH", std::env::var("PATH").unwrap_or_default()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// The env for a daemon serving the HTTP API and answering through `model_base_url`.
pub fn api_env(home: &Path, model_base_url: &str) -> Vec<(String, String)> {
    let mut env = base_env(home);
    env.extend(
        [
            ("API_SERVER_KEY", API_KEY),
            ("OPENAI_BASE_URL", model_base_url),
            ("OPENAI_API_KEY", "sk-test-model-key"),
            ("HERMES__MODEL__PROVIDER", "openai"),
            ("HERMES__MODEL__DEFAULT", "fake-model"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned())),
    );
    env
}

impl Daemon {
    /// Starts `hermesd run` and waits for it to serve.
    pub fn start(home: &Path, env: &[(String, String)]) -> Daemon {
        Self::spawn(home, env, true)
    }

    /// Starts `hermesd run` without waiting (for runs expected to exit).
    pub fn spawn(home: &Path, env: &[(String, String)], wait: bool) -> Daemon {
        let mut command = Command::new(daemon_binary());
        command.arg("run");
        Self::spawn_command(command, home, env, wait)
    }

    /// Starts `hermesd run` with the process umask set to `umask` (an octal string such as
    /// "022") by a shell that then execs the daemon, so the pid is the daemon's.
    pub fn start_under_umask(home: &Path, env: &[(String, String)], umask: &str) -> Daemon {
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(format!("umask {umask} && exec \"$0\" run"))
            .arg(daemon_binary());
        Self::spawn_command(command, home, env, true)
    }

    fn spawn_command(
        mut command: Command,
        home: &Path,
        env: &[(String, String)],
        wait: bool,
    ) -> Daemon {
        command
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn hermesd");
        let log = Arc::new(Log::default());
        let stderr = child.stderr.take().expect("stderr");
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let line = strip_ansi(&line);
                sink.lines.lock().unwrap().push(line);
                sink.grew.notify_all();
            }
            *sink.closed.lock().unwrap() = true;
            let _guard = sink.lines.lock().unwrap();
            sink.grew.notify_all();
        });
        let mut daemon = Daemon {
            child,
            home: home.to_path_buf(),
            api: None,
            admin: None,
            log,
        };
        if wait {
            let line = daemon
                .wait_for_line("hermesd started", START_TIMEOUT)
                .unwrap_or_else(|| panic!("daemon never started: {:#?}", daemon.logs()));
            daemon.api = field(&line, "api");
            daemon.admin = field(&line, "admin");
        }
        daemon
    }

    /// Waits until a log line contains `needle`; returns it.
    pub fn wait_for_line(&self, needle: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        let mut lines = self.log.lines.lock().unwrap();
        loop {
            if let Some(line) = lines.iter().find(|l| l.contains(needle)) {
                return Some(line.clone());
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            lines = self.log.grew.wait_timeout(lines, left).unwrap().0;
        }
    }

    /// Waits until a log line satisfies `matches`; returns it.
    pub fn wait_for_line_where(
        &self,
        matches: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> Option<String> {
        let deadline = Instant::now() + timeout;
        let mut lines = self.log.lines.lock().unwrap();
        loop {
            if let Some(line) = lines.iter().find(|l| matches(l)) {
                return Some(line.clone());
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            lines = self.log.grew.wait_timeout(lines, left).unwrap().0;
        }
    }

    pub fn logs(&self) -> Vec<String> {
        self.log.lines.lock().unwrap().clone()
    }

    /// The Discord shards this daemon's log (JSON lines) says it runs now: claims minus
    /// give-backs and losses, as shard ids.
    pub fn discord_shards(&self) -> Vec<u64> {
        let mut held = Vec::new();
        for line in self.logs() {
            let Ok(entry) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            let (Some(message), Some(shard)) = (entry["message"].as_str(), entry["shard"].as_u64())
            else {
                continue;
            };
            if message.contains("running the shard") {
                held.push(shard);
            } else if message.contains("gave the shard back") || message.contains("lost the shard")
            {
                held.retain(|s| *s != shard);
            }
        }
        held
    }

    pub fn api_url(&self) -> String {
        format!("http://{}", self.api.as_deref().expect("API address"))
    }

    pub fn admin_url(&self) -> String {
        format!("http://{}", self.admin.as_deref().expect("admin address"))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: no cleanup at all.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.wait_closed(Duration::from_secs(10));
    }

    /// SIGTERM, then waits (bounded) for the exit status.
    pub fn terminate(mut self) -> (ExitStatus, Vec<String>) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let status = self.wait(START_TIMEOUT);
        (status, self.logs())
    }

    /// Waits for the process to exit by itself; kills it and fails after `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let pid = self.child.id();
        let (done, watchdog) = std::sync::mpsc::channel::<()>();
        let killer = std::thread::spawn(move || {
            if watchdog.recv_timeout(timeout).is_err() {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                return true;
            }
            false
        });
        let status = self.child.wait().expect("wait");
        let _ = done.send(());
        let timed_out = killer.join().unwrap_or(false);
        self.wait_closed(Duration::from_secs(10));
        assert!(
            !timed_out,
            "daemon did not exit in {timeout:?}: {:#?}",
            self.logs()
        );
        status
    }

    /// Waits until the log thread saw stderr close.
    fn wait_closed(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut lines = self.log.lines.lock().unwrap();
        while !*self.log.closed.lock().unwrap() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            lines = self.log.grew.wait_timeout(lines, left).unwrap().0;
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
