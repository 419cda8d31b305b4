//! The daemon under soak and its incarnations: the real binary started through
//! `tests/support/daemon.rs`, killed with SIGKILL and restarted on the same home, finally
//! stopped with SIGTERM. Each incarnation keeps its RSS and descriptor samples (taken once a
//! second from `/proc`) and its log, written to `target/soak/incarnation-N.log`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::daemon::Daemon;
use crate::fds::{self, FdKinds};
use crate::support::{fd_count, rss_kib};

/// Samples taken before this age of an incarnation are warm-up (caches, connections,
/// the first sessions) and not judged.
pub const WARM_UP: Duration = Duration::from_secs(30);
/// How often a `heap-stats` daemon logs its heap figures (`gateway/runner.rs`).
const HEAP_STATS_EVERY_S: u64 = 5;
/// How many samples are averaged (median) at the start and at the end of a window.
const EDGE_SAMPLES: usize = 10;

#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub age: Duration,
    pub rss_kib: u64,
    /// The anonymous part of the RSS (heap, stacks, SQLite's page caches); the rest is
    /// file-backed or shared memory (the binary, mmap'ed state.db pages, WAL index).
    pub rss_anon_kib: u64,
    /// The file-backed part (the binary, and state.db pages read through the readers'
    /// memory map: bounded by the file, and the kernel's to reclaim).
    pub rss_file_kib: u64,
    pub fds: usize,
}

#[derive(Debug)]
pub struct Incarnation {
    pub pid: u32,
    pub started: Instant,
    pub lived: Duration,
    pub samples: Vec<Sample>,
    /// `kill -9`, `SIGTERM exit N`, or `running`.
    pub ended: String,
    pub warn_lines: usize,
    pub error_lines: usize,
    /// Log lines showing a configured token or key (must stay 0: the log writer masks them).
    pub secret_lines: usize,
    /// From a `heap-stats` build's log (every 5 s): (Rust heap live bytes, anonymous memory
    /// outside the Rust heap: SQLite's caches, stacks), in KiB.
    pub heap: Vec<(u64, u64)>,
    /// Pages jemalloc holds for the Rust heap (`resident`), in KiB, same readings.
    pub heap_resident: Vec<u64>,
    /// Descriptors by kind at the first sample after warm-up, and at the latest sample.
    pub fd_kinds_warm: Option<FdKinds>,
    pub fd_kinds_last: FdKinds,
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

impl Incarnation {
    fn warm(&self) -> Vec<Sample> {
        self.samples
            .iter()
            .copied()
            .filter(|s| s.age >= WARM_UP)
            .collect()
    }

    /// Time observed after warm-up.
    pub fn judged_span(&self) -> Duration {
        let warm = self.warm();
        match (warm.first(), warm.last()) {
            (Some(a), Some(b)) => b.age - a.age,
            _ => Duration::ZERO,
        }
    }

    /// (start, end) RSS after warm-up: medians of the first and last samples.
    pub fn rss_start_end(&self) -> Option<(u64, u64)> {
        self.start_end(|s| s.rss_kib)
    }

    fn start_end(&self, field: impl Fn(&Sample) -> u64) -> Option<(u64, u64)> {
        let warm = self.warm();
        if warm.is_empty() {
            return None;
        }
        let n = EDGE_SAMPLES.min(warm.len());
        let start = median(warm[..n].iter().map(&field).collect());
        let end = median(warm[warm.len() - n..].iter().map(&field).collect());
        Some((start, end))
    }

    /// (start, end) descriptors after warm-up, medians like the RSS: one instant may catch
    /// a socket being replaced (Slack opens the new one before closing the old).
    pub fn fds_start_end(&self) -> Option<(usize, usize)> {
        self.start_end(|s| s.fds as u64)
            .map(|(a, b)| (a as usize, b as usize))
    }

    pub fn growth_pct(&self) -> Option<f64> {
        let (start, end) = self.rss_start_end()?;
        (start > 0).then(|| (end as f64 - start as f64) * 100.0 / start as f64)
    }

