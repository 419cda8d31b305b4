//! Leases with fencing tokens: the primitive behind "one turn at a time per session key" and
//! "one Telegram poller / one owner per Discord shard" across instances.
//!
//! A lease on `(scope, key)` is held by one holder until `expires_at`, measured by the
//! database's clock (`now()`), so instances' clocks never matter. Each acquisition draws a
//! new token from one sequence, so a later holder always has a higher token. A holder that
//! stopped renewing (paused, partitioned, killed) may still believe it holds the lease; its
//! writes go through [`begin_fenced`], which refuses them once its token is not current.

use std::time::Duration;

use sqlx::postgres::{PgPool, Postgres};
use sqlx::{Row, Transaction};

use super::error::{PgError, PgResult};

pub use crate::coord::{Lease, LeaseScope};

/// The error for a request made under `lease` after it was lost.
pub(super) fn lost(lease: &Lease) -> PgError {
    PgError::LeaseLost {
        scope: lease.scope.as_str(),
        key: lease.key.clone(),
        token: lease.token,
    }
}

fn millis(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1)
}

/// Takes the lease for `holder` if nobody holds it (never held, released, or expired), with a
/// new fencing token. `None` while anyone, `holder` included, holds it: a holder renews.
pub async fn acquire(
    pool: &PgPool,
    scope: LeaseScope,
    key: &str,
    holder: &str,
    ttl: Duration,
) -> PgResult<Option<Lease>> {
    // One statement: concurrent contenders serialise on the row (ON CONFLICT locks it and
    // re-checks the WHERE against the latest version), so exactly one of them wins.
    let row = sqlx::query(
        "INSERT INTO hermesd_leases AS l (scope, key, holder, token, acquired_at, expires_at) \
         VALUES ($1, $2, $3, nextval('hermesd_lease_tokens'), now(), \
                 now() + $4 * interval '1 millisecond') \
         ON CONFLICT (scope, key) DO UPDATE \
             SET holder = EXCLUDED.holder, token = EXCLUDED.token, \
                 acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at \
             WHERE l.expires_at <= now() \
         RETURNING token, \
             (extract(epoch FROM acquired_at) * 1000000)::bigint AS acquired, \
             (extract(epoch FROM expires_at) * 1000000)::bigint AS expires",
    )
    .bind(scope.as_str())
    .bind(key)
    .bind(holder)
    .bind(millis(ttl) as f64)
    .fetch_optional(super::retried(pool))
    .await?;
    Ok(row.map(|row| Lease {
        scope,
        key: key.to_owned(),
        holder: holder.to_owned(),
        token: row.get("token"),
        acquired_at_micros: row.get("acquired"),
        expires_at_micros: row.get("expires"),
        ttl,
    }))
}

/// Extends a lease that is still current to `ttl` from now. An expired lease is lost even if
/// nobody took it yet: its holder must acquire again and gets a new token.
pub async fn renew(pool: &PgPool, lease: &Lease, ttl: Duration) -> PgResult<Lease> {
    extend(pool, lease, ttl, false).await
}

/// Extends a lease that ran out but that nobody has taken since (the row still carries its
/// token), keeping that token. Only for an instance's own lease: its token stamps the work the
/// instance owns, and a lapse nobody acted on must not orphan that work (docs/cluster.md,
/// "Instance ownership"). `LeaseLost` when another holder has taken the key meanwhile.
pub async fn renew_late(pool: &PgPool, lease: &Lease, ttl: Duration) -> PgResult<Lease> {
    extend(pool, lease, ttl, true).await
}

/// Moves the lease's expiry to `ttl` from now where its row still carries its token and, unless
/// `even_expired`, has not run out.
async fn extend(
    pool: &PgPool,
    lease: &Lease,
    ttl: Duration,
    even_expired: bool,
) -> PgResult<Lease> {
    let row = sqlx::query(
        "UPDATE hermesd_leases SET expires_at = now() + $4 * interval '1 millisecond' \
         WHERE scope = $1 AND key = $2 AND token = $3 AND ($5 OR expires_at > now()) \
         RETURNING (extract(epoch FROM expires_at) * 1000000)::bigint AS expires",
    )
    .bind(lease.scope.as_str())
    .bind(&lease.key)
    .bind(lease.token)
    .bind(millis(ttl) as f64)
    .bind(even_expired)
    .fetch_optional(super::retried(pool))
    .await?;
    match row {
        Some(row) => Ok(Lease {
            expires_at_micros: row.get("expires"),
            ttl,
            ..lease.clone()
        }),
        None => Err(lost(lease)),
    }
}

/// Gives the lease up at once (it expires now), if it is still this holder's; the row stays,
/// so the next holder's token is still drawn above this one.
pub async fn release(pool: &PgPool, lease: &Lease) -> PgResult<bool> {
    let done = sqlx::query(
        "UPDATE hermesd_leases SET expires_at = now() \
         WHERE scope = $1 AND key = $2 AND token = $3 AND expires_at > now()",
    )
    .bind(lease.scope.as_str())
    .bind(&lease.key)
    .bind(lease.token)
    .execute(super::retried(pool))
    .await?;
    Ok(done.rows_affected() == 1)
}

/// How many leases of `scope` whose key starts with `key_prefix` are current (by the
/// database's clock): with [`LeaseScope::Instance`] and no prefix, how many stores are open.
pub async fn count_current(pool: &PgPool, scope: LeaseScope, key_prefix: &str) -> PgResult<i64> {
    let row = sqlx::query(
        "SELECT count(*) AS n FROM hermesd_leases \
         WHERE scope = $1 AND left(key, length($2)) = $2 AND expires_at > now()",
    )
    .bind(scope.as_str())
    .bind(key_prefix)
    .fetch_one(super::retried(pool))
    .await?;
    Ok(row.get("n"))
}

/// Opens a transaction for writes guarded by `lease`: it fails with
/// [`PgError::LeaseLost`] unless the lease is current with this token, and holds a share lock
/// on the lease row until commit, so no other holder can take the lease over between the check
/// and the commit. Every write of a turn goes through one of these.
///
/// That lock would let a holder paused inside the transaction (SIGSTOP, a long GC-like stall)
/// block every takeover for as long as it is paused, so the transaction also gets an idle
/// timeout of the lease's hold time: PostgreSQL ends a session left idle in it that long,
/// rolling its writes back and freeing the lease row.
pub async fn begin_fenced(
    pool: &PgPool,
    lease: &Lease,
) -> PgResult<Transaction<'static, Postgres>> {
    let mut tx = pool.begin().await?;
    // One statement (one round trip) for the check, the lock and the timeout. The timeout
    // is set only when the row is returned; without it the transaction is rolled back here.
    let current = sqlx::query(
        "SELECT set_config('idle_in_transaction_session_timeout', $4, true) \
         FROM hermesd_leases \
         WHERE scope = $1 AND key = $2 AND token = $3 AND expires_at > now() FOR SHARE",
    )
    .bind(lease.scope.as_str())
    .bind(&lease.key)
    .bind(lease.token)
    .bind(millis(lease.ttl).to_string())
    .fetch_optional(&mut *tx)
    .await?;
    match current {
        Some(_) => Ok(tx),
        None => {
            let _ = tx.rollback().await;
            Err(lost(lease))
        }
    }
}
