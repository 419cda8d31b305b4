//! The embedded schema (`migrations/*.sql`, applied in order by sqlx's migrator).
//!
//! sqlx's migrator takes `pg_advisory_lock` before it reads or creates its bookkeeping table
//! (`_sqlx_migrations`) and applies each migration in a transaction, so instances starting
//! at once apply each migration once: the others wait for the lock, then find it applied.
//! It leaves the lock held if a migration fails, so it runs on a one-connection pool of its
//! own that is closed afterwards (closing a session releases its advisory locks).

use sqlx::migrate::Migrator;
use sqlx::postgres::PgPoolOptions;

use super::error::{PgError, PgResult};

static MIGRATOR: Migrator = sqlx::migrate!("src/state/postgres/migrations");

/// Brings the database at `url` to the current schema. Idempotent; safe to call from several
/// processes at once.
pub async fn migrate(url: &str) -> PgResult<()> {
    let (options, timeout) = super::connect_options(url)?;
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(timeout)
        .connect_with(options)
        .await
        .map_err(|source| PgError::database(url, source))?;
    let outcome = MIGRATOR.run(&pool).await;
    // Closing ends the session, and with it any advisory lock a failed run left behind.
    pool.close().await;
    outcome.map_err(PgError::from)
}
