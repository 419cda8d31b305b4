//! The router on PostgreSQL, where several instances share the journal: a session's turns
//! run on whichever instance holds the session's lease, one turn at a time cluster-wide.
//!
//! A journaled chat event goes into the local slot only while this instance holds that
//! session's lease (so the busy modes still apply); otherwise it stays in the journal, the
//! other instances are told (`NOTIFY`), and this instance tries to take the lease. The
//! holder runs the session's queued jobs and then every unfinished journaled event of the
//! session nobody here has run yet, oldest first, whoever recorded it; it re-reads the
//! journal after each turn and releases the lease only when nothing is left (announcing
//! the release when work arrived meanwhile); events for a session it holds that reach it
//! mid-turn through other instances go through the busy rules at once (`cluster/journal_pull.rs`).
//! Every write a turn makes is fenced by the
//! lease's token. A polling sweep finds what notifications missed, including the sessions
//! of an instance that died (its leases expire) — that is the failover path.

pub(super) mod journal_pull;
pub(super) mod merge;
pub(super) mod recovery;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Weak};

use hermes_adapter::MessageEvent;
use tokio::sync::Semaphore;

use crate::coord::{ListenError, with_fence};
use crate::gateway::cluster::{Cluster, Held};
use crate::gateway::metrics::GatewayMetrics;
use crate::gateway::router::cluster::journal_pull::untaken;
use crate::gateway::router::gatekeeper::Gatekeeper;
use crate::gateway::router::handles::Stopping;
use crate::gateway::router::responder::Responder;
use crate::gateway::router::slot::{Job, Slot, SlotState};
use crate::gateway::router::slot_table::SlotTable;
use crate::gateway::router::turn::pending_media::with_media_fetched;
use crate::gateway::routing::RoutingIndex;
use crate::state::{InboundEvent, InboundState, Store};

/// How a journaled event is named in a slot's `seen` set.
pub(in crate::gateway::router) fn seen_key(platform: &str, event_id: &str) -> String {
    format!("{platform}\u{1f}{event_id}")
}

/// A journaled chat event, on PostgreSQL (see the module docs).
/// The router's side of PostgreSQL mode (see the module docs): its parts are the shared
/// cluster handle and the router parts it reads and answers through; what it needs from
/// the router's workers is [`SlotWork`].
pub(in crate::gateway::router) struct ClusterLink {
    pub cluster: Arc<Cluster>,
    pub store: Store,
    pub slots: Arc<SlotTable>,
    pub responder: Arc<Responder>,
    pub routing: Arc<RoutingIndex>,
    pub gate: Arc<Gatekeeper>,
    pub metrics: Arc<GatewayMetrics>,
    pub turn_limit: Arc<Semaphore>,
    pub stopping: Stopping,
}

/// What the cluster link asks of the router's workers.
pub(in crate::gateway::router) trait SlotWork:
    Send + Sync + 'static
{
    /// Puts `job` into `key`'s slot through the busy rules.
    fn place(&self, key: String, job: Job);
    /// Starts a worker for `slot`, which the caller claimed (`SlotState::claim_worker`).
    fn start_worker(self: &Arc<Self>, slot: &Arc<Slot>);
    /// Runs one job of the slot (a command or a turn), isolated from panics.
    fn run_job(&self, slot: &Arc<Slot>, job: Job) -> impl Future<Output = ()> + Send;
}

impl ClusterLink {
    /// A journaled chat event, on PostgreSQL (see the module docs).
    pub(in crate::gateway::router) fn offer<W: SlotWork>(
        self: &Arc<Self>,
        work: &Arc<W>,
        key: String,
        job: Job,
    ) {
        let slot = self.slots.get_or_create(&key);
        {
            let mut state = slot.lock();
            // A part of an album or split paste while no turn runs is left to the worker's
            // look at the journal, which waits for the other parts (`merge.rs`).
            if state.held && awaits_worker(&job, &state) {
                return;
            }
            if state.held {
                state
                    .seen
                    .insert(seen_key(&job.event.source.platform, &job.event.event_id));
                drop(state);
                work.place(key, job);
                return;
            }
        }
        self.kick(work, &key);
        let cluster = self.cluster.clone();
        tokio::spawn(async move { cluster.announce(&key).await });
    }

