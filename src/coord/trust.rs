//! How long this process may still act under a lease, on its own clock. The database fences
//! writes by token, but a platform send, an edit or a tool's side effect cannot carry a
//! token: the only guard is to act while the lease is surely still ours. A renewal asked at
//! `asked_at` for `ttl` and confirmed by the database holds the lease until at least
//! `asked_at + ttl` on the database's clock (the database counts from when it ran the
//! statement, which is after `asked_at`), so that instant, measured on this host's monotonic
//! clock, is a deadline the lease cannot end before. [`Trust`] keeps it; an action may
//! start only while more than its own duration plus a margin is left, and a call bounded by
//! [`Trust::act_by`] cannot outlive it.
//!
//! A process with a state of its own (SQLite) has no leases: its [`Trust`] is unbounded and
//! every check passes at no cost.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// What is kept back from the local deadline, at most: the scheduling delay between a
/// passed check and the request leaving this host, and the drift between this host's
/// monotonic clock and the database's over one lease time (both far smaller in practice).
pub const TRUST_MARGIN: Duration = Duration::from_secs(1);

/// With a short lease (tests use a few seconds), the margin is at most this share of it, so
/// a freshly renewed lease (two thirds of its time left) still lets actions through.
const TRUST_MARGIN_SHARE_OF_LEASE: u32 = 10;

/// An action was refused: the lease it would run under may end before it is done, or
/// lapsed since the work was claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Fenced {
    #[error(
        "the lease can be trusted for {left_ms} ms more, and this action needs more than {needed_ms} ms"
    )]
    TooLittleLeft { left_ms: u64, needed_ms: u64 },
    /// A renewal landed only after the local deadline had passed: what was claimed before
    /// may have been taken over meanwhile, and must be claimed again first.
    #[error("the lease lapsed (renewed late) since this work was claimed")]
    LapsedSinceClaim,
}

/// The local deadline of one lease (see the module docs). Clones share it: the renewer
/// moves it forward, the actors read it.
#[derive(Debug, Clone)]
pub struct Trust {
    /// `None`: no lease guards this process's actions (one instance owns its state).
    bound: Option<Arc<Bound>>,
}

#[derive(Debug)]
struct Bound {
    until: watch::Sender<Deadline>,
    margin: Duration,
}

#[derive(Debug, Clone, Copy)]
struct Deadline {
    at: Instant,
    /// How many times a renewal landed after the deadline had passed (a lapse).
    lapses: u64,
    /// The lease is known lost ([`Trust::revoke`]): no renewal will come.
    revoked: bool,
}

impl Trust {
    /// The trust of a process no other instance shares its state with: every check passes.
    pub fn unbounded() -> Self {
        Self { bound: None }
    }

    /// The trust in a lease of `ttl` whose acquisition was asked for at `asked_at`.
    pub fn leased(asked_at: Instant, ttl: Duration) -> Self {
        let margin = TRUST_MARGIN.min(ttl / TRUST_MARGIN_SHARE_OF_LEASE);
        Self {
            bound: Some(Arc::new(Bound {
                until: watch::Sender::new(Deadline {
                    at: asked_at + ttl,
                    lapses: 0,
                    revoked: false,
                }),
                margin,
            })),
        }
    }

    /// Whether a lease bounds this trust at all.
    pub fn is_bounded(&self) -> bool {
        self.bound.is_some()
    }

    /// The database confirmed a renewal asked for at `asked_at`: the lease lasts at least
    /// until `asked_at + ttl`. Never moves the deadline back. A confirmation that comes
    /// after the deadline passed counts a lapse (see [`Trust::claimed_now`]).
    pub fn confirm(&self, asked_at: Instant, ttl: Duration) {
        if let Some(bound) = &self.bound {
            let until = asked_at + ttl;
            let now = Instant::now();
            bound.until.send_if_modified(|current| {
                let later = until > current.at;
                if later {
                    if now >= current.at {
                        current.lapses += 1;
                    }
                    current.at = until;
                }
                later
            });
        }
    }

    /// A mark for work claimed under this lease now: [`Trust::may_act_on`] refuses it once
    /// the lease has lapsed since, even if renewed late under the same token (a survivor
    /// may have taken the work over meanwhile).
    pub fn claimed_now(&self) -> Claim {
        Claim(self.bound.as_ref().map(|b| b.until.borrow().lapses))
    }

    /// As [`Trust::may_act`], for work claimed at `claim`.
    pub fn may_act_on(&self, claim: Claim, action: Duration) -> Result<(), Fenced> {
        if let (Some(bound), Some(lapses)) = (&self.bound, claim.0)
            && bound.until.borrow().lapses != lapses
        {
            return Err(Fenced::LapsedSinceClaim);
        }
        self.may_act(action)
    }

    /// The lease is known lost: nothing more may be done under it.
    pub fn revoke(&self) {
        if let Some(bound) = &self.bound {
            let now = Instant::now();
            bound.until.send_modify(|current| {
                current.at = now.checked_sub(bound.margin).unwrap_or(now);
                current.revoked = true;
            });
        }
    }

