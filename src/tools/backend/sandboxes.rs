//! The backends in use, one per scope: opened on a scope's first tool call, shared by its
//! later calls, stopped once idle for `terminal.lifetime_seconds` (never while a call holds
//! it), replaced after it went away, and all stopped at shutdown.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

use super::{Backend, BackendError, BackendFuture, Scope};

/// Opens the backend of one scope (starts its container, connects, makes its directory).
pub trait BackendFactory: Send + Sync {
    /// `local`, `sandbox`, `docker` or `ssh`.
    fn kind(&self) -> &'static str;

    fn open<'a>(&'a self, scope: &'a Scope) -> BackendFuture<'a, Arc<dyn Backend>>;

    /// For `doctor`: whether the backend can be reached, described in one line.
    fn probe(&self) -> BackendFuture<'_, String>;

    /// Removes what an earlier run left behind (containers of a killed daemon), once at start.
    fn sweep(&self) -> BackendFuture<'_, usize> {
        Box::pin(async { Ok(0) })
    }
}

struct Entry {
    backend: Arc<dyn Backend>,
    last_used: Instant,
}

/// The open backends by scope id.
pub struct Sandboxes {
    factory: Arc<dyn BackendFactory>,
    idle_after: Duration,
    /// Scopes being opened hold this lock: two first calls of one scope open it once.
    open: Mutex<HashMap<String, Entry>>,
}

impl std::fmt::Debug for Sandboxes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandboxes")
            .field("kind", &self.factory.kind())
            .field("idle_after", &self.idle_after)
            .finish_non_exhaustive()
    }
}

impl Sandboxes {
    pub fn new(factory: Arc<dyn BackendFactory>, idle_after: Duration) -> Self {
        Self {
            factory,
            idle_after,
            open: Mutex::new(HashMap::new()),
        }
    }

    pub fn kind(&self) -> &'static str {
        self.factory.kind()
    }

    pub fn factory(&self) -> &Arc<dyn BackendFactory> {
        &self.factory
    }

    /// The scope's backend, opened if it is not yet.
    pub async fn get(&self, scope: &Scope) -> Result<Arc<dyn Backend>, BackendError> {
        let id = scope.id();
        let mut open = self.open.lock().await;
        if let Some(entry) = open.get_mut(&id) {
            entry.last_used = Instant::now();
            return Ok(Arc::clone(&entry.backend));
        }
        let backend = self.factory.open(scope).await?;
        tracing::info!(kind = backend.kind(), scope = %id, "sandbox opened");
        open.insert(
            id,
            Entry {
                backend: Arc::clone(&backend),
                last_used: Instant::now(),
            },
        );
        Ok(backend)
    }

    /// Forgets `backend` for `scope` after it went away, so the next call opens a fresh one.
    /// A newer backend already in its place is kept.
    pub async fn discard(&self, scope: &Scope, backend: &Arc<dyn Backend>) {
        let id = scope.id();
        let removed = {
            let mut open = self.open.lock().await;
            match open.get(&id) {
                Some(entry) if Arc::ptr_eq(&entry.backend, backend) => open.remove(&id),
                _ => None,
            }
        };
        if let Some(entry) = removed {
            tracing::warn!(kind = entry.backend.kind(), scope = %id, "sandbox went away; the next call opens a new one");
            entry.backend.shutdown().await;
        }
    }

    /// Stops the backends idle longer than the lifetime that no call holds. Returns how many.
    pub async fn reap_idle(&self) -> usize {
        let now = Instant::now();
        let idle: Vec<Entry> = {
            let mut open = self.open.lock().await;
            let ids: Vec<String> = open
                .iter()
                .filter(|(_, entry)| {
                    now.duration_since(entry.last_used) >= self.idle_after
                        && Arc::strong_count(&entry.backend) == 1
                })
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| open.remove(id)).collect()
        };
        for entry in &idle {
            tracing::info!(kind = entry.backend.kind(), "idle sandbox stopped");
            entry.backend.shutdown().await;
        }
        idle.len()
    }

    /// How many backends are open.
    pub async fn open_count(&self) -> usize {
        self.open.lock().await.len()
    }

    /// Stops every backend (daemon shutdown).
    pub async fn shutdown(&self) {
        let all: Vec<Entry> = self.open.lock().await.drain().map(|(_, e)| e).collect();
        for entry in all {
            entry.backend.shutdown().await;
        }
    }

    /// Runs [`reap_idle`](Self::reap_idle) every quarter lifetime (at least every 5 s, at
    /// most every minute) until `stop`.
    pub async fn reap_until(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let period = (self.idle_after / 4).clamp(Duration::from_secs(5), Duration::from_secs(60));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => { self.reap_idle().await; }
            }
        }
    }
}
