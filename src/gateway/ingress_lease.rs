//! Ingress claims backed by leases of the shared state's coordination: the core's side of
//! [`hermes_adapter::Ingress`]. A claim on a key (`telegram-poll:<bot id>`,
//! `discord-shard:<app id>:<n>`) is an `ingress` lease held by this instance; while held it
//! is renewed every third of the lease time, and the holder's `lost` token fires at once when
//! a renewal fails, finds the lease gone, or does not complete before the lease could have
//! expired. Another instance takes the key over once the lease expires (a killed holder) or is
//! released (a holder that stopped cleanly or lost it).
//!
//! Fair shares of sharded intake (Discord shards) divide by the instances that run the
//! platform's adapter now, not by every store open on the database: a `hermesd chat` or
//! `hermesd sessions` holds an instance lease too, and counting it would leave shards that
//! nobody claims. So an instance is a *member* of a platform's intake while its adapter runs
//! (an `ingress` lease on `member:<platform>:<instance>`, kept renewed like a claim), and
//! [`IngressClaims::live_instances`] counts the current members.
//!
//! When no other instance shares the state there is nothing to contend for, so the adapters
//! get a solo [`Ingress`].

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use hermes_adapter::{ClaimError, Ingress, IngressClaims, IngressHold};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::coord::{Coordinator, Lease, LeaseScope};
use crate::state::Store;

/// Ingress claims of one instance, for one platform's adapter, on one shared database.
#[derive(Debug, Clone)]
pub struct LeaseClaims {
    coord: Coordinator,
    holder: String,
    platform: String,
    ttl: Duration,
}

impl LeaseClaims {
    pub fn new(
        coord: impl Into<Coordinator>,
        holder: impl Into<String>,
        platform: impl Into<String>,
        ttl: Duration,
    ) -> Self {
        Self {
            coord: coord.into(),
            holder: holder.into(),
            platform: platform.into(),
            ttl,
        }
    }

    /// The claims of `store`'s instance for `platform`'s adapter; `None` when no other
    /// instance shares the state.
    pub fn for_store(store: &Store, platform: &str) -> Option<Self> {
        let coord = store.coordinator();
        coord.is_shared().then(|| {
            Self::new(
                coord.clone(),
                coord.instance_id(),
                platform,
                coord.lease_ttl(),
            )
        })
    }

    /// The adapter's ingress for these claims: lease-backed, or solo without them.
    pub fn ingress(claims: Option<&Self>) -> Ingress {
        claims.map_or_else(Ingress::solo, |claims| {
            Ingress::shared(Arc::new(claims.clone()))
        })
    }

    /// `platform`'s ingress for `store` (lease-backed when other instances share the
    /// state, solo otherwise), without membership: see [`Self::stay_member`].
    pub fn ingress_for(store: &Store, platform: &str) -> Ingress {
        Self::ingress(Self::for_store(store, platform).as_ref())
    }

    fn members_prefix(&self) -> String {
        format!("member:{}:", self.platform)
    }

    /// Tries once to be counted among the instances running this platform's intake; the
    /// membership lasts while the hold is kept (renewed like a claim) and ends when it is
    /// dropped.
    pub async fn join(
        &self,
        parent: &CancellationToken,
    ) -> Result<Option<IngressHold>, ClaimError> {
        let key = format!("{}{}", self.members_prefix(), self.holder);
        self.claim(&key, parent).await
    }

    /// Keeps this instance a member (see [`Self::join`]) until the returned guard is
    /// dropped, joining again whenever the membership is lost or could not be taken. Without
    /// it this instance is simply not counted: the others' shares grow, so every shard still
    /// has an owner.
    pub fn stay_member(&self, parent: &CancellationToken) -> DropGuard {
        let stop = parent.child_token();
        let claims = self.clone();
        let until = stop.clone();
        tokio::spawn(async move {
            while !until.is_cancelled() {
                match claims.join(&until).await {
                    Ok(Some(hold)) => hold.lost().cancelled().await,
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(platform = %claims.platform, error = %e, "cannot join the instances running this intake; asking again")
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(claims.renew_every()) => {}
                    _ = until.cancelled() => {}
                }
            }
        });
        stop.drop_guard()
    }

