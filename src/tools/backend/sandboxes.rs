//! The backends in use, one per scope: opened on a scope's first tool call, shared by its
//! later calls, stopped once idle for `terminal.lifetime_seconds` (never while a call holds
//! it), replaced after it went away, and all stopped at shutdown.
//!
//! Each scope has its own slot with its own lock: opening one scope's container (seconds)
//! never holds up another scope's call; the map of slots is locked only to find a slot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// One scope's backend while it is open.
#[derive(Default)]
struct Slot {
    /// Held while the backend is opened, replaced or stopped.
    backend: tokio::sync::Mutex<Option<Arc<dyn Backend>>>,
    last_used: Mutex<Option<Instant>>,
}

impl Slot {
    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    fn idle_since(&self) -> Option<Instant> {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The open backends by scope id.
pub struct Sandboxes {
    factory: Arc<dyn BackendFactory>,
    idle_after: Duration,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
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
            slots: Mutex::new(HashMap::new()),
        }
    }

    pub fn kind(&self) -> &'static str {
        self.factory.kind()
    }

    pub fn factory(&self) -> &Arc<dyn BackendFactory> {
        &self.factory
    }

    fn slot(&self, id: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(slots.entry(id.to_owned()).or_default())
    }

    fn all_slots(&self) -> Vec<(String, Arc<Slot>)> {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .iter()
            .map(|(id, slot)| (id.clone(), Arc::clone(slot)))
            .collect()
    }

    /// The scope's backend, opened if it is not yet. Two first calls of one scope open it
    /// once; calls of other scopes do not wait for it.
    pub async fn get(&self, scope: &Scope) -> Result<Arc<dyn Backend>, BackendError> {
        let id = scope.id();
        let slot = self.slot(&id);
        let mut backend = slot.backend.lock().await;
        slot.touch();
        if let Some(open) = backend.as_ref() {
            return Ok(Arc::clone(open));
        }
        let opened = self.factory.open(scope).await?;
        tracing::info!(kind = opened.kind(), scope = %id, "sandbox opened");
        *backend = Some(Arc::clone(&opened));
        Ok(opened)
    }

    /// Forgets `backend` for `scope` after it went away, so the next call opens a fresh one.
    /// A newer backend already in its place is kept.
    pub async fn discard(&self, scope: &Scope, backend: &Arc<dyn Backend>) {
        let id = scope.id();
        let slot = self.slot(&id);
        let mut current = slot.backend.lock().await;
        if current.as_ref().is_some_and(|b| Arc::ptr_eq(b, backend)) {
            let gone = current.take().expect("checked above");
            tracing::warn!(kind = gone.kind(), scope = %id, "sandbox went away; the next call opens a new one");
            gone.shutdown().await;
        }
    }

    /// Stops the backends idle longer than the lifetime that no call holds. Returns how many.
    pub async fn reap_idle(&self) -> usize {
        let now = Instant::now();
        let mut stopped = 0;
        for (id, slot) in self.all_slots() {
            let idle = slot
                .idle_since()
                .is_none_or(|last| now.duration_since(last) >= self.idle_after);
            if !idle {
                continue;
            }
            // A slot being opened or used right now is not idle.
            let Ok(mut backend) = slot.backend.try_lock() else {
                continue;
            };
            let unheld = backend.as_ref().is_some_and(|b| Arc::strong_count(b) == 1);
            if unheld {
                let idle_backend = backend.take().expect("checked above");
                tracing::info!(kind = idle_backend.kind(), scope = %id, "idle sandbox stopped");
                idle_backend.shutdown().await;
                stopped += 1;
            }
            if backend.is_none() {
                let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
                if slots.get(&id).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                    slots.remove(&id);
                }
            }
        }
        stopped
    }

    /// How many backends are open.
    pub async fn open_count(&self) -> usize {
        let mut count = 0;
        for (_, slot) in self.all_slots() {
            if slot.backend.lock().await.is_some() {
                count += 1;
            }
        }
        count
    }

    /// Stops every backend (daemon shutdown).
    pub async fn shutdown(&self) {
        let slots: Vec<Arc<Slot>> = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.drain().map(|(_, slot)| slot).collect()
        };
        for slot in slots {
            if let Some(backend) = slot.backend.lock().await.take() {
                backend.shutdown().await;
            }
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

#[cfg(test)]
#[path = "sandboxes_tests.rs"]
mod tests;
