//! Ingress claims: which instance may take in events from a platform entry point that only
//! one of several instances may use at a time (the Telegram `getUpdates` poller, one Discord
//! shard). Adapters see only this abstraction; the core backs it with leases in the shared
//! database when several instances run, and with "always yours" when one instance runs.
//!
//! Only intake is gated: an adapter sends on every instance whether or not it holds a claim.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// A held claim. `lost` fires the moment the claim can no longer be trusted (a renewal
/// failed or found the lease taken, or the caller's shutdown fired); dropping the hold gives
/// the claim up so another instance can take it without waiting for it to expire.
pub struct IngressHold {
    lost: CancellationToken,
    /// Keeps the backing (a renewal task, a release on drop) alive while held.
    _backing: Option<Box<dyn Send + Sync>>,
}

impl IngressHold {
    /// A hold kept alive by `backing` (dropped when the hold is), lost when `lost` fires.
    pub fn new(lost: CancellationToken, backing: Box<dyn Send + Sync>) -> Self {
        Self {
            lost,
            _backing: Some(backing),
        }
    }

    /// Fires when the claim is lost; the guarded intake must stop at once.
    pub fn lost(&self) -> &CancellationToken {
        &self.lost
    }
}

impl fmt::Debug for IngressHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IngressHold")
            .field("lost", &self.lost.is_cancelled())
            .finish()
    }
}

/// The error of a claim attempt that could not ask (the database did not answer); the
/// caller retries as if another instance held the claim.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ClaimError(pub String);

/// What backs ingress claims shared between instances.
pub trait IngressClaims: Send + Sync + 'static {
    /// Tries once to take `key`. `Ok(None)` while another instance holds it. The hold's
    /// `lost` token is a child of `parent`.
    fn try_claim<'a>(
        &'a self,
        key: &'a str,
        parent: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Option<IngressHold>, ClaimError>>;

    /// How long to wait before asking again for a claim someone else holds.
    fn retry_every(&self) -> Duration;

    /// How many instances run this platform's intake now (this one included while its
    /// adapter runs), for fair shares of sharded ingress; at least 1. Only instances that
    /// take part count: a process that shares the state without running the adapter must
    /// not, or the shares would leave some shards without an owner.
    fn live_instances(&self) -> BoxFuture<'_, usize>;
}

/// The adapter's handle on ingress claims: shared between instances (backed by
/// [`IngressClaims`]) or solo (one instance: every claim is granted at once and never lost).
#[derive(Clone, Default)]
pub struct Ingress {
    shared: Option<Arc<dyn IngressClaims>>,
}

impl fmt::Debug for Ingress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.shared.is_some() {
            "Ingress(shared)"
        } else {
            "Ingress(solo)"
        })
    }
}

/// Why [`Ingress::run_while_holding`] returned.
#[derive(Debug, PartialEq, Eq)]
pub enum Guarded<E> {
    /// The caller's shutdown fired.
    Shutdown,
    /// The guarded work failed on its own (not because the claim was lost).
    Failed(E),
}

impl Ingress {
    /// One instance: nothing to share.
    pub fn solo() -> Self {
        Self::default()
    }

    pub fn shared(claims: Arc<dyn IngressClaims>) -> Self {
        Self {
            shared: Some(claims),
        }
    }

    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// How long to wait before asking again for a refused claim (nothing when solo).
    pub fn retry_every(&self) -> Duration {
        self.shared
            .as_ref()
            .map_or(Duration::ZERO, |c| c.retry_every())
    }

    /// Instances sharing the ingress (1 when solo).
    pub async fn live_instances(&self) -> usize {
        match &self.shared {
            Some(claims) => claims.live_instances().await.max(1),
            None => 1,
        }
    }

    /// Tries once to take `key` (always granted when solo).
    pub async fn try_claim(&self, key: &str, parent: &CancellationToken) -> Option<IngressHold> {
        let Some(claims) = &self.shared else {
            return Some(IngressHold {
                lost: parent.child_token(),
                _backing: None,
            });
        };
        match claims.try_claim(key, parent).await {
            Ok(hold) => hold,
            Err(e) => {
                tracing::warn!(key, error = %e, "could not ask for an ingress claim; asking again later");
                None
            }
        }
    }

    /// Waits until `key` is held (asking every `retry_every`, calling `waiting` after each
    /// refusal), or `None` once `shutdown` fires.
    pub async fn claim(
        &self,
        key: &str,
        shutdown: &CancellationToken,
        mut waiting: impl FnMut(),
    ) -> Option<IngressHold> {
        loop {
            if shutdown.is_cancelled() {
                return None;
            }
            if let Some(hold) = self.try_claim(key, shutdown).await {
                return Some(hold);
            }
            waiting();
            let pause = self.retry_every();
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = shutdown.cancelled() => return None,
            }
        }
    }

    /// Runs `work` only while `key` is held: waits for the claim, runs `work` with a token
    /// that fires when the claim is lost (or `shutdown` fires), and when the claim was lost
    /// goes back to waiting for it. `waiting` is called after each refused claim (an adapter
    /// reports progress there: waiting for the claim is a healthy state).
    pub async fn run_while_holding<E, F, Fut>(
        &self,
        key: &str,
        shutdown: &CancellationToken,
        mut waiting: impl FnMut(),
        mut work: F,
    ) -> Guarded<E>
    where
        F: FnMut(CancellationToken) -> Fut,
        Fut: std::future::Future<Output = Result<(), E>>,
    {
        loop {
            let Some(hold) = self.claim(key, shutdown, &mut waiting).await else {
                return Guarded::Shutdown;
            };
            tracing::info!(key, "holding the ingress claim; taking in events");
            let result = work(hold.lost().clone()).await;
            let lost = hold.lost().is_cancelled();
            drop(hold);
            if shutdown.is_cancelled() {
                return Guarded::Shutdown;
            }
            match result {
                Err(e) => return Guarded::Failed(e),
                Ok(()) if lost => {
                    tracing::warn!(
                        key,
                        "lost the ingress claim; intake stopped until it is held again"
                    );
                }
                // The work ended on its own without an error: claim again and go on.
                Ok(()) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn solo_claims_are_granted_at_once_and_end_with_shutdown() {
        let ingress = Ingress::solo();
        let shutdown = CancellationToken::new();
        let mut runs = 0;
        let stop = shutdown.clone();
        let outcome: Guarded<()> = ingress
            .run_while_holding(
                "k",
                &shutdown,
                || panic!("solo never waits"),
                |lost| {
                    runs += 1;
                    let stop = stop.clone();
                    async move {
                        stop.cancel();
                        lost.cancelled().await;
                        Ok(())
                    }
                },
            )
            .await;
        assert_eq!(outcome, Guarded::Shutdown);
        assert_eq!(runs, 1);
    }
}
