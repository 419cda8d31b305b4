//! What the router does differently for webhook deliveries (docs/webhooks.md): a
//! `deliver_only` route's event is answered with its own text, no agent; and each delivery is
//! a one-turn session, closed when its run ends (Hermes's `webhook_complete`), so webhook
//! sessions do not pile up open in state.db. A `/background` task's session is closed the
//! same way (`background_complete`).

use hermes_adapter::WEBHOOK_PLATFORM;

use super::session::Sessions;
use super::slot::Job;
use crate::state::Store;

/// The answer of a `deliver_only` event: its text.
pub(super) fn verbatim_answer(job: &Job) -> Option<String> {
    let verbatim = job.event.reply_target.as_ref().is_some_and(|t| t.verbatim);
    verbatim.then(|| job.event.text.clone())
}

/// Why `job`'s session ends with its turn, if it does: a webhook delivery's, or a
/// `/background` task's (commands/background.rs).
pub(super) fn one_turn_session(job: &Job) -> Option<&'static str> {
    if job.event.source.platform == WEBHOOK_PLATFORM {
        Some("webhook_complete")
    } else if job.event.background.is_some() {
        Some("background_complete")
    } else {
        None
    }
}

/// Ends the session routed under `key` (the delivery's own, or a `/background` task's) with
/// `reason`.
pub(super) async fn close_session(sessions: &Sessions, store: &Store, key: &str, reason: &str) {
    if let Some(id) = sessions.current_session_id(key)
        && let Err(e) = store.end_session(&id, reason).await
    {
        tracing::warn!(session_id = %id, error = %e, reason, "cannot close a one-turn session");
    }
}
