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
pub(super) mod liveness;
pub(super) mod recovery;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::MessageEvent;

use crate::coord::{ListenError, with_fence};
use crate::gateway::cluster::{Cluster, Held};
use crate::gateway::router::Router;
use crate::gateway::router::cluster::journal_pull::untaken;
use crate::gateway::router::slot::{Job, Slot};
use crate::state::{InboundEvent, InboundState};

/// How a journaled event is named in a slot's `seen` set.
pub(in crate::gateway::router) fn seen_key(platform: &str, event_id: &str) -> String {
    format!("{platform}\u{1f}{event_id}")
}

/// A journaled chat event, on PostgreSQL (see the module docs).
pub(in crate::gateway::router) fn offer_clustered(
    router: &Router,
    cluster: &Arc<Cluster>,
    key: String,
    job: Job,
) {
    let slot = router.slots.get_or_create(&key);
    {
        let mut state = slot.lock();
        if state.held {
            state
                .seen
                .insert(seen_key(&job.event.source.platform, &job.event.event_id));
            drop(state);
            crate::gateway::router::busy::dispatch(router, key, job);
            return;
        }
    }
    kick(router, &key);
    let cluster = cluster.clone();
    tokio::spawn(async move { cluster.announce(&key).await });
}

/// Makes sure a worker looks at `key`'s session: it takes the lease if it is free and
/// runs the session's unfinished events; it does nothing if another instance holds it.
/// When this instance holds it, events other instances recorded are taken up at once.
pub(in crate::gateway::router) fn kick(router: &Router, key: &str) {
    if router.cluster.is_none() || router.is_shutting_down() {
        return;
    }
    let slot = router.slots.get_or_create(key);
    let mut state = slot.lock();
    if state.held {
        // Ours, and a turn may be running: news for it cannot wait for the boundary.
        crate::gateway::router::cluster::journal_pull::pull_journaled(router, &slot, &mut state);
        return;
    }
    crate::gateway::router::busy::ensure_worker(router, &slot, &mut state);
}

