//! One chat's replies in the order they were recorded, across instances (issue 28). A lane
//! orders the replies of its own process; a reply recorded by another instance (the
//! session's previous holder) may still be owed when this one's reply is ready: its owner
//! stopped or was paused after claiming it, or it waits out a flood-wait there. Before a
//! reply is sent, the replies owed to its chat before it are looked up with it (one read):
//! one whose owner is gone is taken over and sent here first (with the recovered marker when
//! it may have gone out already); one whose owner is alive and sending is waited for, on a
//! bounded clock. On SQLite one process sends all of a chat's replies from one lane, so the
//! list is empty and nothing waits.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::gateway::router::responder::Responder;
use crate::state::{Obligation, ObligationState, OwedBefore, now_epoch};

/// How often an earlier reply in another instance's hands is looked at again.
const LOOK_AGAIN: Duration = Duration::from_millis(250);

/// How long a reply waits for an earlier one a live instance is sending (a flood-wait there
/// can be long): past this it goes out after a warning rather than hold the chat for good.
const WAIT_LIMIT: Duration = Duration::from_secs(60);

/// Whether `earlier` must reach the chat first: owed by a gone owner (this instance sends it
/// now), or being sent by a live one. A live owner's failed reply is not being sent (it is
/// resent when that owner stops), so it does not hold the chat.
fn holds_the_chat(earlier: &OwedBefore) -> bool {
    !(earlier.owner_alive && earlier.obligation.state == ObligationState::Failed)
}

/// Obligation `id` once every reply owed to its chat before it has gone out (or the wait
/// limit passed, or the gateway is stopping); `None` when it is not found or cannot be read.
pub(super) fn after_earlier_replies<'a>(
    responder: &'a Responder,
    id: &'a str,
) -> Pin<Box<dyn Future<Output = Option<Obligation>> + Send + 'a>> {
    Box::pin(async move {
        let deadline = tokio::time::Instant::now() + WAIT_LIMIT;
        loop {
            let found = match responder
                .store
                .obligation_in_chat_order(id, now_epoch())
                .await
            {
                Ok(found) => found,
                Err(e) => {
                    tracing::error!(obligation_id = id, error = %e, "cannot read a reply obligation");
                    return None;
                }
            };
            let Some(earlier) = found.owed_before.iter().find(|e| holds_the_chat(e)) else {
                return found.obligation;
            };
            if found.obligation.is_none() || responder.outbox.stop_waiting.is_cancelled() {
                return found.obligation;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(obligation_id = id, earlier = %earlier.obligation.obligation_id,
                    waited_s = WAIT_LIMIT.as_secs(),
                    "an earlier reply to this chat is still being sent by another instance; sending this one without waiting longer");
                return found.obligation;
            }
            if earlier.owner_alive {
                tracing::debug!(obligation_id = id, earlier = %earlier.obligation.obligation_id,
                    "waiting for an earlier reply another instance is sending");
            } else {
                tracing::info!(obligation_id = id, earlier = %earlier.obligation.obligation_id,
                    "sending first an earlier reply to this chat whose instance stopped");
                let outcome = responder
                    .deliver_recorded(&earlier.obligation.obligation_id, None, None)
                    .await;
                if outcome.is_some() {
                    // Claimed here: it is this instance's now, so the next look skips it.
                    continue;
                }
            }
            tokio::select! {
                () = tokio::time::sleep(LOOK_AGAIN) => {}
                () = responder.outbox.stop_waiting.cancelled() => {}
            }
        }
    })
}
