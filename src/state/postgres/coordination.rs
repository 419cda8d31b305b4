//! The coordination interface (`crate::coord`) over the shared PostgreSQL database: leases
//! with fencing tokens in `hermesd_leases`, session-work announcements over `LISTEN/NOTIFY`.
//! Handed out by `Store::coordinator` when the state lives here.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use sqlx::postgres::{PgListener, PgPool};

use super::error::PgError;
use super::{lease, notify};
use crate::coord::{
    CoordError, CoordKind, CoordResult, Coordination, Coordinator, Lease, LeaseScope, ListenError,
    WorkListener,
};

/// Leases and notifications of one instance on the shared database.
#[derive(Debug, Clone)]
pub struct PgCoordination {
    pool: PgPool,
    /// Renewals go here, never queueing behind the store's work for a connection.
    renewals: PgPool,
    instance_id: String,
    lease_ttl: Duration,
}

impl PgCoordination {
    pub fn new(
        pool: PgPool,
        renewals: PgPool,
        instance_id: impl Into<String>,
        lease_ttl: Duration,
    ) -> Self {
        Self {
            pool,
            renewals,
            instance_id: instance_id.into(),
            lease_ttl,
        }
    }
}

/// A coordinator over a bare pool (tools and tests that name holders and hold times
/// themselves): no instance name of its own, the default hold time, renewals on that pool.
impl From<PgPool> for Coordinator {
    fn from(pool: PgPool) -> Self {
        Coordinator::new(Arc::new(PgCoordination::new(
            pool.clone(),
            pool,
            String::new(),
            super::DEFAULT_LEASE_TTL,
        )))
    }
}

impl From<PgError> for CoordError {
    fn from(error: PgError) -> Self {
        match error {
            PgError::LeaseLost { scope, key, token } => CoordError::LeaseLost { scope, key, token },
            other => CoordError::Backend(Box::new(other)),
        }
    }
}

impl Coordination for PgCoordination {
    fn kind(&self) -> CoordKind {
        CoordKind::Shared
    }

    fn instance_id(&self) -> &str {
        &self.instance_id
    }

    fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    fn acquire<'a>(
        &'a self,
        scope: LeaseScope,
        key: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, CoordResult<Option<Lease>>> {
        async move { Ok(lease::acquire(&self.pool, scope, key, holder, ttl).await?) }.boxed()
    }

    fn renew<'a>(&'a self, held: &'a Lease, ttl: Duration) -> BoxFuture<'a, CoordResult<Lease>> {
        async move { Ok(lease::renew(&self.renewals, held, ttl).await?) }.boxed()
    }

    fn release<'a>(&'a self, held: &'a Lease) -> BoxFuture<'a, CoordResult<bool>> {
        async move { Ok(lease::release(&self.pool, held).await?) }.boxed()
    }

    fn count_current<'a>(
        &'a self,
        scope: LeaseScope,
        key_prefix: &'a str,
    ) -> BoxFuture<'a, CoordResult<i64>> {
        async move { Ok(lease::count_current(&self.pool, scope, key_prefix).await?) }.boxed()
    }

    fn announce_session_work<'a>(&'a self, session_key: &'a str) -> BoxFuture<'a, CoordResult<()>> {
        async move { Ok(notify::notify_session_work(&self.pool, session_key).await?) }.boxed()
    }

    fn listen_session_work(&self) -> BoxFuture<'_, CoordResult<Box<dyn WorkListener>>> {
        async move {
            let listener = notify::session_work_listener(&self.pool).await?;
            let listener: Box<dyn WorkListener> = Box::new(PgWorkListener {
                listener,
                pool: self.pool.clone(),
            });
            Ok(listener)
        }
        .boxed()
    }
}

/// A `LISTEN` connection, and the pool whose closing means the daemon is stopping.
struct PgWorkListener {
    listener: PgListener,
    pool: PgPool,
}

impl WorkListener for PgWorkListener {
    fn recv(&mut self) -> BoxFuture<'_, Result<String, ListenError>> {
        async move {
            match self.listener.recv().await {
                Ok(notification) => Ok(notification.payload().to_owned()),
                // The store closed its pool: the gateway is stopping, nothing was lost.
                Err(_) if self.pool.is_closed() => Err(ListenError::Closed),
                Err(e) => Err(ListenError::Interrupted(Box::new(e))),
            }
        }
        .boxed()
    }
}
