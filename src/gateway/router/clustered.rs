//! The router on PostgreSQL, where several instances share the journal: a session's turns
//! run on whichever instance holds the session's lease, one turn at a time cluster-wide.
//!
//! A journaled chat event goes into the local slot only while this instance holds that
//! session's lease (so the busy modes still apply); otherwise it stays in the journal, the
//! other instances are told (`NOTIFY`), and this instance tries to take the lease. The
//! holder runs the session's queued jobs and then every unfinished journaled event of the
//! session nobody here has run yet, oldest first, whoever recorded it; it re-reads the
//! journal after each turn and releases the lease only when nothing is left (announcing
//! the release when work arrived meanwhile). Every write a turn makes is fenced by the
//! lease's token. A polling sweep finds what notifications missed, including the sessions
//! of an instance that died (its leases expire) — that is the failover path.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::MessageEvent;

use super::Router;
use super::slot::{Job, Slot};
use crate::gateway::cluster::{Cluster, Held};
use crate::state::postgres::{notify, with_fence};
use crate::state::{InboundEvent, InboundState};

/// How a journaled event is named in a slot's `seen` set.
pub(super) fn seen_key(platform: &str, event_id: &str) -> String {
    format!("{platform}\u{1f}{event_id}")
}

impl Router {
    /// A journaled chat event, on PostgreSQL (see the module docs).
    pub(super) fn offer_clustered(&self, cluster: &Arc<Cluster>, key: String, job: Job) {
        let slot = self.slot(&key);
        {
            let mut state = slot.lock();
            if state.held {
                state
                    .seen
                    .insert(seen_key(&job.event.source.platform, &job.event.event_id));
                drop(state);
                self.dispatch(key, job);
                return;
            }
        }
        self.kick(&key);
        let cluster = cluster.clone();
        tokio::spawn(async move { cluster.announce(&key).await });
    }

    /// Makes sure a worker looks at `key`'s session: it takes the lease if it is free and
    /// runs the session's unfinished events; it does nothing if another instance holds it.
    pub(super) fn kick(&self, key: &str) {
        if self.cluster.is_none() || self.is_shutting_down() {
            return;
        }
        let slot = self.slot(key);
        let mut state = slot.lock();
        self.ensure_worker(&slot, &mut state);
    }

    /// The worker of a slot on PostgreSQL: hold the lease, run, release; again while work
    /// is queued here.
    pub(super) async fn drain_clustered(self: Arc<Self>, cluster: Arc<Cluster>, slot: Arc<Slot>) {
        loop {
            // An HTTP request is answered by the instance its client is connected to, so
            // it waits for the lease; a chat event may be run by whoever holds it.
            let api_waiting = slot.lock().queue.iter().any(|job| job.api.is_some());
            let held = if api_waiting {
                Some(cluster.hold_waiting(&slot.key).await)
            } else {
                cluster.try_hold(&slot.key).await.unwrap_or_else(|e| {
                    tracing::warn!(session_key = %slot.key, error = %e, "cannot take a session lease; the sweep retries");
                    None
                })
            };
            let Some(held) = held else {
                let mut state = slot.lock();
                // Chat events are in the journal: the lease holder runs them.
                let jobs = state.discard_queue(&self.metrics.router_queue_depth);
                for job in jobs.into_iter().filter(|job| job.api.is_some()) {
                    state.enqueue(job, &self.metrics.router_queue_depth);
                }
                if state.queue.is_empty() {
                    state.worker = false;
                    return;
                }
                continue;
            };
            slot.lock().held = true;
            tracing::debug!(session_key = %slot.key, token = held.lease().token, "session lease taken");
            self.run_held(&slot, &held).await;
            let seen = {
                let mut state = slot.lock();
                state.held = false;
                std::mem::take(&mut state.seen)
            };
            let lost = held.is_lost();
            cluster.release(held).await;
            if !lost {
                self.announce_leftovers(&cluster, &slot.key, &seen).await;
            }
            let mut state = slot.lock();
            if state.queue.is_empty() {
                state.worker = false;
                return;
            }
        }
    }

    /// Runs the slot's jobs, then the session's unfinished journaled events, under `held`,
    /// until none is left or the lease is lost.
    async fn run_held(&self, slot: &Arc<Slot>, held: &Held) {
        loop {
            if held.is_lost() || self.is_shutting_down() {
                return;
            }
            let next = slot.lock().dequeue(&self.metrics.router_queue_depth);
            let job = match next {
                Some(job) => job,
                None if self.pull_journal(slot).await > 0 => continue,
                None => return,
            };
            if job.api.is_none() {
                slot.lock()
                    .seen
                    .insert(seen_key(&job.event.source.platform, &job.event.event_id));
            }
            let Ok(_permit) = self.turn_limit.clone().acquire_owned().await else {
                return;
            };
            with_fence(held.lease().clone(), self.run_job(slot, job)).await;
        }
    }

