//! The interface a coordination backend implements: the single-instance one in
//! [`super::solo`], the PostgreSQL one inside the state's PostgreSQL backend.

use std::fmt::Debug;
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::CoordKind;
use super::error::{CoordResult, ListenError};
use super::lease::{Lease, LeaseScope};

/// Leases and notifications over one shared state. Futures are boxed so the handle can hold
/// any backend behind one `Arc<dyn Coordination>`.
pub trait Coordination: Send + Sync + Debug {
    fn kind(&self) -> CoordKind;
    fn instance_id(&self) -> &str;
    fn lease_ttl(&self) -> Duration;

    fn acquire<'a>(
        &'a self,
        scope: LeaseScope,
        key: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, CoordResult<Option<Lease>>>;

    fn renew<'a>(&'a self, lease: &'a Lease, ttl: Duration) -> BoxFuture<'a, CoordResult<Lease>>;

    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, CoordResult<bool>>;

    fn count_current<'a>(
        &'a self,
        scope: LeaseScope,
        key_prefix: &'a str,
    ) -> BoxFuture<'a, CoordResult<i64>>;

    fn announce_session_work<'a>(&'a self, session_key: &'a str) -> BoxFuture<'a, CoordResult<()>>;

    fn listen_session_work(&self) -> BoxFuture<'_, CoordResult<Box<dyn WorkListener>>>;
}

/// Session keys announced as having work, in the order they arrive. An announcement is only
/// a hint (one sent while the listener reconnects is lost), so its users also poll.
pub trait WorkListener: Send {
    /// The next announced session key; [`ListenError::Closed`] once the state is closed (the
    /// daemon is stopping), [`ListenError::Interrupted`] when the listener must be reopened.
    fn recv(&mut self) -> BoxFuture<'_, Result<String, ListenError>>;
}
