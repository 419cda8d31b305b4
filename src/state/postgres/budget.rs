//! Whether the server lets every running instance open all the connections it may open.
//!
//! Each instance opens up to [`PER_INSTANCE`] connections: the store's pool (the session-work
//! listener keeps one of them), the renewal pool and the instance lease's own. A server whose
//! `max_connections` is below what the running instances together may open refuses the
//! surplus with "too many clients already"; sqlx counts that refusal as transient and retries
//! it until the acquire timeout, so what an operator would see is a turn failing with "pool
//! timed out" under load, without the cause. Checking once at open, when this instance has
//! counted itself among the live instance leases, names the cause before it happens
//! (the last instance to start sees them all).
//! <https://www.postgresql.org/docs/current/runtime-config-connection.html#GUC-MAX-CONNECTIONS>

use sqlx::Row;
use sqlx::postgres::PgPool;

use super::error::PgResult;
use super::lease::LeaseScope;

/// Connections the store's pool keeps per instance.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;

/// Connections kept per instance for renewing session and ingress leases, apart from the
/// store's pool (the instance lease has one more of its own). A few, so that a renewal held
/// up behind a row lock does not hold up the others.
pub(super) const RENEWAL_CONNECTIONS: u32 = 4;

/// The connections one instance may hold at once: the store's pool, the renewal pool and
/// the instance lease's renewal connection.
pub const PER_INSTANCE: u32 = DEFAULT_MAX_CONNECTIONS + RENEWAL_CONNECTIONS + 1;

/// The server's connection limit against what the live instances may open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionBudget {
    /// Connections this role may open on the server: `max_connections`, less the slots
    /// reserved for superusers when the role is not one.
    pub allowed: i64,
    /// Instances whose lease is current, this one included.
    pub instances: i64,
    /// What those instances may open together.
    pub needed: i64,
}

impl ConnectionBudget {
    /// How many connections the instances may ask for beyond the server's limit.
    pub fn shortfall(&self) -> Option<i64> {
        (self.needed > self.allowed).then(|| self.needed - self.allowed)
    }
}

/// Reads the server's limit and counts the live instances.
pub async fn connection_budget(pool: &PgPool) -> PgResult<ConnectionBudget> {
    let row = sqlx::query(
        "SELECT current_setting('max_connections')::bigint AS max, \
                current_setting('superuser_reserved_connections')::bigint AS reserved, \
                (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser, \
                (SELECT count(*) FROM hermesd_leases \
                  WHERE scope = $1 AND expires_at > now()) AS instances",
    )
    .bind(LeaseScope::Instance.as_str())
    .fetch_one(super::retried(pool))
    .await?;
    let max: i64 = row.get("max");
    let reserved: i64 = row.get("reserved");
    let superuser: Option<bool> = row.get("superuser");
    let instances: i64 = row.get("instances");
    let allowed = if superuser == Some(true) {
        max
    } else {
        max - reserved
    };
    Ok(ConnectionBudget {
        allowed,
        instances,
        needed: instances * i64::from(PER_INSTANCE),
    })
}

/// Logs a warning naming the limit and the fix when the live instances may open more
/// connections than the server allows. A failed check is only logged: it decides nothing.
pub async fn warn_when_short(pool: &PgPool) {
    match connection_budget(pool).await {
        Ok(budget) => {
            if let Some(missing) = budget.shortfall() {
                tracing::warn!(
                    allowed = budget.allowed,
                    instances = budget.instances,
                    per_instance = PER_INSTANCE,
                    needed = budget.needed,
                    "PostgreSQL allows fewer connections than the running instances may open \
                     ({missing} short): under load a turn waiting for a connection the server \
                     refuses fails after the connect timeout; raise max_connections on the \
                     server (or run fewer instances)"
                );
            }
        }
        Err(error) => tracing::debug!(%error, "cannot read the server's connection limit"),
    }
}
