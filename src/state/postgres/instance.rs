//! This instance's own lease (scope `instance`, key = its id). The gateway work an instance
//! claims (delivery obligations, cron runs) is stamped with its id and lease token; other
//! instances treat that work as alive exactly while this lease is current with that token,
//! so pids (meaningless across machines) play no part in ownership on PostgreSQL.
//!
//! The lease is taken when the store opens and renewed every third of its hold time by a
//! task, on a connection of its own (the store's pool may be taken by turns for longer than
//! the lease lasts); closing the store stops the task and releases the lease (its work is
//! then open to the others at once). An instance that dies, or is paused past its hold time,
//! stops renewing, and its work becomes recoverable when the lease expires.
//!
//! A renewal that comes too late (the lease ran out, nobody took the id) keeps the token:
//! the rows stamped with it are still this instance's, so the survivors go on seeing them as
//! alive. Only when another holder took the id meanwhile is a new lease taken, and the work
//! stamped with the old token is then the survivors' to finish.
//!
//! Every renewal the database confirms moves the lease's [`Trust`] forward (to when it was
//! asked plus the hold time): reply sends check it, so a process paused past its lease does
//! not send a reply a survivor may have taken over (`gateway/delivery/fenced.rs`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::postgres::PgPool;
use tokio::task::JoinHandle;

use super::error::PgError;
use super::lease::{self, Lease, LeaseScope};
use crate::coord::Trust;
use crate::state::error::{StoreError, StoreResult};

/// How often a taken instance id is retried at open (a previous run's lease may still be
/// running out).
const ACQUIRE_RETRY: Duration = Duration::from_millis(200);

/// Who owns a row on PostgreSQL: an instance and the token of its lease at claim time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceOwner {
    pub instance: String,
    pub token: i64,
}

/// The held instance lease and the task that renews it.
#[derive(Debug)]
pub struct InstanceLease {
    pool: PgPool,
    /// The connection the renewals use (see [`super::connect_for_renewals`]).
    renewals: PgPool,
    current: Arc<Mutex<Lease>>,
    /// Until when this instance surely still holds its lease, on this host's clock.
    trust: Trust,
    renewal: Mutex<Option<JoinHandle<()>>>,
}

impl InstanceLease {
    /// Takes the lease on `instance` and starts renewing it. Waits while another holder
    /// (a previous run of this instance whose lease has not run out yet) holds it, for at
    /// most the hold time plus a margin: past that, two live instances share the id.
    pub async fn start(
        pool: &PgPool,
        renewals: PgPool,
        instance: &str,
        ttl: Duration,
    ) -> StoreResult<Self> {
        let deadline = Instant::now() + ttl + Duration::from_secs(5);
        let mut waited = false;
        let held = loop {
            let asked_at = tokio::time::Instant::now();
            if let Some(held) =
                lease::acquire(pool, LeaseScope::Instance, instance, instance, ttl).await?
            {
                break (held, asked_at);
            }
            if Instant::now() >= deadline {
                return Err(StoreError::Invalid(format!(
                    "the instance id {instance:?} is held by another running instance \
                     (each instance sharing the database needs its own id)"
                )));
            }
            if !waited {
                tracing::warn!(
                    instance,
                    "this instance id's lease is still held (a previous run that did not stop \
                     cleanly?); waiting for it to expire"
                );
                waited = true;
            }
            tokio::time::sleep(ACQUIRE_RETRY).await;
        };
        let (held, asked_at) = held;
        let trust = Trust::leased(asked_at, ttl);
        let current = Arc::new(Mutex::new(held));
        let renewal = tokio::spawn(renew_forever(
            renewals.clone(),
            Arc::clone(&current),
            trust.clone(),
            ttl,
        ));
        Ok(Self {
            pool: pool.clone(),
            renewals,
            current,
            trust,
            renewal: Mutex::new(Some(renewal)),
        })
    }