    /// Makes sure a worker looks at `key`'s session: it takes the lease if it is free and
    /// runs the session's unfinished events; it does nothing if another instance holds it.
    /// When this instance holds it, events other instances recorded are taken up at once.
    pub(in crate::gateway::router) fn kick<W: SlotWork>(
        self: &Arc<Self>,
        work: &Arc<W>,
        key: &str,
    ) {
        if self.stopping.is_set() {
            return;
        }
        let slot = self.slots.get_or_create(key);
        let mut state = slot.lock();
        if state.held {
            // Ours, and a turn may be running: news for it cannot wait for the boundary.
            self.pull_journaled(work, &slot, &mut state);
            return;
        }
        if state.claim_worker() {
            drop(state);
            work.start_worker(&slot);
        }
    }

    /// The sweep's look at every session with unfinished events: a free one is kicked;
    /// one held here is pulled only when it has a received event not yet taken up (its
    /// running turn's own event is no news).
    pub(in crate::gateway::router) async fn sweep_sessions<W: SlotWork>(
        self: &Arc<Self>,
        work: &Arc<W>,
    ) {
        let unfinished = match self.store.unfinished_inbound().await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read unfinished events");
                return;
            }
        };
        let mut news: BTreeSet<&str> = BTreeSet::new();
        let mut keys: BTreeSet<&str> = BTreeSet::new();
        for event in unfinished
            .iter()
            .filter(|e| self.responder.link(&e.platform).is_some())
        {
            keys.insert(&event.session_key);
            if event.state == InboundState::Received {
                let slot = self.slots.get_or_create(&event.session_key);
                let state = slot.lock();
                if state.held
                    && !state
                        .seen
                        .contains(&seen_key(&event.platform, &event.event_id))
                {
                    news.insert(&event.session_key);
                }
            }
        }
        for key in keys {
            let slot = self.slots.get_or_create(key);
            let held = slot.lock().held;
            if !held || news.contains(key) {
                self.kick(work, key);
            }
        }
    }

    /// The worker of a slot on PostgreSQL: hold the lease, run, release; again while work
    /// is queued here.
    pub(in crate::gateway::router) async fn drain<W: SlotWork>(&self, work: &W, slot: Arc<Slot>) {
        let cluster = &self.cluster;
        loop {
            // An HTTP request is answered by the instance its client is connected to, so
            // it waits for the lease; a chat event may be run by whoever holds it.
            let (api_waiting, queued) = {
                let state = slot.lock();
                let api = state.queue.iter().any(|job| job.api.is_some());
                (api, !state.queue.is_empty())
            };
            // A lease is taken only for work: a notification (a release elsewhere, an
            // announcement this instance made itself) names a session that may have none
            // left, and an idle cluster must stay quiet — no lease, no token drawn, no
            // notification.
            if !queued && !self.has_work(&slot.key).await {
                let mut state = slot.lock();
                if state.queue.is_empty() {
                    state.worker = false;
                    return;
                }
                continue;
            }
            let held = if api_waiting {
                cluster
                    .hold_waiting(&slot.key, || self.stopping.is_set())
                    .await
            } else {
                cluster.try_hold(&slot.key).await.unwrap_or_else(|e| {
                tracing::warn!(session_key = %slot.key, error = %e, "cannot take a session lease; the sweep retries");
                None
            })
            };
            let Some(held) = held else {
                let mut state = slot.lock();
                // Chat events are in the journal: the lease holder runs them.
                // HTTP requests wait for the lease, unless the gateway is stopping (their
                // clients are then told so when their answer channel drops).
                let jobs = state.discard_queue(&self.metrics.router_queue_depth);
                let stopping = self.stopping.is_set();
                for job in jobs
                    .into_iter()
                    .filter(|job| job.api.is_some() && !stopping)
                {
                    state.enqueue(job, &self.metrics.router_queue_depth);
                }
                if state.queue.is_empty() {
                    state.worker = false;
                    return;
                }
                continue;
            };
            {
                let mut state = slot.lock();
                state.held = true;
                state.lease_lost = false;
                // Another instance may have run turns since this one last held the session:
                // the agent is loaded again from the stored history.
                state.agent = None;
            }
            // ... and may have started the session or routed it to a new session id.
            if let Err(e) = self.routing.reload_key(&self.store, &slot.key).await {
                tracing::warn!(session_key = %slot.key, error = %e, "cannot re-read the session's routing entry");
            }
            tracing::debug!(session_key = %slot.key, token = held.lease().token, "session lease taken");
            self.run_held(work, &slot, &held).await;
            let seen = {
                let mut state = slot.lock();
                state.held = false;
                std::mem::take(&mut state.seen)
            };
            let lost = held.is_lost() || slot.lock().lease_lost;
            cluster.release(held).await;
            if !lost {
                self.announce_leftovers(&slot.key, &seen).await;
            }
            let mut state = slot.lock();
            if state.queue.is_empty() {
                state.worker = false;
                return;
            }
        }
    }

    /// Whether `key`'s session has journaled events still to answer. When the journal
    /// cannot be read, the lease is tried as before (its holder reads the journal again).
    async fn has_work(&self, key: &str) -> bool {
        self.store
            .has_unfinished_inbound(key)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(session_key = %key, error = %e, "cannot check the session for work; trying its lease");
                true
            })
    }

    /// Runs the slot's jobs and the session's unfinished journaled events under `held`, in
    /// the order they were received, until none is left or the lease is lost.
    async fn run_held<W: SlotWork>(&self, work: &W, slot: &Arc<Slot>, held: &Held) {
        let mut first_seen = merge::FirstSeen::new();
        loop {
            if held.is_lost() || slot.lock().lease_lost {
                return;
            }
            // A stopping gateway finishes what it has and takes up nothing new.
            if !self.stopping.is_set() {
                self.order_by_journal(slot).await;
                // The parts of one album or split paste wait for each other (`merge.rs`).
                if !self.gather_parts(slot, held, &mut first_seen).await {
                    continue;
                }
            }
            let Some(job) = slot.lock().dequeue(&self.metrics.router_queue_depth) else {
                return;
            };
            if job.api.is_none() {
                slot.lock()
                    .seen
                    .insert(seen_key(&job.event.source.platform, &job.event.event_id));
            }
            let job = with_media_fetched(&self.responder, job).await;
            let Ok(_permit) = self.turn_limit.clone().acquire_owned().await else {
                return;
            };
            with_fence(
                held.lease().clone(),
                held.trust().clone(),
                work.run_job(slot, job),
            )
            .await;
        }
    }

    /// Brings the session's unfinished journaled events into the slot's queue and puts the
    /// queue in the journal's order (its sequence, not a host's clock), wherever each event
    /// was received: HTTP requests (not journaled) first, then the events oldest first. A
    /// queued event the journal no longer lists as unfinished is dropped.
    async fn order_by_journal(&self, slot: &Arc<Slot>) {
        let ours = match self.store.unfinished_inbound_of(&slot.key).await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(session_key = %slot.key, error = %e, "cannot read the session's unfinished events");
                return;
            }
        };
        // Decode the events not yet taken up (outside the slot's lock: it may write).
        let untaken: Vec<&InboundEvent> = {
            let state = slot.lock();
            ours.iter()
                .filter(|e| untaken(&state, &seen_key(&e.platform, &e.event_id)))
                .collect()
        };
        let mut fresh = HashMap::new();
        for journaled in untaken {
            let name = seen_key(&journaled.platform, &journaled.event_id);
            fresh.insert(name, self.journaled_job(journaled).await);
        }
        let depth = &self.metrics.router_queue_depth;
        let mut state = slot.lock();
        let jobs = state.discard_queue(depth);
        let (api, chat): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| j.api.is_some());
        let mut chat: Vec<Option<Job>> = chat.into_iter().map(Some).collect();
        let mut index: HashMap<String, usize> = HashMap::new();
        for (i, job) in chat.iter().enumerate() {
            if let Some(job) = job {
                index.insert(seen_key(&job.event.source.platform, &job.event.event_id), i);
            }
        }
        for job in api {
            state.enqueue(job, depth);
        }
        for journaled in &ours {
            let name = seen_key(&journaled.platform, &journaled.event_id);
            if let Some(&i) = index.get(&name)
                && let Some(job) = chat[i].take()
            {
                state.enqueue(job, depth);
            } else if let Some(decoded) = fresh.remove(&name)
            // A pull (`cluster/journal_pull.rs`) may have taken it up while we decoded.
            && !state.seen.contains(&name)
            {
                // Taken up now: not read again from the journal under this hold.
                state.seen.insert(name);
                if let Some(job) = decoded {
                    state.enqueue(job, depth);
                }
            }
        }
        // What is left was journaled (every chat job is, before it is queued) but is no
        // longer unfinished: answered or closed by another holder while this instance did not
        // hold the session (a hold lost mid-queue), or folded into an album's first part. It
        // must not run again.
        for job in chat.into_iter().flatten() {
            tracing::debug!(session_key = %slot.key, event_id = %job.event.event_id,
                "a queued event was answered elsewhere meanwhile; dropped here");
        }
    }

    /// After a release: when the session has unfinished events this hold did not take up
    /// (they arrived after its last look), another instance is told to take them.
    async fn announce_leftovers(&self, key: &str, seen: &HashSet<String>) {
        let Ok(unfinished) = self.store.unfinished_inbound_of(key).await else {
            return;
        };
        let left = unfinished
            .iter()
            .any(|e| !seen.contains(&seen_key(&e.platform, &e.event_id)));
        if left {
            self.cluster.announce(key).await;
        }
    }

    /// A journaled event as a job: `None` when this instance cannot run it (no such
    /// platform here) or its payload is unreadable (then it is closed, as at a restart).
    pub(in crate::gateway::router) async fn journaled_job(
        &self,
        journaled: &InboundEvent,
    ) -> Option<Job> {
        journaled_job(&self.store, &self.responder, &self.gate, journaled).await
    }
}

