//! Picking up after a crash or restart: replies recorded but not confirmed delivered are
//! sent again (ambiguous ones with Hermes's recovered marker), and turns whose events were
//! journaled but never answered run again — a started turn continues from its stored
//! history instead of repeating the user's message.

use std::sync::Arc;

use crate::gateway::router::cluster::journaled_job;
use crate::gateway::router::gatekeeper::Gatekeeper;
use crate::gateway::router::responder::Responder;
use crate::gateway::router::responder::outbox::Outgoing;
use crate::gateway::router::slot::Job;
use crate::state::{Store, now_epoch};

/// What recovery found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    pub replies_resent: usize,
    pub turns_resumed: usize,
    pub turns_restarted: usize,
}

/// The unfinished turns, oldest first, as jobs for their session keys, with the count of
/// each kind; the router queues them before adapters deliver new events, so each
/// session's recovered work runs first.
pub(in crate::gateway::router) async fn unfinished_turns(
    store: &Store,
    responder: &Responder,
    gate: &Arc<Gatekeeper>,
) -> (Recovered, Vec<(String, Job)>) {
    let mut report = Recovered::default();
    let unfinished = match store.unfinished_inbound().await {
        Ok(events) => events,
        Err(e) => {
            tracing::error!(error = %e, "cannot read unfinished turns");
            return (report, Vec::new());
        }
    };
    let mut jobs = Vec::new();
    for journaled in unfinished {
        let Some(job) = journaled_job(store, responder, gate, &journaled).await else {
            continue;
        };
        if job.resumed {
            report.turns_resumed += 1;
        } else {
            report.turns_restarted += 1;
        }
        jobs.push((journaled.session_key, job));
    }
    (report, jobs)
}

/// Queues every reply still owed on its chat's lane (after adapters can send).
pub(in crate::gateway::router) async fn resend_replies(
    store: &Store,
    responder: &Arc<Responder>,
) -> usize {
    let now = now_epoch();
    if let Err(e) = store.abandon_stale(now).await {
        tracing::warn!(error = %e, "cannot abandon stale replies");
    }
    let owed = match store.undelivered(now).await {
        Ok(owed) => owed,
        Err(e) => {
            tracing::error!(error = %e, "cannot read undelivered replies");
            return 0;
        }
    };
    let mut sent = 0;
    for obligation in owed {
        if responder.link(&obligation.platform).is_none() {
            continue;
        }
        // Each chat's lane sends them oldest first; chats do not wait for each other.
        let reply = Outgoing {
            obligation_id: obligation.obligation_id,
            reply_to: None,
            event_id: None,
        };
        responder.send_later(&obligation.platform, &obligation.chat_id, vec![reply]);
        sent += 1;
    }
    sent
}