    pub fn to_json(&self) -> Value {
        let peak = self.samples.iter().map(|s| s.rss_kib).max().unwrap_or(0);
        let (rss_start, rss_end) = self.rss_start_end().unzip();
        let (fds_start, fds_end) = self.fds_start_end().unzip();
        let (anon_start, anon_end) = self.start_end(|s| s.rss_anon_kib).unzip();
        // The heap lines come every 5 s from the start: skip the warm-up's, then compare the
        // medians of the first and last three.
        let heap: Vec<(u64, u64)> = self
            .heap
            .iter()
            .copied()
            .skip((WARM_UP.as_secs() / HEAP_STATS_EVERY_S) as usize)
            .collect();
        let edge = |pick: fn(&(u64, u64)) -> u64| -> Option<(u64, u64)> {
            let n = 3.min(heap.len());
            (n > 0).then(|| {
                (
                    median(heap[..n].iter().map(pick).collect()),
                    median(heap[heap.len() - n..].iter().map(pick).collect()),
                )
            })
        };
        let (rust_start, rust_end) = edge(|h| h.0).unzip();
        let (outside_start, outside_end) = edge(|h| h.1).unzip();
        let resident: Vec<u64> = self
            .heap_resident
            .iter()
            .copied()
            .skip((WARM_UP.as_secs() / HEAP_STATS_EVERY_S) as usize)
            .collect();
        let n = 3.min(resident.len());
        let (resident_start, resident_end) = (n > 0)
            .then(|| {
                (
                    median(resident[..n].to_vec()),
                    median(resident[resident.len() - n..].to_vec()),
                )
            })
            .unzip();
        let (file_start, file_end) = self.start_end(|s| s.rss_file_kib).unzip();
        let fd_changes = self
            .fd_kinds_warm
            .as_ref()
            .map(|warm| fds::changed(warm, &self.fd_kinds_last));
        json!({
            "heap_rust_resident_start_kib": resident_start,
            "heap_rust_resident_end_kib": resident_end,
            "rss_file_start_kib": file_start,
            "rss_file_end_kib": file_end,
            "fd_kinds_end": self.fd_kinds_last,
            "fd_kinds_changed_after_warm_up": fd_changes,
            "heap_rust_allocated_start_kib": rust_start,
            "heap_rust_allocated_end_kib": rust_end,
            "heap_outside_rust_start_kib": outside_start,
            "heap_outside_rust_end_kib": outside_end,
            "pid": self.pid,
            "lived_s": self.lived.as_secs(),
            "ended": self.ended,
            "rss_first_kib": self.samples.first().map(|s| s.rss_kib),
            "rss_start_kib": rss_start,
            "rss_peak_kib": peak,
            "rss_end_kib": rss_end,
            "rss_growth_pct": self.growth_pct().map(|g| (g * 100.0).round() / 100.0),
            "rss_anon_start_kib": anon_start,
            "rss_anon_end_kib": anon_end,
            "fds_start": fds_start,
            "fds_end": fds_end,
            "judged_span_s": self.judged_span().as_secs(),
            "log_warn_lines": self.warn_lines,
            "log_error_lines": self.error_lines,
            "log_lines_with_secrets": self.secret_lines,
        })
    }
}

#[derive(Debug)]
pub struct Supervisor {
    home: PathBuf,
    env: Vec<(String, String)>,
    /// Values that must never appear in a log line.
    secrets: Vec<String>,
    log_dir: PathBuf,
    /// The fakes' ports by name (descriptor labels).
    ports: HashMap<u16, String>,
    current: Mutex<Option<Daemon>>,
    pub history: Mutex<Vec<Incarnation>>,
}

impl Supervisor {
    pub async fn start(
        home: PathBuf,
        env: Vec<(String, String)>,
        secrets: Vec<String>,
        log_dir: PathBuf,
        ports: HashMap<u16, String>,
    ) -> Arc<Self> {
        // Only this run's logs: an earlier run's incarnations would be misleading.
        let _ = std::fs::remove_dir_all(&log_dir);
        std::fs::create_dir_all(&log_dir).expect("log dir");
        let supervisor = Arc::new(Supervisor {
            home,
            env,
            secrets,
            log_dir,
            ports,
            current: Mutex::new(None),
            history: Mutex::new(Vec::new()),
        });
        supervisor.spawn().await;
        supervisor
    }

    async fn spawn(&self) {
        let (home, env) = (self.home.clone(), self.env.clone());
        let daemon = tokio::task::spawn_blocking(move || Daemon::start(&home, &env))
            .await
            .expect("daemon start");
        self.history.lock().unwrap().push(Incarnation {
            pid: daemon.pid(),
            started: Instant::now(),
            lived: Duration::ZERO,
            samples: Vec::new(),
            ended: "running".into(),
            warn_lines: 0,
            error_lines: 0,
            secret_lines: 0,
            heap: Vec::new(),
            heap_resident: Vec::new(),
            fd_kinds_warm: None,
            fd_kinds_last: FdKinds::new(),
        });
        *self.current.lock().unwrap() = Some(daemon);
    }

