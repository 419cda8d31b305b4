//! Coordination between the hermesd instances that share one state: leases (a session's
//! turns, an ingress, an instance itself), session-work notifications, and the files that
//! several machines must see alike (pairing, memory). Backend-neutral: the single-instance
//! implementation lives here ([`solo`]); the PostgreSQL one lives with that backend in
//! `state` and is handed out by `Store::coordinator`. Gateway, tools and the CLI use only
//! the types of this module, never a backend's.

mod backend;
mod error;
mod fence;
mod lease;
mod shared_files;
pub mod solo;
mod trust;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use backend::{Coordination, WorkListener};
pub use error::{BackendFailure, CoordError, CoordResult, ListenError};
pub use fence::{current_fence, current_trust, inherit_fence, with_fence};
pub use lease::{Lease, LeaseScope};
pub use shared_files::{SharedFileStore, SharedFiles, SharedLock, shared_name};
pub use trust::{Claim, Fenced, TRUST_MARGIN, Trust};

/// Whether other instances share this state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordKind {
    /// One process owns the state (state.db): every lease is this instance's to take, and
    /// no other instance hears an announcement.
    Solo,
    /// Several instances share the state: leases and notifications go through it.
    Shared,
}

/// A cheap, cloneable handle to the coordination of one state.
#[derive(Clone)]
pub struct Coordinator {
    backend: Arc<dyn Coordination>,
}

impl fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Coordinator")
            .field("kind", &self.kind())
            .field("instance_id", &self.instance_id())
            .finish()
    }
}

impl Coordinator {
    pub fn new(backend: Arc<dyn Coordination>) -> Self {
        Self { backend }
    }

    /// The coordination of a process that owns its state alone.
    pub fn solo(instance_id: impl Into<String>, lease_ttl: Duration) -> Self {
        Self::new(Arc::new(solo::SoloCoordination::new(
            instance_id,
            lease_ttl,
        )))
    }

    pub fn kind(&self) -> CoordKind {
        self.backend.kind()
    }

    /// True when other instances share this state (so leases and announcements matter).
    pub fn is_shared(&self) -> bool {
        self.kind() == CoordKind::Shared
    }

    /// This instance's name among those sharing the state: the holder of its leases.
    pub fn instance_id(&self) -> &str {
        self.backend.instance_id()
    }

    /// How long a lease outlives its holder's last renewal.
    pub fn lease_ttl(&self) -> Duration {
        self.backend.lease_ttl()
    }

    /// Takes the lease on `(scope, key)` for `holder` if nobody holds it, with a new fencing
    /// token; `None` while anyone (`holder` too) holds it.
    pub async fn acquire(
        &self,
        scope: LeaseScope,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> CoordResult<Option<Lease>> {
        self.backend.acquire(scope, key, holder, ttl).await
    }

    /// Extends a lease that is still current to `ttl` from now; a lease that expired or was
    /// taken fails with [`CoordError::LeaseLost`].
    pub async fn renew(&self, lease: &Lease, ttl: Duration) -> CoordResult<Lease> {
        self.backend.renew(lease, ttl).await
    }

    /// Gives a lease up at once; true when it was still this holder's.
    pub async fn release(&self, lease: &Lease) -> CoordResult<bool> {
        self.backend.release(lease).await
    }

    /// How many leases of `scope` whose key starts with `key_prefix` are current (with
    /// [`LeaseScope::Instance`] and no prefix, how many stores are open on the state).
    pub async fn count_current(&self, scope: LeaseScope, key_prefix: &str) -> CoordResult<i64> {
        self.backend.count_current(scope, key_prefix).await
    }

    /// Tells every instance (this one too) that `session_key` has work.
    pub async fn announce_session_work(&self, session_key: &str) -> CoordResult<()> {
        self.backend.announce_session_work(session_key).await
    }

    /// A listener for the session keys announced from now on.
    pub async fn listen_session_work(&self) -> CoordResult<Box<dyn WorkListener>> {
        self.backend.listen_session_work().await
    }
}