    /// How often a held lease is renewed, and how long a renewal may take.
    fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    async fn claim(
        &self,
        key: &str,
        parent: &CancellationToken,
    ) -> Result<Option<IngressHold>, ClaimError> {
        // The hold is trusted until the lease time, counted from before the request left:
        // never later than the database's own expiry.
        let asked_at = Instant::now();
        let lease = self
            .coord
            .acquire(LeaseScope::Ingress, key, &self.holder, self.ttl)
            .await
            .map_err(|e| ClaimError(e.to_string()))?;
        let Some(lease) = lease else {
            return Ok(None);
        };
        tracing::info!(key, holder = %self.holder, token = lease.token, "ingress lease acquired");
        let lost = parent.child_token();
        let renewal = tokio::spawn(keep_renewed(
            self.clone(),
            lease.clone(),
            asked_at + self.ttl,
            lost.clone(),
        ));
        let backing = Release {
            coord: self.coord.clone(),
            lease,
            renewal,
            lost: lost.clone(),
        };
        Ok(Some(IngressHold::new(lost, Box::new(backing))))
    }
}

/// Renews `lease` every third of its time until `lost` fires; fires `lost` itself when a
/// renewal fails or the local deadline passes first.
async fn keep_renewed(
    claims: LeaseClaims,
    mut lease: Lease,
    mut trusted_until: Instant,
    lost: CancellationToken,
) {
    let every = claims.renew_every();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = lost.cancelled() => return,
        }
        let asked_at = Instant::now();
        let renewal = tokio::select! {
            result = claims.coord.renew(&lease, claims.ttl) => Some(result),
            _ = tokio::time::sleep_until(trusted_until) => None,
            _ = lost.cancelled() => return,
        };
        match renewal {
            Some(Ok(renewed)) => {
                lease = renewed;
                trusted_until = asked_at + claims.ttl;
            }
            Some(Err(e)) => {
                tracing::warn!(key = %lease.key, token = lease.token, error = %e, "ingress lease renewal failed; stopping this intake");
                lost.cancel();
                return;
            }
            None => {
                tracing::warn!(key = %lease.key, token = lease.token, "ingress lease renewal did not complete within the lease time; stopping this intake");
                lost.cancel();
                return;
            }
        }
    }
}

/// Stops the renewal and gives the lease up when the hold is dropped.
struct Release {
    coord: Coordinator,
    lease: Lease,
    renewal: tokio::task::JoinHandle<()>,
    lost: CancellationToken,
}

impl Drop for Release {
    fn drop(&mut self) {
        self.renewal.abort();
        self.lost.cancel();
        let (coord, lease) = (self.coord.clone(), self.lease.clone());
        // Releasing is a courtesy (the lease expires anyway): without a runtime, skip it.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = coord.release(&lease).await {
                    tracing::debug!(key = %lease.key, error = %e, "ingress lease not released; it expires on its own");
                }
            });
        }
    }
}

impl IngressClaims for LeaseClaims {
    fn try_claim<'a>(
        &'a self,
        key: &'a str,
        parent: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Option<IngressHold>, ClaimError>> {
        self.claim(key, parent).boxed()
    }

    fn retry_every(&self) -> Duration {
        self.renew_every()
    }

    /// The members of this platform's intake (instances whose adapter runs now, see the
    /// module docs); 1 when the count cannot be read, which only makes this instance claim
    /// more.
    fn live_instances(&self) -> BoxFuture<'_, usize> {
        async {
            let prefix = self.members_prefix();
            match self.coord.count_current(LeaseScope::Ingress, &prefix).await {
                Ok(n) => usize::try_from(n).unwrap_or(1).max(1),
                Err(e) => {
                    tracing::warn!(error = %e, "could not count the live instances");
                    1
                }
            }
        }
        .boxed()
    }
}
