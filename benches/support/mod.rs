//! Helpers shared by the benchmarks that drive the real binary: process memory and
//! descriptors from `/proc`, percentile summaries, and a home on tmpfs.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Resident set size of `pid` in KiB (0 when the process is gone).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Open file descriptors of `pid` (0 when the process is gone).
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| dir.count())
        .unwrap_or(0)
}

/// p50/p99 (milliseconds, rounded to microseconds) and the sample count.
pub fn percentiles(mut samples: Vec<f64>) -> Value {
    samples.sort_by(|a, b| a.total_cmp(b));
    let pick = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)];
    json!({"p50_ms": round(pick(0.5)), "p99_ms": round(pick(0.99)), "n": samples.len()})
}

/// Milliseconds rounded to three decimals.
pub fn round(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// The home: on tmpfs (`/dev/shm`) when present, so the figures measure the gateway and not
/// this machine's erratic fsync; `HERMESD_BENCH_DIR` picks another filesystem.
pub fn bench_dir() -> tempfile::TempDir {
    let base = std::env::var("HERMESD_BENCH_DIR")
        .ok()
        .map(std::path::PathBuf::from)
        .or_else(|| Some(std::path::PathBuf::from("/dev/shm")).filter(|p| p.is_dir()));
    match base {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

/// A port free right now on loopback (bound to 127.0.0.1:0, then released).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The fake model's own round trip (`calls` streamed completions at `base_url`), measured the
/// way the gateway calls it: what "gateway-side" latency subtracts.
pub async fn direct_model(base_url: &str, calls: usize) -> Vec<f64> {
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let url = format!("{base_url}/chat/completions");
    let mut samples = Vec::with_capacity(calls);
    for i in 0..calls {
        let body = json!({"model": "fake-model", "stream": true,
            "messages": [{"role": "user", "content": format!("direct {i}")}]});
        let t = Instant::now();
        let response = http.post(&url).json(&body).send().await.unwrap();
        let _ = response.bytes().await;
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    samples
}

/// The daemon a benchmark starts: `HERMESD_BIN` when set (CI runs the bench drivers from the
/// test build against the release binary `.ci/release-build` made), else the binary cargo
/// built next to the benchmark (the release one under `cargo bench`).
pub fn hermesd() -> std::path::PathBuf {
    std::env::var_os("HERMESD_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_hermesd").into())
}

/// `hermesd run` for a benchmark: a clean environment on `home`, warn-level logs to stderr,
/// the admin API on `admin_port`, answering through the OpenAI-style fake model at
/// `model_url`. Callers add the platform's settings.
pub fn daemon_command(home: &Path, admin_port: u16, model_url: &str) -> Command {
    let mut command = Command::new(hermesd());
    command
        .arg("run")
        .env_clear()
        .env("HOME", home.join("user"))
        .env("HERMES_HOME", home)
        .env("HERMES_TEST_ISOLATION", "1")
        .env("RUST_LOG", "warn")
        .env("HERMES__ADMIN__PORT", admin_port.to_string())
        .env("OPENAI_BASE_URL", model_url)
        .env("OPENAI_API_KEY", "sk-bench")
        .env("HERMES__MODEL__PROVIDER", "openai")
        .env("HERMES__MODEL__DEFAULT", "fake-model")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    command
}

/// A running daemon, sent SIGTERM and reaped when dropped.
pub struct Daemon {
    pub child: Child,
    /// The admin API's base URL.
    pub admin: String,
}

impl Daemon {
    pub fn spawn(mut command: Command, admin_port: u16) -> Daemon {
        Daemon {
            child: command.spawn().expect("spawn hermesd"),
            admin: format!("http://127.0.0.1:{admin_port}"),
        }
    }

    /// Polls the admin API's `path` (`/health`, `/ready`) until it answers 200; panics after
    /// a minute.
    pub async fn wait_answering(&self, path: &str) {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = client.get(format!("{}{path}", self.admin)).send().await
                && r.status().is_success()
            {
                return;
            }
            assert!(Instant::now() < deadline, "daemon never answered {path}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// Through the HTTP API at `urls` (chat-completions endpoints, bearer `key`): `clients` concurrent clients, each with its own session, `per_client` turns each; turn
/// `i` of client `c` goes to instance `(c + i) % n`, so with several instances every
/// session's consecutive turns land on different instances.
pub async fn api_throughput(
    urls: &[String],
    key: &str,
    clients: usize,
    per_client: usize,
) -> Value {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let http = http.clone();
        let urls = urls.to_vec();
        let key = key.to_owned();
        let session = format!("bench-{c}-{}", rand::random::<u32>());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_client);
            for i in 0..per_client {
                let url = &urls[(c + i) % urls.len()];
                let body = json!({"model": "hermes-agent",
                    "messages": [{"role": "user", "content": format!("turn {i}")}]});
                let t = Instant::now();
                let response = http
                    .post(url)
                    .bearer_auth(&key)
                    .header("X-Hermes-Session-Id", &session)
                    .json(&body)
                    .send()
                    .await
                    .expect("request");
                assert!(response.status().is_success(), "{}", response.status());
                let _ = response.bytes().await;
                latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    let turns = latencies.len();
    json!({"instances": urls.len(), "concurrency": clients, "turns": turns,
           "turns_per_s": (turns as f64 / elapsed).round(),
           "latency": percentiles(latencies)})
}