    /// The HTTP API of the running incarnation (None while restarting).
    pub fn api_url(&self) -> Option<String> {
        self.current.lock().unwrap().as_ref().map(Daemon::api_url)
    }

    /// Records one RSS/descriptor sample of the running incarnation.
    pub fn sample(&self) {
        let Some(pid) = self.current.lock().unwrap().as_ref().map(Daemon::pid) else {
            return;
        };
        let (rss, fds) = (rss_kib(pid), fd_count(pid));
        let (anon, file) = (status_kib(pid, "RssAnon:"), status_kib(pid, "RssFile:"));
        let home = self.home.to_string_lossy();
        let kinds = fds::kinds(pid, &home, &self.ports);
        let mut history = self.history.lock().unwrap();
        if let Some(last) = history.last_mut().filter(|i| i.pid == pid && rss > 0) {
            let age = last.started.elapsed();
            last.samples.push(Sample {
                age,
                rss_kib: rss,
                rss_anon_kib: anon,
                rss_file_kib: file,
                fds,
            });
            if age >= WARM_UP && last.fd_kinds_warm.is_none() {
                last.fd_kinds_warm = Some(kinds.clone());
            }
            if !kinds.is_empty() {
                last.fd_kinds_last = kinds;
            }
        }
    }

    /// Closes the running incarnation's record and writes its log.
    fn close(&self, logs: &[String], ended: String) {
        let mut history = self.history.lock().unwrap();
        let index = history.len();
        if let Some(last) = history.last_mut() {
            last.lived = last.started.elapsed();
            last.ended = ended;
            last.warn_lines = logs.iter().filter(|l| is_level(l, "WARN")).count();
            last.error_lines = logs.iter().filter(|l| is_level(l, "ERROR")).count();
            last.secret_lines = logs
                .iter()
                .filter(|l| self.secrets.iter().any(|s| l.contains(s.as_str())))
                .count();
            last.heap = logs
                .iter()
                .filter(|l| l.contains("heap stats"))
                .filter_map(|l| {
                    let rust = field(l, "rust_allocated_bytes")?;
                    let outside = field(l, "outside_rust_bytes")?;
                    Some((rust / 1024, outside / 1024))
                })
                .collect();
            last.heap_resident = logs
                .iter()
                .filter(|l| l.contains("heap stats"))
                .filter_map(|l| Some(field(l, "rust_resident_bytes")? / 1024))
                .collect();
        }
        let path = self.log_dir.join(format!("incarnation-{index}.log"));
        let _ = std::fs::write(path, logs.join("\n"));
    }

    /// `kill -9`, then a fresh start on the same home.
    pub async fn kill_and_restart(&self) {
        self.sample();
        let daemon = self.current.lock().unwrap().take();
        if let Some(daemon) = daemon {
            let logs = daemon.logs();
            tokio::task::spawn_blocking(move || daemon.kill9())
                .await
                .expect("kill -9");
            self.close(&logs, "kill -9".into());
        }
        self.spawn().await;
    }

    /// SIGTERM; returns the exit code.
    pub async fn terminate(&self) -> Option<i32> {
        self.sample();
        let daemon = self.current.lock().unwrap().take()?;
        let (status, logs) = tokio::task::spawn_blocking(move || daemon.terminate())
            .await
            .expect("terminate");
        self.close(&logs, format!("SIGTERM, exit {:?}", status.code()));
        status.code()
    }
}

/// The number after `name=` (text logs) or `"name":` (JSON logs) in a log line.
fn field(line: &str, name: &str) -> Option<u64> {
    let at = line.find(name)? + name.len();
    let digits: String = line[at..]
        .trim_start_matches(['=', '"', ':'])
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Whether a log line (text or JSON format) is at `level`.
fn is_level(line: &str, level: &str) -> bool {
    line.contains(&format!(" {level} ")) || line.contains(&format!("\"level\":\"{level}\""))
}

/// A `/proc/PID/status` figure (`RssAnon:`, `RssFile:`) of `pid` in KiB (0 when the
/// process is gone).
fn status_kib(pid: u32, name: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with(name))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}