    /// The owner stamp for work claimed now.
    pub fn owner(&self) -> InstanceOwner {
        let lease = self.current.lock().unwrap_or_else(|e| e.into_inner());
        InstanceOwner {
            instance: lease.key.clone(),
            token: lease.token,
        }
    }

    /// Until when this instance surely holds its lease: what reply sends are checked against.
    pub fn trust(&self) -> &Trust {
        &self.trust
    }

    /// Stops renewing and gives the lease up, so other instances may take over this
    /// instance's unfinished work at once.
    pub async fn release(&self) {
        self.stop_renewing();
        let held = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Err(error) = lease::release(&self.pool, &held).await {
            tracing::warn!(instance = %held.key, %error,
                "could not release the instance lease; other instances take over when it expires");
        }
        self.renewals.close().await;
    }

    fn stop_renewing(&self) {
        if let Some(task) = self
            .renewal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
    }
}

impl Drop for InstanceLease {
    /// A store dropped without `close` stops renewing but does not release: to the other
    /// instances it looks like a crash, and its lease runs out.
    fn drop(&mut self) {
        self.stop_renewing();
    }
}

async fn renew_forever(pool: PgPool, current: Arc<Mutex<Lease>>, trust: Trust, ttl: Duration) {
    let period = super::renewal_timeout(ttl);
    loop {
        tokio::time::sleep(period).await;
        let held = current.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let asked_at = tokio::time::Instant::now();
        // A renewal stuck on a stalled connection is given up after a period, so the next
        // one starts on a fresh connection instead of waiting for TCP to notice.
        let next = match tokio::time::timeout(period, renew_or_take_again(&pool, &held, ttl)).await
        {
            Ok(Some(next)) => next,
            Ok(None) => continue,
            Err(_) => {
                tracing::error!(instance = %held.key, timeout_ms = period.as_millis(),
                    "renewing this instance's lease did not complete in time; if this lasts \
                     past the lease time, other instances take over its work");
                continue;
            }
        };
        *current.lock().unwrap_or_else(|e| e.into_inner()) = next;
        trust.confirm(asked_at, ttl);
    }
}

/// Renews `held`; when it ran out, renews it late under the same token if nobody took it,
/// else takes a new lease. `None` (logged) when none of that worked this time.
async fn renew_or_take_again(pool: &PgPool, held: &Lease, ttl: Duration) -> Option<Lease> {
    match lease::renew(pool, held, ttl).await {
        Ok(renewed) => return Some(renewed),
        Err(PgError::LeaseLost { .. }) => {}
        Err(error) => {
            tracing::error!(instance = %held.key, %error,
                "renewing this instance's lease FAILED; if this lasts past the lease time, \
                 other instances take over its work");
            return None;
        }
    }
    match lease::renew_late(pool, held, ttl).await {
        Ok(renewed) => {
            tracing::error!(instance = %held.key, token = held.token,
                "this instance's lease EXPIRED before it was renewed (paused or cut off from \
                 PostgreSQL too long); renewed it late under the same token: what other \
                 instances took over meanwhile is theirs, the rest stays this instance's");
            return Some(renewed);
        }
        Err(PgError::LeaseLost { .. }) => {}
        Err(error) => {
            tracing::error!(instance = %held.key, %error,
                "cannot renew this instance's expired lease; retrying");
            return None;
        }
    }
    tracing::error!(instance = %held.key, token = held.token,
        "another holder took this instance's id while its lease was expired (two instances \
         with one id?); the work stamped with the old token is the other instances' now");
    match lease::acquire(pool, LeaseScope::Instance, &held.key, &held.key, ttl).await {
        Ok(Some(fresh)) => Some(fresh),
        Ok(None) => {
            tracing::error!(instance = %held.key,
                "another holder holds this instance's id; retrying");
            None
        }
        Err(error) => {
            tracing::error!(instance = %held.key, %error,
                "cannot take a new instance lease; retrying");
            None
        }
    }
}