    /// Queues the session's unfinished journaled events not yet run under this hold, oldest
    /// first. Returns how many were queued.
    async fn pull_journal(&self, slot: &Arc<Slot>) -> usize {
        let unfinished = match self.store.unfinished_inbound().await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(session_key = %slot.key, error = %e, "cannot read the session's unfinished events");
                return 0;
            }
        };
        let mut fresh: Vec<InboundEvent> = {
            let state = slot.lock();
            unfinished
                .into_iter()
                .filter(|e| e.session_key == slot.key)
                .filter(|e| !state.seen.contains(&seen_key(&e.platform, &e.event_id)))
                .collect()
        };
        fresh.sort_by(|a, b| a.received_at.total_cmp(&b.received_at));
        let mut queued = 0;
        for journaled in fresh {
            let name = seen_key(&journaled.platform, &journaled.event_id);
            let job = self.journaled_job(&journaled).await;
            let mut state = slot.lock();
            state.seen.insert(name);
            if let Some(job) = job {
                state.enqueue(job, &self.metrics.router_queue_depth);
                queued += 1;
            }
        }
        queued
    }

    /// After a release: when the session has unfinished events this hold did not take up
    /// (they arrived after its last look), another instance is told to take them.
    async fn announce_leftovers(&self, cluster: &Cluster, key: &str, seen: &HashSet<String>) {
        let Ok(unfinished) = self.store.unfinished_inbound().await else {
            return;
        };
        let left = unfinished
            .iter()
            .any(|e| e.session_key == key && !seen.contains(&seen_key(&e.platform, &e.event_id)));
        if left {
            cluster.announce(key).await;
        }
    }

    /// The sessions with unfinished events this instance could run (it has their platform).
    pub(super) async fn sessions_with_work(&self) -> BTreeSet<String> {
        match self.store.unfinished_inbound().await {
            Ok(events) => events
                .into_iter()
                .filter(|e| self.link(&e.platform).is_some())
                .map(|e| e.session_key)
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read unfinished events");
                BTreeSet::new()
            }
        }
    }

    /// A journaled event as a job: `None` when this instance cannot run it (no such
    /// platform here) or its payload is unreadable (then it is closed, as at a restart).
    pub(super) async fn journaled_job(&self, journaled: &InboundEvent) -> Option<Job> {
        self.link(&journaled.platform)?;
        let event: MessageEvent = match serde_json::from_value(journaled.payload.clone()) {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(event_id = %journaled.event_id, error = %e, "unreadable journaled event; closing it");
                let _ = self
                    .store
                    .mark_inbound(
                        &journaled.platform,
                        &journaled.event_id,
                        InboundState::Ignored,
                    )
                    .await;
                return None;
            }
        };
        Some(Job {
            event,
            resumed: journaled.state == InboundState::Processing,
            api: None,
        })
    }

    /// A turn whose session lease another instance took over (this one stalled past it):
    /// its writes were refused, and it sends nothing; the new holder answers the event.
    pub(super) fn lease_lost(&self, job: &Job, error: &crate::state::StoreError) {
        tracing::warn!(platform = %job.event.source.platform, event_id = %job.event.event_id, error = %error,
            "session lease lost mid-turn; another instance answers this event");
        if let Some(api) = &job.api {
            Self::answer_api_error(api, "the session moved to another instance; please retry");
        }
    }

    /// The background work of an instance on PostgreSQL: session-work notifications, and
    /// the sweep (unfinished events whose session is free; replies owed by dead instances).
    pub(super) fn start_cluster_tasks(self: &Arc<Self>, cluster: &Arc<Cluster>) {
        let router = Arc::downgrade(self);
        let listening = cluster.clone();
        tokio::spawn(async move { listen(router, listening).await });
        let router = Arc::downgrade(self);
        let every = cluster.sweep_interval();
        let resend_every = cluster.lease_ttl();
        tokio::spawn(async move { sweep(router, every, resend_every).await });
    }
}

/// Wakes the sessions other instances announce.
async fn listen(router: std::sync::Weak<Router>, cluster: Arc<Cluster>) {
    let retry = cluster.sweep_interval();
    loop {
        let pool = match router.upgrade() {
            Some(router) if !router.is_shutting_down() => match router.store.postgres() {
                Some(pg) => pg.pool().clone(),
                None => return,
            },
            _ => return,
        };
        let mut listener = match notify::session_work_listener(&pool).await {
            Ok(listener) => listener,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for session work; polling only for now");
                tokio::time::sleep(retry).await;
                continue;
            }
        };
        loop {
            let key = match listener.recv().await {
                Ok(notification) => notification.payload().to_owned(),
                Err(e) => {
                    tracing::warn!(error = %e, "session-work notifications interrupted");
                    tokio::time::sleep(retry).await;
                    break;
                }
            };
            let Some(router) = router.upgrade() else {
                return;
            };
            if router.is_shutting_down() {
                return;
            }
            cluster.woken(&key);
            router.kick(&key);
        }
    }
}

/// The fallback and the failover: every `every`, each session with unfinished events is
/// kicked (its lease is taken if free: never held, released, or expired with a dead
/// holder); every `resend_every`, replies owed by instances no longer alive are sent.
async fn sweep(router: std::sync::Weak<Router>, every: Duration, resend_every: Duration) {
    let mut last_resend = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(every).await;
        let Some(router) = router.upgrade() else {
            return;
        };
        if router.is_shutting_down() {
            return;
        }
        for key in router.sessions_with_work().await {
            router.kick(&key);
        }
        if last_resend.elapsed() >= resend_every {
            last_resend = tokio::time::Instant::now();
            let sent = router.resend_replies().await;
            if sent > 0 {
                tracing::info!(sent, "sending replies owed by instances that stopped");
            }
        }
    }
}