/// The sweep's look at every session with unfinished events: a free one is kicked;
/// one held here is pulled only when it has a received event not yet taken up (its
/// running turn's own event is no news).
pub(in crate::gateway::router) async fn sweep_sessions(router: &Router) {
    let unfinished = match router.store.unfinished_inbound().await {
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
        .filter(|e| router.responder.link(&e.platform).is_some())
    {
        keys.insert(&event.session_key);
        if event.state == InboundState::Received {
            let slot = router.slots.get_or_create(&event.session_key);
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
        let slot = router.slots.get_or_create(key);
        let held = slot.lock().held;
        if !held || news.contains(key) {
            kick(router, key);
        }
    }
}

/// The worker of a slot on PostgreSQL: hold the lease, run, release; again while work
/// is queued here.
pub(in crate::gateway::router) async fn drain_clustered(
    router: Arc<Router>,
    cluster: Arc<Cluster>,
    slot: Arc<Slot>,
) {
    loop {
        // An HTTP request is answered by the instance its client is connected to, so
        // it waits for the lease; a chat event may be run by whoever holds it.
        let api_waiting = slot.lock().queue.iter().any(|job| job.api.is_some());
        let held = if api_waiting {
            cluster
                .hold_waiting(&slot.key, || router.is_shutting_down())
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
            let jobs = state.discard_queue(&router.metrics.router_queue_depth);
            let stopping = router.is_shutting_down();
            for job in jobs
                .into_iter()
                .filter(|job| job.api.is_some() && !stopping)
            {
                state.enqueue(job, &router.metrics.router_queue_depth);
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
        if let Err(e) = router.routing.reload_key(&router.store, &slot.key).await {
            tracing::warn!(session_key = %slot.key, error = %e, "cannot re-read the session's routing entry");
        }
        tracing::debug!(session_key = %slot.key, token = held.lease().token, "session lease taken");
        run_held(&router, &slot, &held).await;
        let seen = {
            let mut state = slot.lock();
            state.held = false;
            std::mem::take(&mut state.seen)
        };
        let lost = held.is_lost() || slot.lock().lease_lost;
        cluster.release(held).await;
        if !lost {
            announce_leftovers(&router, &cluster, &slot.key, &seen).await;
        }
        let mut state = slot.lock();
        if state.queue.is_empty() {
            state.worker = false;
            return;
        }
    }
}

/// Runs the slot's jobs and the session's unfinished journaled events under `held`, in
/// the order they were received, until none is left or the lease is lost.
pub(in crate::gateway::router) async fn run_held(router: &Router, slot: &Arc<Slot>, held: &Held) {
    loop {
        if held.is_lost() || slot.lock().lease_lost {
            return;
        }
        // A stopping gateway finishes what it has and takes up nothing new.
        if !router.is_shutting_down() {
            order_by_journal(router, slot).await;
        }
        let Some(job) = slot.lock().dequeue(&router.metrics.router_queue_depth) else {
            return;
        };
        if job.api.is_none() {
            slot.lock()
                .seen
                .insert(seen_key(&job.event.source.platform, &job.event.event_id));
        }
        let job =
            crate::gateway::router::turn::pending_media::with_media_fetched(router, job).await;
        let Ok(_permit) = router.turn_limit.clone().acquire_owned().await else {
            return;
        };
        with_fence(
            held.lease().clone(),
            crate::gateway::router::busy::run_job(router, slot, job),
        )
        .await;
    }
}

/// Brings the session's unfinished journaled events into the slot's queue and puts the
/// queue in the journal's order (`received_at`), wherever each event was received: HTTP
/// requests (not journaled) first, then the events oldest first, then anything queued
/// that the journal no longer lists as unfinished.
pub(in crate::gateway::router) async fn order_by_journal(router: &Router, slot: &Arc<Slot>) {
    let unfinished = match router.store.unfinished_inbound().await {
        Ok(events) => events,
        Err(e) => {
            tracing::warn!(session_key = %slot.key, error = %e, "cannot read the session's unfinished events");
            return;
        }
    };
    let mut ours: Vec<InboundEvent> = unfinished
        .into_iter()
        .filter(|e| e.session_key == slot.key)
        .collect();
    ours.sort_by(|a, b| a.received_at.total_cmp(&b.received_at));
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
        fresh.insert(name, journaled_job(router, journaled).await);
    }
    let depth = &router.metrics.router_queue_depth;
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
    for job in chat.into_iter().flatten() {
        state.enqueue(job, depth);
    }
}

/// After a release: when the session has unfinished events this hold did not take up
/// (they arrived after its last look), another instance is told to take them.
pub(in crate::gateway::router) async fn announce_leftovers(
    router: &Router,
    cluster: &Cluster,
    key: &str,
    seen: &HashSet<String>,
) {
    let Ok(unfinished) = router.store.unfinished_inbound().await else {
        return;
    };
    let left = unfinished
        .iter()
        .any(|e| e.session_key == key && !seen.contains(&seen_key(&e.platform, &e.event_id)));
    if left {
        cluster.announce(key).await;
    }
}

/// A journaled event as a job: `None` when this instance cannot run it (no such
/// platform here) or its payload is unreadable (then it is closed, as at a restart).
pub(in crate::gateway::router) async fn journaled_job(
    router: &Router,
    journaled: &InboundEvent,
) -> Option<Job> {
    router.responder.link(&journaled.platform)?;
    let event: MessageEvent = match serde_json::from_value(journaled.payload.clone()) {
        Ok(event) => event,
        Err(e) => {
            tracing::warn!(event_id = %journaled.event_id, error = %e, "unreadable journaled event; closing it");
            let _ = router
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
    // Authorized when it was journaled (perhaps by another instance); its authority is
    // decided again here, and an event the current configuration no longer admits
    // keeps only a guest's.
    let authority = router
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
    router: &Router,
    slot: &Arc<Slot>,
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
    slot.lock()
        .enqueue_front(again, &router.metrics.router_queue_depth);
}

/// The background work of an instance on PostgreSQL: session-work notifications, and
/// the sweep (unfinished events whose session is free; replies owed by dead instances).
pub(in crate::gateway::router) fn start_cluster_tasks(
    router: &Arc<Router>,
    cluster: &Arc<Cluster>,
) {
    let listener = Arc::downgrade(router);
    let listening = cluster.clone();
    tokio::spawn(async move { listen(listener, listening).await });
    let sweeper = Arc::downgrade(router);
    let every = cluster.sweep_interval();
    let resend_every = cluster.lease_ttl();
    tokio::spawn(async move { sweep(sweeper, every, resend_every).await });
}

/// Wakes the sessions other instances announce.
async fn listen(router: std::sync::Weak<Router>, cluster: Arc<Cluster>) {
    let retry = cluster.sweep_interval();
    loop {
        match router.upgrade() {
            Some(router) if !router.is_shutting_down() => {}
            _ => return,
        }
        let mut listener = match cluster.listen().await {
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
            let Some(router) = router.upgrade() else {
                return;
            };
            if router.is_shutting_down() {
                return;
            }
            cluster.woken(&key);
            kick(&router, &key);
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
        sweep_sessions(&router).await;
        if last_resend.elapsed() >= resend_every {
            last_resend = tokio::time::Instant::now();
            let sent = crate::gateway::router::cluster::recovery::resend_replies(&router).await;
            if sent > 0 {
                tracing::info!(sent, "sending replies owed by instances that stopped");
            }
        }
    }
}