/// Whether `job`, news for a session held here, is left in the journal for the holding
/// worker's next look instead of going through the busy rules: a part of an album or split
/// paste while no turn runs (the worker is between turns, perhaps waiting for the other
/// parts), so it neither starts a turn alone nor gets a "queued" notice.
pub(in crate::gateway::router) fn awaits_worker(job: &Job, state: &SlotState) -> bool {
    job.event.merge.is_some() && job.api.is_none() && state.running.is_none()
}

/// A journaled event as a job: `None` when this instance cannot run it (no such
/// platform here) or its payload is unreadable (then it is closed, as at a restart).
pub(in crate::gateway::router) async fn journaled_job(
    store: &Store,
    responder: &Responder,
    gate: &Arc<Gatekeeper>,
    journaled: &InboundEvent,
) -> Option<Job> {
    responder.link(&journaled.platform)?;
    let event: MessageEvent = match serde_json::from_value(journaled.payload.clone()) {
        Ok(event) => event,
        Err(e) => {
            tracing::warn!(event_id = %journaled.event_id, error = %e, "unreadable journaled event; closing it");
            let _ = store
                .mark_inbound(
                    &journaled.platform,
                    &journaled.event_id,
                    InboundState::Ignored,
                )
                .await;
            return None;
        }
    };
    // Authorized when it was journaled (perhaps by another instance); its authority is
    // decided again here, and an event the current configuration no longer admits
    // keeps only a guest's.
    let authority = gate
        .authority_of(&event.source)
        .await
        .unwrap_or(crate::tools::context::Authority::Guest);
    Some(Job {
        event,
        resumed: journaled.state == InboundState::Processing,
        api: None,
        authority,
    })
}

