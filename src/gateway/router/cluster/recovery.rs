//! Picking up after a crash or restart: replies recorded but not confirmed delivered are
//! sent again (ambiguous ones with Hermes's recovered marker), and turns whose events were
//! journaled but never answered run again — a started turn continues from its stored
//! history instead of repeating the user's message.

use crate::gateway::router::Router;
use crate::gateway::router::responder::outbox::Outgoing;
use crate::state::now_epoch;

/// What recovery found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    pub replies_resent: usize,
    pub turns_resumed: usize,
    pub turns_restarted: usize,
}

/// Queues the unfinished turns; call before adapters deliver new events so each
/// session's recovered work runs first.
pub(in crate::gateway::router) async fn recover_turns(router: &Router) -> Recovered {
    let mut report = Recovered::default();
    let unfinished = match router.store.unfinished_inbound().await {
        Ok(events) => events,
        Err(e) => {
            tracing::error!(error = %e, "cannot read unfinished turns");
            return report;
        }
    };
    for journaled in unfinished {
        let Some(job) = crate::gateway::router::cluster::journaled_job(router, &journaled).await
        else {
            continue;
        };
        if job.resumed {
            report.turns_resumed += 1;
        } else {
            report.turns_restarted += 1;
        }
        match &router.cluster {
            // The instance that takes the session's lease runs its unfinished events
            // (perhaps another one; those still held run where they are).
            Some(_) => crate::gateway::router::cluster::kick(router, &journaled.session_key),
            None => {
                crate::gateway::router::busy::dispatch(router, journaled.session_key.clone(), job)
            }
        }
    }
    report
}

/// Queues every reply still owed on its chat's lane (after adapters can send).
pub(in crate::gateway::router) async fn resend_replies(router: &Router) -> usize {
    let now = now_epoch();
    if let Err(e) = router.store.abandon_stale(now).await {
        tracing::warn!(error = %e, "cannot abandon stale replies");
    }
    let owed = match router.store.undelivered(now).await {
        Ok(owed) => owed,
        Err(e) => {
            tracing::error!(error = %e, "cannot read undelivered replies");
            return 0;
        }
    };
    let mut sent = 0;
    for obligation in owed {
        if router.responder.link(&obligation.platform).is_none() {
            continue;
        }
        // Each chat's lane sends them oldest first; chats do not wait for each other.
        let reply = Outgoing {
            obligation_id: obligation.obligation_id,
            reply_to: None,
            event_id: None,
        };
        router
            .responder
            .send_later(&obligation.platform, &obligation.chat_id, vec![reply]);
        sent += 1;
    }
    sent
}
