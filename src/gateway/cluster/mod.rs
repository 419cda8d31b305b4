//! Several active instances sharing one state (`state.backend: postgres`): opening the
//! configured store, and the session leases (through the store's `coord::Coordinator`) that
//! let exactly one instance at a time run a session's turns (docs/cluster.md). The router
//! drives them (`ClusterLink`, `router/cluster/`); with a state of its own (SQLite) an
//! instance has none of this.
//!
//! Telegram polling leadership and Discord shard claims are `LeaseScope::Ingress` leases the
//! adapter's supervisor task holds (`gateway/ingress_lease.rs`), not session leases.

mod hold;
mod open;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use crate::coord::{CoordError, Coordinator, LeaseScope, WorkListener};
use crate::state::Store;

pub use hold::Held;
pub use open::{OpenError, open_configured_store};

/// Slowest polling sweep, whatever the lease time.
const MAX_SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// Fastest polling sweep (a very short test lease must not turn it into a busy loop).
const MIN_SWEEP_INTERVAL: Duration = Duration::from_millis(100);

/// This instance's side of the coordination: its name, the lease time, and the local fan-out
/// of session-work notifications to turns waiting for a session's lease.
#[derive(Debug)]
pub struct Cluster {
    coord: Coordinator,
    instance: String,
    ttl: Duration,
    /// Session keys announced on the notification channel (by any instance, this one too).
    woken: broadcast::Sender<String>,
}

impl Cluster {
    /// The coordination of `store`'s instance; `None` when no other instance shares the
    /// state (one instance owns the file).
    pub fn new(store: &Store) -> Option<Arc<Self>> {
        let coord = store.coordinator();
        if !coord.is_shared() {
            return None;
        }
        let (woken, _) = broadcast::channel(1024);
        Some(Arc::new(Self {
            coord: coord.clone(),
            instance: coord.instance_id().to_owned(),
            ttl: coord.lease_ttl(),
            woken,
        }))
    }

    pub fn instance_id(&self) -> &str {
        &self.instance
    }

    pub fn lease_ttl(&self) -> Duration {
        self.ttl
    }

    /// How often unfinished events are looked for: a fifth of the lease time, at most 1 s.
    pub fn sweep_interval(&self) -> Duration {
        (self.ttl / 5).clamp(MIN_SWEEP_INTERVAL, MAX_SWEEP_INTERVAL)
    }

    /// Takes `session_key`'s lease if nobody holds it; it is renewed every third of the lease
    /// time until released.
    pub async fn try_hold(&self, session_key: &str) -> Result<Option<Held>, CoordError> {
        let asked_at = tokio::time::Instant::now();
        let lease = self
            .coord
            .acquire(LeaseScope::Session, session_key, &self.instance, self.ttl)
            .await?;
        Ok(lease.map(|lease| Held::start(self.coord.clone(), lease, asked_at)))
    }

    /// Waits until this instance holds `session_key`'s lease: retried when the key is
    /// announced (a release, new work) and at each sweep interval otherwise (a holder that
    /// died sends nothing; its lease just expires). `None` once `give_up()` says so.
    pub async fn hold_waiting(
        &self,
        session_key: &str,
        give_up: impl Fn() -> bool,
    ) -> Option<Held> {
        let mut woken = self.woken.subscribe();
        loop {
            if give_up() {
                return None;
            }
            match self.try_hold(session_key).await {
                Ok(Some(held)) => return Some(held),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(session_key, error = %e, "cannot take a session lease; retrying")
                }
            }
            let deadline = tokio::time::sleep(self.sweep_interval());
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    _ = &mut deadline => break,
                    key = woken.recv() => match key {
                        Ok(key) if key != session_key => continue,
                        _ => break,
                    },
                }
            }
        }
    }

    /// Gives the lease up and tells the other instances the session is free.
    pub async fn release(&self, held: Held) {
        let key = held.lease().key.clone();
        if let Err(e) = held.release(&self.coord).await {
            tracing::warn!(session_key = %key, error = %e, "cannot release a session lease; it expires on its own");
        }
        self.announce(&key).await;
    }

    /// Tells every instance (this one too) that `session_key` has work.
    pub async fn announce(&self, session_key: &str) {
        if let Err(e) = self.coord.announce_session_work(session_key).await {
            tracing::warn!(session_key, error = %e, "cannot announce session work; the sweep will find it");
        }
    }

    /// A listener for the session keys any instance announces from now on.
    pub async fn listen(&self) -> Result<Box<dyn WorkListener>, CoordError> {
        self.coord.listen_session_work().await
    }

    /// Passes a notification on to the turns waiting for that session's lease here.
    pub fn woken(&self, session_key: &str) {
        let _ = self.woken.send(session_key.to_owned());
    }
}
