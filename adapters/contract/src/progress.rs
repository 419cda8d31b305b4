//! Liveness by progress: adapters report inbound progress (a poll completed, a heartbeat
//! acknowledged); the core judges liveness from the time since the last report, never
//! from socket state.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A cheap, cloneable progress reporter shared by an adapter and the core's supervisor.
#[derive(Debug, Clone)]
pub struct Progress {
    inner: Arc<ProgressInner>,
}

#[derive(Debug)]
struct ProgressInner {
    origin: Instant,
    last_micros: AtomicU64,
    reports: AtomicU64,
}

/// The supervisor's reading of an adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Live,
    /// No progress for longer than the adapter's window.
    Silent {
        for_: Duration,
    },
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress {
    pub fn new() -> Self {
        Self {
            inner: Arc::new(ProgressInner {
                origin: Instant::now(),
                last_micros: AtomicU64::new(0),
                reports: AtomicU64::new(0),
            }),
        }
    }

    /// Records that the connection demonstrably works right now.
    pub fn report(&self) {
        let now = self.inner.origin.elapsed().as_micros() as u64;
        self.inner.last_micros.store(now, Ordering::Relaxed);
        self.inner.reports.fetch_add(1, Ordering::Relaxed);
    }

    pub fn reports(&self) -> u64 {
        self.inner.reports.load(Ordering::Relaxed)
    }

    /// Live when progress was reported within `window` (counting from creation).
    pub fn liveness(&self, window: Duration) -> Liveness {
        let now = self.inner.origin.elapsed();
        let last = Duration::from_micros(self.inner.last_micros.load(Ordering::Relaxed));
        let silent = now.saturating_sub(last);
        if silent <= window {
            Liveness::Live
        } else {
            Liveness::Silent { for_: silent }
        }
    }
}
