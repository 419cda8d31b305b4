//! A session lease this instance holds, kept alive by a renewal task every third of the
//! lease time. When a renewal finds the lease gone (this process stalled past it, or the
//! database was unreachable that long) the hold is marked lost: nothing more is started
//! under it, and the fenced writes of the turn still running fail on their own.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::task::JoinHandle;

use crate::coord::{CoordError, Coordinator, Lease};

/// A held session lease (see the module docs). Release it with `Cluster::release`; dropping
/// it stops the renewals and lets it expire.
#[derive(Debug)]
pub struct Held {
    lease: Arc<Lease>,
    lost: Arc<AtomicBool>,
    renewer: JoinHandle<()>,
}

impl Held {
    pub(super) fn start(coord: Coordinator, lease: Lease) -> Self {
        let lease = Arc::new(lease);
        let lost = Arc::new(AtomicBool::new(false));
        let renewer = tokio::spawn(renew(coord, lease.clone(), lost.clone()));
        Self {
            lease,
            lost,
            renewer,
        }
    }

    /// The lease as acquired: its token fences every write made under it.
    pub fn lease(&self) -> &Arc<Lease> {
        &self.lease
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

async fn renew(coord: Coordinator, lease: Arc<Lease>, lost: Arc<AtomicBool>) {
    let every = lease.ttl / 3;
    loop {
        tokio::time::sleep(every).await;
        match coord.renew(&lease, lease.ttl).await {
            Ok(_) => {}
            Err(CoordError::LeaseLost { .. }) => {
                tracing::warn!(session_key = %lease.key, token = lease.token, "session lease lost; this instance writes nothing more for the session");
                lost.store(true, Ordering::SeqCst);
                return;
            }
            // The database is unreachable for now: the lease may still be ours; the next
            // renewal (or the fenced writes) will tell.
            Err(e) => {
                tracing::warn!(session_key = %lease.key, error = %e, "cannot renew a session lease")
            }
        }
    }
}
