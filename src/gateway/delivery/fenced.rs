//! Platform calls checked against the lease they are made under. A reply's ledger row is
//! owned by this instance's lease; a survivor resends it only once that lease has expired.
//! The platform cannot check a fencing token, so this instance checks its own local deadline
//! ([`Trust`]) before each call and bounds the call by it: a process paused past its lease
//! resumes, finds the trust gone and sends nothing, and a call it starts cannot outlive the
//! lease either (cut off at the deadline, it counts as a send whose outcome is unknown).
//!
//! The bound follows the lease, not the deadline it had when the call started: a call that
//! takes longer than one lease time (a platform making us queue behind its rate limit, a
//! slow upload) goes on while renewals keep landing in time, since then no survivor can
//! have taken the row. It is cut off only when the deadline passes with no renewal, or a
//! renewal came late (the lease lapsed since the row was claimed).
//!
//! The trust is task-local: the ledger path sets the instance lease's around one
//! obligation's delivery; elsewhere (a progress line or a notice sent from a turn) the
//! turn's session hold is used, and outside both there is no lease and every call passes.

use std::future::Future;
use std::time::Duration;

use hermes_adapter::{Adapter, Outbound, SendErrorKind, SendResult};

use crate::coord::{Claim, Fenced, Trust, current_trust};

tokio::task_local! {
    static SEND_TRUST: (Trust, Claim);
}

/// A platform call needs no more time than this left beyond the margin to start: it is
/// bounded by the lease anyway.
const SEND_NEEDS: Duration = Duration::ZERO;

/// Runs `delivery`, whose row was claimed at `claim`, with its platform calls checked
/// against `trust`: refused too once the lease lapsed after the claim (renewed late, the
/// row may be a survivor's now).
pub(super) async fn scope<F: Future>(trust: Trust, claim: Claim, delivery: F) -> F::Output {
    SEND_TRUST.scope((trust, claim), delivery).await
}

/// The lease a platform call runs under, and when the work it does was claimed.
#[derive(Debug, Clone)]
pub(super) struct Bound {
    trust: Trust,
    claim: Claim,
}

/// Before a platform call: refused when the lease may end first; else what bounds the call
/// (`None`: no lease bounds it).
pub(super) fn check() -> Result<Option<Bound>, Fenced> {
    let (trust, claim) = SEND_TRUST.try_with(Clone::clone).unwrap_or_else(|_| {
        let trust = current_trust();
        let claim = trust.claimed_now();
        (trust, claim)
    });
    trust.may_act_on(claim, SEND_NEEDS)?;
    Ok(trust.is_bounded().then_some(Bound { trust, claim }))
}

/// One best-effort platform call made outside a reply's delivery (a streamed preview's edit,
/// a prompt, a preview's removal, the typing indicator), checked and bounded like a reply's;
/// `None` when the lease could end first: nothing was sent (progress is best effort, the
/// reply itself still goes through the ledger).
pub async fn send_checked(adapter: &dyn Adapter, outbound: Outbound) -> Option<SendResult> {
    let bound = match check() {
        Ok(bound) => bound,
        Err(error) => {
            tracing::debug!(platform = adapter.platform(), chat_id = %outbound.chat_id, %error,
                "platform call skipped: the lease it would run under may end first");
            return None;
        }
    };
    let send = adapter.send(outbound);
    let Some(bound) = bound else {
        return Some(send.await);
    };
    Some(bounded(&bound, send).await)
}