    /// Passes when more than `action` plus the margin is left before the local deadline.
    pub fn may_act(&self, action: Duration) -> Result<(), Fenced> {
        let Some(bound) = &self.bound else {
            return Ok(());
        };
        let left = bound
            .until
            .borrow()
            .at
            .saturating_duration_since(Instant::now());
        let needed = action + bound.margin;
        if left > needed {
            Ok(())
        } else {
            Err(Fenced::TooLittleLeft {
                left_ms: left.as_millis() as u64,
                needed_ms: needed.as_millis() as u64,
            })
        }
    }

    /// The instant a call made now must end by (the local deadline less the margin);
    /// `None` when unbounded.
    pub fn act_by(&self) -> Option<Instant> {
        let bound = self.bound.as_ref()?;
        let until = bound.until.borrow().at;
        Some(until.checked_sub(bound.margin).unwrap_or(until))
    }

    /// Waits until an action of `action` would pass again (a renewal landed), for at most
    /// `limit`; true when it would, false at the limit or as soon as the lease is known lost.
    pub async fn wait_until_trusted(&self, action: Duration, limit: Duration) -> bool {
        let Some(bound) = &self.bound else {
            return true;
        };
        let mut changes = bound.until.subscribe();
        let wait = async {
            loop {
                if self.may_act(action).is_ok() {
                    return true;
                }
                if bound.until.borrow().revoked {
                    return false;
                }
                if changes.changed().await.is_err() {
                    // Nobody renews any more: only the limit ends this wait.
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(limit, wait).await.unwrap_or(false)
    }
}

/// When work was claimed, in lapses of its lease (see [`Trust::claimed_now`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim(Option<u64>);

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn refuses_once_the_margin_before_the_local_deadline_is_reached() {
        let ttl = Duration::from_secs(15);
        let trust = Trust::leased(Instant::now(), ttl);
        assert!(trust.may_act(Duration::from_secs(5)).is_ok());
        // No renewal lands: 13.5 s later 1.5 s is left, less than 1 s of action + 1 s margin.
        tokio::time::advance(Duration::from_millis(13_500)).await;
        assert!(trust.may_act(Duration::ZERO).is_ok());
        assert!(trust.may_act(Duration::from_secs(1)).is_err());
        tokio::time::advance(Duration::from_millis(600)).await;
        assert!(trust.may_act(Duration::ZERO).is_err(), "within the margin");
        // A renewal asked now and confirmed restores it.
        trust.confirm(Instant::now(), ttl);
        assert!(trust.may_act(Duration::from_secs(5)).is_ok());
        // An older confirmation never moves it back.
        let before = trust.act_by();
        trust.confirm(Instant::now() - Duration::from_secs(10), ttl);
        assert_eq!(trust.act_by(), before);
        trust.revoke();
        assert!(trust.may_act(Duration::ZERO).is_err(), "revoked");
    }

    #[tokio::test(start_paused = true)]
    async fn work_claimed_before_a_lapse_is_refused_after_a_late_renewal() {
        let ttl = Duration::from_secs(3);
        let trust = Trust::leased(Instant::now(), ttl);
        let before = trust.claimed_now();
        // Renewed in time: the claim still holds.
        tokio::time::advance(Duration::from_secs(1)).await;
        trust.confirm(Instant::now(), ttl);
        assert!(trust.may_act_on(before, Duration::ZERO).is_ok());
        // Past the deadline, then renewed late (asked before it passed, or after).
        tokio::time::advance(Duration::from_secs(5)).await;
        trust.confirm(Instant::now() - Duration::from_millis(100), ttl);
        assert!(trust.may_act(Duration::ZERO).is_ok());
        assert_eq!(
            trust.may_act_on(before, Duration::ZERO),
            Err(Fenced::LapsedSinceClaim)
        );
        assert!(
            trust
                .may_act_on(trust.claimed_now(), Duration::ZERO)
                .is_ok()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_margin_is_a_share_of_a_short_lease() {
        let trust = Trust::leased(Instant::now(), Duration::from_secs(2));
        assert_eq!(
            trust.act_by(),
            Some(Instant::now() + Duration::from_millis(1800))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_wakes_when_a_renewal_lands() {
        let ttl = Duration::from_secs(3);
        let trust = Trust::leased(Instant::now() - ttl, ttl);
        assert!(trust.may_act(Duration::ZERO).is_err());
        let renewer = trust.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            renewer.confirm(Instant::now(), ttl);
        });
        assert!(
            trust
                .wait_until_trusted(Duration::ZERO, Duration::from_secs(10))
                .await
        );
        assert!(
            !Trust::leased(Instant::now() - ttl, ttl)
                .wait_until_trusted(Duration::ZERO, Duration::from_secs(10))
                .await
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_gives_up_at_once_when_the_lease_is_revoked() {
        let ttl = Duration::from_secs(3);
        let trust = Trust::leased(Instant::now() - ttl, ttl);
        let revoker = trust.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            revoker.revoke();
        });
        let started = Instant::now();
        assert!(
            !trust
                .wait_until_trusted(Duration::ZERO, Duration::from_secs(60))
                .await
        );
        // The paused clock only moves by the revoker's sleep, never to the limit.
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[test]
    fn unbounded_trust_passes_every_check() {
        let trust = Trust::unbounded();
        assert!(trust.may_act(Duration::from_secs(3600)).is_ok());
        assert_eq!(trust.act_by(), None);
    }
}