/// A turn whose session lease was lost (this instance stalled past it, and another may
/// have taken it): its writes were refused and it sends nothing, and nothing more starts
/// under this hold. A chat event is journaled, so the lease's next holder answers it. An
/// HTTP request is not: its client waits on this instance, so the request goes back to
/// the front of the queue and is run again once the lease is back here (continuing from
/// its stored user message when `recorded`), or answered 502 when that cannot be done.
pub(in crate::gateway::router) fn lease_lost(
    depth: &AtomicU64,
    slot: &Slot,
    job: &Job,
    error: &crate::state::StoreError,
    recorded: bool,
) {
    slot.lock().lease_lost = true;
    let Some(api) = &job.api else {
        tracing::warn!(platform = %job.event.source.platform, event_id = %job.event.event_id, error = %error,
            "session lease lost mid-turn; another instance answers this event");
        return;
    };
    if !api.take_up_again() {
        tracing::warn!(session_key = %slot.key, error = %error, "session lease lost mid-turn; the HTTP request is answered 502");
        crate::gateway::router::responder::Responder::answer_api_error(
            api,
            crate::gateway::router::slot::ApiTurnError::SessionMoved,
        );
        return;
    }
    tracing::warn!(session_key = %slot.key, error = %error, "session lease lost mid-turn; the HTTP request runs again once the lease is back");
    let again = Job {
        event: job.event.clone(),
        resumed: job.resumed || recorded,
        api: Some(api.clone()),
        authority: job.authority,
    };
    slot.lock().enqueue_front(again, depth);
}

