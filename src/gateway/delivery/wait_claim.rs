//! A reply's ledger row while its first send waits out a rate limit. The row is claimed
//! (`attempting`) just before the send, and a crash while it is `attempting` makes the next
//! start resend it with the recovered marker, since the send may have reached the user. A
//! 429 says it did not: while nothing of the reply has gone out, the row goes back to
//! `pending` for the wait (so a `kill -9` then leaves a plain owed reply, resent as new) and
//! is claimed again just before the retry, and the retry is sent only if that claim is won
//! (several instances may share the row). Once a chunk is out, the row stays `attempting`.
//!
//! The claim is task-local: it is set around one obligation's delivery
//! (`Deliverer::deliver_obligation_quoting`) and read where the retry loop waits, so the
//! delivery path in between keeps its signatures.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::state::Store;

tokio::task_local! {
    static CLAIM: WaitClaim;
}

/// The obligation being delivered by this task.
#[derive(Debug)]
pub(super) struct WaitClaim {
    store: Store,
    obligation_id: String,
    /// Some send of this reply was confirmed: from then on a wait keeps the row claimed.
    anything_out: AtomicBool,
}

impl WaitClaim {
    pub(super) fn new(store: Store, obligation_id: &str) -> Self {
        Self {
            store,
            obligation_id: obligation_id.to_owned(),
            anything_out: AtomicBool::new(false),
        }
    }

    /// Runs `delivery` with this claim visible to its rate-limit waits.
    pub(super) async fn scope<F: Future>(self, delivery: F) -> F::Output {
        CLAIM.scope(self, delivery).await
    }
}

/// A send of the current reply was confirmed.
pub(super) fn sent() {
    let _ = CLAIM.try_with(|claim| claim.anything_out.store(true, Ordering::Relaxed));
}

/// The store and row of the current reply while nothing of it is out.
fn unsent() -> Option<(Store, String)> {
    CLAIM
        .try_with(|claim| {
            (!claim.anything_out.load(Ordering::Relaxed))
                .then(|| (claim.store.clone(), claim.obligation_id.clone()))
        })
        .ok()
        .flatten()
}

/// Before a rate-limit wait: the row back to `pending` if nothing of the reply is out.
/// Returns whether it was released (then [`reclaim`] must follow the wait).
pub(super) async fn release() -> bool {
    let Some((store, id)) = unsent() else {
        return false;
    };
    match store
        .mark_deferred(&id, "waiting out a rate limit; nothing sent yet")
        .await
    {
        Ok(_) => true,
        Err(e) => {
            // The row stays `attempting`: after a crash it is resent with the marker.
            tracing::warn!(obligation_id = %id, error = %e, "cannot release a reply's claim for its wait");
            false
        }
    }
}

/// After the wait: the row `attempting` again, just before the retry. False when this task
/// did not take the row back: then it must not send. While the row was `pending`, another
/// instance may have claimed it (this one's lease ran out during the wait) and be sending it,
/// or have delivered or abandoned it; and a claim that could not be written is no claim (the
/// row stays owed, `pending`, and goes out as new once its owner is gone).
pub(super) async fn reclaim() -> bool {
    let Some((store, id)) = unsent() else {
        return true;
    };
    match store.mark_attempting(&id).await {
        Ok(true) => true,
        Ok(false) => {
            tracing::warn!(obligation_id = %id,
                "a reply was taken over, delivered or abandoned elsewhere during its wait; not sending it here");
            false
        }
        Err(e) => {
            tracing::warn!(obligation_id = %id, error = %e,
                "cannot claim a reply again after its wait; leaving it owed instead of sending unclaimed");
            false
        }
    }
}
