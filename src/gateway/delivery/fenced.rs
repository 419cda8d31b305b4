//! Platform calls checked against the lease they are made under. A reply's ledger row is
//! owned by this instance's lease; a survivor resends it only once that lease has expired.
//! The platform cannot check a fencing token, so this instance checks its own local deadline
//! ([`Trust`]) before each call and bounds the call by it: a process paused past its lease
//! resumes, finds the trust gone and sends nothing, and a call it starts cannot outlive the
//! lease either (cut off at the deadline, it counts as a send whose outcome is unknown).
//!
//! The trust is task-local: the ledger path sets the instance lease's around one
//! obligation's delivery; elsewhere (a progress line or a notice sent from a turn) the
//! turn's session hold is used, and outside both there is no lease and every call passes.

use std::future::Future;
use std::time::Duration;

use hermes_adapter::{Adapter, Outbound, SendErrorKind, SendResult};
use tokio::time::Instant;

use crate::coord::{Claim, Fenced, Trust, current_trust};

tokio::task_local! {
    static SEND_TRUST: (Trust, Claim);
}

/// A platform call needs no more time than this left beyond the margin to start: it is
/// bounded by the deadline anyway (the adapters' own timeouts are longer than a lease).
const SEND_NEEDS: Duration = Duration::ZERO;

/// Runs `delivery`, whose row was claimed at `claim`, with its platform calls checked
/// against `trust`: refused too once the lease lapsed after the claim (renewed late, the
/// row may be a survivor's now).
pub(super) async fn scope<F: Future>(trust: Trust, claim: Claim, delivery: F) -> F::Output {
    SEND_TRUST.scope((trust, claim), delivery).await
}

/// Before a platform call: refused when the lease may end first; else the instant the call
/// must end by (`None`: no lease bounds it).
pub(super) fn check() -> Result<Option<Instant>, Fenced> {
    let (trust, claim) = SEND_TRUST.try_with(Clone::clone).unwrap_or_else(|_| {
        let trust = current_trust();
        let claim = trust.claimed_now();
        (trust, claim)
    });
    trust.may_act_on(claim, SEND_NEEDS)?;
    Ok(trust.act_by())
}

/// One best-effort platform call made outside a reply's delivery (a streamed preview's edit,
/// a prompt, a preview's removal, the typing indicator), checked and bounded like a reply's;
/// `None` when the lease could end first: nothing was sent (progress is best effort, the
/// reply itself still goes through the ledger).
pub async fn send_checked(adapter: &dyn Adapter, outbound: Outbound) -> Option<SendResult> {
    let act_by = match check() {
        Ok(act_by) => act_by,
        Err(error) => {
            tracing::debug!(platform = adapter.platform(), chat_id = %outbound.chat_id, %error,
                "platform call skipped: the lease it would run under may end first");
            return None;
        }
    };
    let send = adapter.send(outbound);
    let Some(act_by) = act_by else {
        return Some(send.await);
    };
    Some(bounded(act_by, send).await)
}

/// Runs `send` until `act_by`. The deadline is looked at before every poll of the call, not
/// after it as `tokio::time::timeout_at` does: a process stopped mid-call (SIGSTOP, a frozen
/// VM) that resumes past its deadline drops the call without polling it again, so it writes
/// nothing more to the platform after a survivor may have taken the reply over.
pub(super) async fn bounded(act_by: Instant, send: impl Future<Output = SendResult>) -> SendResult {
    tokio::select! {
        biased;
        () = tokio::time::sleep_until(act_by) => cut_off(),
        result = send => result,
    }
}

/// The error of a call cut off at the lease's deadline.
pub(super) const CUT_OFF: &str = "cut off at the lease's local deadline";

/// The result of a call cut off at the lease's deadline: it may or may not have landed.
pub(super) fn cut_off() -> SendResult {
    SendResult {
        message_id: None,
        error: Some((SendErrorKind::Ambiguous, CUT_OFF.to_owned())),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_call_past_its_deadline_is_not_polled_again() {
        let polled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = std::sync::Arc::clone(&polled);
        let act_by = Instant::now() + Duration::from_millis(10);
        // As after a SIGSTOP: the deadline has passed by the time the call is first polled.
        tokio::time::advance(Duration::from_millis(50)).await;
        let call = async move {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            SendResult {
                message_id: Some("1".to_owned()),
                error: None,
                retry_after: None,
            }
        };
        let result = bounded(act_by, call).await;
        assert_eq!(
            polled.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "the call never ran"
        );
        assert!(matches!(result.error, Some((SendErrorKind::Ambiguous, _))));
    }
}