/// Runs `send` while `bound`'s lease stays ours. The deadline is looked at before every poll
/// of the call, not after it as `tokio::time::timeout_at` does: a process stopped mid-call
/// (SIGSTOP, a frozen VM) that resumes past its deadline drops the call without polling it
/// again, so it writes nothing more to the platform after a survivor may have taken the
/// reply over. When the deadline comes and a renewal has moved it on in time, the call
/// goes on to the new one.
pub(super) async fn bounded(bound: &Bound, send: impl Future<Output = SendResult>) -> SendResult {
    let mut send = std::pin::pin!(send);
    loop {
        if bound.trust.may_act_on(bound.claim, SEND_NEEDS).is_err() {
            return cut_off();
        }
        let Some(act_by) = bound.trust.act_by() else {
            return send.await;
        };
        tokio::select! {
            biased;
            () = tokio::time::sleep_until(act_by) => {}
            result = &mut send => return result,
        }
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
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::time::Instant;

    use super::*;

    fn sent() -> SendResult {
        SendResult {
            message_id: Some("1".to_owned()),
            error: None,
            retry_after: None,
        }
    }

    fn bound(trust: &Trust) -> Bound {
        Bound {
            trust: trust.clone(),
            claim: trust.claimed_now(),
        }
    }

    /// Confirms a renewal of `trust` every `every`, `times` times, as the lease keeper does.
    fn renew(trust: &Trust, ttl: Duration, every: Duration, times: usize) {
        let trust = trust.clone();
        tokio::spawn(async move {
            for _ in 0..times {
                tokio::time::sleep(every).await;
                trust.confirm(Instant::now(), ttl);
            }
        });
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_past_its_deadline_is_not_polled_again() {
        let polled = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&polled);
        let trust = Trust::leased(Instant::now(), Duration::from_millis(100));
        let bound = bound(&trust);
        // As after a SIGSTOP: the deadline has passed by the time the call is first polled.
        tokio::time::advance(Duration::from_millis(150)).await;
        let call = async move {
            counter.fetch_add(1, Ordering::SeqCst);
            sent()
        };
        let result = bounded(&bound, call).await;
        assert_eq!(polled.load(Ordering::SeqCst), 0, "the call never ran");
        assert!(matches!(result.error, Some((SendErrorKind::Ambiguous, _))));
    }

    /// A platform that makes us queue behind its rate limit for longer than a lease time:
    /// the lease is renewed all along, so the call is the instance's to finish (cutting it
    /// off made a healthy instance leave the reply "ambiguous" and unsent).
    #[tokio::test(start_paused = true)]
    async fn a_call_longer_than_the_lease_goes_on_while_renewals_land() {
        let ttl = Duration::from_secs(2);
        let trust = Trust::leased(Instant::now(), ttl);
        renew(&trust, ttl, ttl / 3, 30);
        let call = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            sent()
        };
        let result = bounded(&bound(&trust), call).await;
        assert_eq!(result.error, None, "{result:?}");
        assert_eq!(result.message_id.as_deref(), Some("1"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_is_cut_off_at_the_deadline_of_the_last_renewal() {
        let ttl = Duration::from_secs(2);
        let started = Instant::now();
        let trust = Trust::leased(started, ttl);
        // Two renewals, then the lease keeper stops (the database is unreachable).
        renew(&trust, ttl, Duration::from_millis(500), 2);
        let call = async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            sent()
        };
        let result = bounded(&bound(&trust), call).await;
        let last_renewal = started + Duration::from_secs(1);
        assert_eq!(
            result.error,
            Some((SendErrorKind::Ambiguous, CUT_OFF.to_owned()))
        );
        assert!(
            Instant::now() <= last_renewal + ttl,
            "cut off within the last renewal's lease, {:?} after it",
            Instant::now() - last_renewal
        );
        assert!(
            Instant::now() > started + ttl,
            "the renewals carried the call past the deadline it started with"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_that_came_late_cuts_the_call_off() {
        let ttl = Duration::from_secs(2);
        let trust = Trust::leased(Instant::now(), ttl);
        let bound = bound(&trust);
        // The lease keeper was stalled past the deadline, then renewed under the same
        // token: a survivor may have taken the row meanwhile.
        tokio::time::advance(Duration::from_secs(3)).await;
        trust.confirm(Instant::now(), ttl);
        let result = bounded(&bound, async { sent() }).await;
        assert_eq!(
            result.error,
            Some((SendErrorKind::Ambiguous, CUT_OFF.to_owned()))
        );
    }
}
