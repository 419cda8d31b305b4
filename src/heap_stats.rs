//! Where the daemon's memory goes, for the soak (`--features heap-stats`): with jemalloc as
//! Rust's global allocator its statistics count exactly the Rust heap, while SQLite (C,
//! bundled) still allocates its page caches from glibc's malloc. So the process's anonymous
//! RSS splits into the Rust heap (jemalloc `resident`) and the rest (SQLite's caches and
//! statements, thread stacks), and a leak in our code shows as growth of
//! `rust_allocated_bytes`, a filling cache as growth of the rest up to its cap.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// One reading of the memory figures, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapSnapshot {
    /// Live bytes the Rust code holds (jemalloc `stats.allocated`).
    pub rust_allocated: u64,
    /// Pages jemalloc holds for them (`stats.resident`).
    pub rust_resident: u64,
    /// The process's anonymous resident memory (`RssAnon` in `/proc/self/status`).
    pub rss_anon: u64,
}

impl HeapSnapshot {
    /// Anonymous memory outside jemalloc: SQLite's page caches and statements (glibc
    /// malloc), thread stacks.
    pub fn outside_rust(&self) -> u64 {
        self.rss_anon.saturating_sub(self.rust_resident)
    }
}

/// `RssAnon` of this process, in bytes.
fn rss_anon() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("RssAnon:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The figures now; `None` unless built with `heap-stats`.
#[cfg(feature = "heap-stats")]
pub fn snapshot() -> Option<HeapSnapshot> {
    use tikv_jemalloc_ctl::{epoch, stats};
    // jemalloc caches its statistics; advancing the epoch refreshes them.
    epoch::advance().ok()?;
    Some(HeapSnapshot {
        rust_allocated: stats::allocated::read().ok()? as u64,
        rust_resident: stats::resident::read().ok()? as u64,
        rss_anon: rss_anon()?,
    })
}

/// The figures now; `None` unless built with `heap-stats`.
#[cfg(not(feature = "heap-stats"))]
pub fn snapshot() -> Option<HeapSnapshot> {
    let _ = rss_anon;
    None
}

/// Logs a snapshot every `every` until `stop` (nothing without `heap-stats`).
pub async fn log_every(every: Duration, stop: CancellationToken) {
    if snapshot().is_none() {
        return;
    }
    let mut ticks = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if let Some(s) = snapshot() {
            tracing::info!(
                rust_allocated_bytes = s.rust_allocated,
                rust_resident_bytes = s.rust_resident,
                rss_anon_bytes = s.rss_anon,
                outside_rust_bytes = s.outside_rust(),
                "heap stats"
            );
        }
    }
}