/// The background work of an instance on PostgreSQL: session-work notifications, and
/// the sweep (unfinished events whose session is free; replies owed by dead instances).
/// Both end when the router is gone or stopping.
pub(in crate::gateway::router) fn start_cluster_tasks<W: SlotWork>(
    link: &Arc<ClusterLink>,
    work: &Arc<W>,
) {
    let (listener, listening) = (Arc::downgrade(work), link.clone());
    tokio::spawn(async move { listen(listening, listener).await });
    let (sweeper, sweeping) = (Arc::downgrade(work), link.clone());
    tokio::spawn(async move { sweep(sweeping, sweeper).await });
}

/// Wakes the sessions other instances announce.
async fn listen<W: SlotWork>(link: Arc<ClusterLink>, work: Weak<W>) {
    let retry = link.cluster.sweep_interval();
    loop {
        if work.strong_count() == 0 || link.stopping.is_set() {
            return;
        }
        let mut listener = match link.cluster.listen().await {
            Ok(listener) => listener,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for session work; polling only for now");
                tokio::time::sleep(retry).await;
                continue;
            }
        };
        loop {
            let key = match listener.recv().await {
                Ok(key) => key,
                // The store was closed: the gateway is stopping, nothing was lost.
                Err(ListenError::Closed) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "session-work notifications interrupted");
                    tokio::time::sleep(retry).await;
                    break;
                }
            };
            let Some(work) = work.upgrade() else {
                return;
            };
            if link.stopping.is_set() {
                return;
            }
            link.cluster.woken(&key);
            link.kick(&work, &key);
        }
    }
}

/// The fallback and the failover: every sweep interval, each session with unfinished
/// events is kicked (its lease is taken if free: never held, released, or expired with a
/// dead holder); every lease lifetime, replies owed by instances no longer alive are sent.
async fn sweep<W: SlotWork>(link: Arc<ClusterLink>, work: Weak<W>) {
    let (every, resend_every) = (link.cluster.sweep_interval(), link.cluster.lease_ttl());
    let mut last_resend = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(every).await;
        let Some(work) = work.upgrade() else {
            return;
        };
        if link.stopping.is_set() {
            return;
        }
        link.sweep_sessions(&work).await;
        if last_resend.elapsed() >= resend_every {
            last_resend = tokio::time::Instant::now();
            let sent = recovery::resend_replies(&link.store, &link.responder).await;
            if sent > 0 {
                tracing::info!(sent, "sending replies owed by instances that stopped");
            }
        }
    }
}
