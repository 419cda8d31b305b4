//! A session lease this instance holds, kept alive by a renewal task every third of the
//! lease time. When a renewal finds the lease gone (this process stalled past it), or no
//! renewal lands before the lease could have run out (counted on this host's clock from
//! when the last one that landed was asked for: never later than the database's expiry),
//! the hold is marked lost: nothing more is started under it, and the fenced writes of the
//! turn still running fail on their own. Each renewal the database confirms moves the hold's
//! [`Trust`] forward (to when it was asked plus the lease time): the turn's platform actions
//! and tool calls are checked against it (`coord/trust.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::coord::{CoordError, Coordinator, Lease, Trust};

/// A held session lease (see the module docs). Release it with `Cluster::release`; dropping
/// it stops the renewals and lets it expire.
#[derive(Debug)]
pub struct Held {
    lease: Arc<Lease>,
    lost: Arc<AtomicBool>,
    trust: Trust,
    renewer: JoinHandle<()>,
}

impl Held {
    /// Starts renewing `lease`, acquired by a request sent at `asked_at`.
    pub(super) fn start(coord: Coordinator, lease: Lease, asked_at: Instant) -> Self {
        let lease = Arc::new(lease);
        let lost = Arc::new(AtomicBool::new(false));
        let trust = Trust::leased(asked_at, lease.ttl);
        let renewer = tokio::spawn(renew(
            coord,
            lease.clone(),
            trust.clone(),
            asked_at + lease.ttl,
            lost.clone(),
        ));
        Self {
            lease,
            lost,
            trust,
            renewer,
        }
    }

    /// The lease as acquired: its token fences every write made under it.
    pub fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }

    /// How long actions may still be taken under this hold (see [`Trust`]).
    pub fn trust(&self) -> &Trust {
        &self.trust
    }

    /// Whether a renewal found the lease taken or expired.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    pub(super) async fn release(self, coord: &Coordinator) -> Result<bool, CoordError> {
        self.renewer.abort();
        coord.release(&self.lease).await
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

async fn renew(
    coord: Coordinator,
    lease: Arc<Lease>,
    trust: Trust,
    mut trusted_until: Instant,
    lost: Arc<AtomicBool>,
) {
    let every = lease.ttl / 3;
    let mut pause = every;
    loop {
        tokio::time::sleep_until((Instant::now() + pause).min(trusted_until)).await;
        let asked_at = Instant::now();
        match tokio::time::timeout_at(trusted_until, coord.renew(&lease, lease.ttl)).await {
            Ok(Ok(_)) => {
                trusted_until = asked_at + lease.ttl;
                trust.confirm(asked_at, lease.ttl);
                pause = every;
            }
            Ok(Err(CoordError::LeaseLost { .. })) => {
                tracing::warn!(session_key = %lease.key, token = lease.token, "session lease lost; this instance writes nothing more for the session");
                lost.store(true, Ordering::SeqCst);
                trust.revoke();
                return;
            }
            // The database did not answer this time: the lease may still be ours; try again
            // soon, as long as it can still be trusted.
            Ok(Err(e)) => {
                tracing::warn!(session_key = %lease.key, error = %e, "cannot renew a session lease");
                pause = every / 3;
            }
            Err(_) => {
                tracing::warn!(session_key = %lease.key, token = lease.token, "no session lease renewal landed within the lease time; this instance writes nothing more for the session");
                lost.store(true, Ordering::SeqCst);
                trust.revoke();
                return;
            }
        }
    }
}
