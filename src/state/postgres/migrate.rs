//! The embedded schema (`migrations/*.sql`, applied in order by sqlx's migrator), and how
//! releases of different ages share one database during a rolling upgrade.
//!
//! sqlx's migrator takes `pg_advisory_lock` before it reads or creates its bookkeeping table
//! (`_sqlx_migrations`) and applies each migration in a transaction, so instances starting
//! at once apply each migration once: the others wait for the lock, then find it applied.
//! It leaves the lock held if a migration fails, so it runs on a one-connection pool of its
//! own that is closed afterwards (closing a session releases its advisory locks).
//!
//! **Expand, then contract.** A migration only adds (tables, nullable or defaulted columns,
//! indexes), so the release before it keeps working on the migrated database: an older
//! release ignores the migrations it does not know instead of refusing them. A change an
//! older release cannot live with (a drop, a rename, a new constraint its writes would
//! break) is made a release after the expansion it replaces, and the same migration raises
//! the compatibility floor — `state_meta.hermesd_schema_floor`, the lowest migration a release
//! must know to use the database. A release below the floor refuses to start with a message
//! naming both versions, never a failure per query.

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgPool, PgPoolOptions};

use super::error::{PgError, PgResult};

/// The embedded migrations; ones a newer release applied are ignored, not refused.
static MIGRATOR: Migrator = Migrator {
    ignore_missing: true,
    ..sqlx::migrate!("src/state/postgres/migrations")
};

/// The `state_meta` key holding the compatibility floor (absent: every release may run).
pub const SCHEMA_FLOOR_KEY: &str = "hermesd_schema_floor";

/// The newest migration this release carries.
pub fn known_version() -> i64 {
    MIGRATOR
        .migrations
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or(0)
}

/// Brings the database at `url` to the current schema, then checks this release may use it.
/// Idempotent; safe to call from several processes at once.
pub async fn migrate(url: &str) -> PgResult<()> {
    let (options, timeout) = super::connect_options(url)?;
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(timeout)
        .connect_with(options)
        .await
        .map_err(|source| PgError::database(url, source))?;
    let outcome = match MIGRATOR.run(&pool).await {
        Ok(()) => check_compatible(&pool, known_version()).await,
        Err(e) => Err(PgError::from(e)),
    };
    // Closing ends the session, and with it any advisory lock a failed run left behind.
    pool.close().await;
    outcome
}

/// Refuses a database whose floor is above `known`; notes one a newer release expanded.
async fn check_compatible(pool: &PgPool, known: i64) -> PgResult<()> {
    let applied: i64 =
        sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success")
            .fetch_one(pool)
            .await?;
    let floor: Option<String> = sqlx::query_scalar("SELECT value FROM state_meta WHERE key = $1")
        .bind(SCHEMA_FLOOR_KEY)
        .fetch_optional(pool)
        .await?
        .flatten();
    let floor = floor
        .and_then(|f| f.trim().parse::<i64>().ok())
        .unwrap_or(0);
    if floor > known {
        return Err(PgError::SchemaTooNew {
            known,
            applied,
            floor,
        });
    }
    if applied > known {
        tracing::info!(
            known,
            applied,
            "the PostgreSQL schema has migrations from a newer hermesd; they only add, so this \
             release runs on it"
        );
    }
    Ok(())
}

/// Migrations up to here predate the expand/contract rule (0006 dropped two tables no release
/// ever used).
#[cfg(test)]
const LAST_BEFORE_THE_RULE: i64 = 6;

/// The contracting statement in `sql` (one an older release cannot live with) when the
/// migration does not also raise the floor.
#[cfg(test)]
fn contracts_without_floor(sql: &str) -> Option<&'static str> {
    const CONTRACTING: [&str; 5] = [
        "DROP ",
        "RENAME ",
        " TYPE ",
        "SET NOT NULL",
        "ADD CONSTRAINT",
    ];
    let upper = sql.to_ascii_uppercase();
    CONTRACTING
        .into_iter()
        .find(|word| upper.contains(word))
        .filter(|_| !sql.contains(SCHEMA_FLOOR_KEY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_migration_after_the_rule_only_expands_or_raises_the_floor() {
        for migration in MIGRATOR.migrations.iter() {
            if migration.version <= LAST_BEFORE_THE_RULE {
                continue;
            }
            if let Some(word) = contracts_without_floor(migration.sql.as_str()) {
                panic!(
                    "migration {} ({}) has {word:?}: a release before it cannot use the \
                     database, so it must raise {SCHEMA_FLOOR_KEY} (see this module's doc)",
                    migration.version, migration.description
                );
            }
        }
        assert!(
            MIGRATOR.ignore_missing,
            "a newer release's migrations are ignored"
        );
    }

    #[test]
    fn the_rule_tells_expansion_from_contraction() {
        let expand = "ALTER TABLE sessions ADD COLUMN note TEXT; CREATE INDEX i ON t (c);";
        assert_eq!(contracts_without_floor(expand), None);
        let drop = "ALTER TABLE sessions DROP COLUMN note;";
        assert_eq!(contracts_without_floor(drop), Some("DROP "));
        let narrowed = "ALTER TABLE t ALTER COLUMN c SET NOT NULL;";
        assert_eq!(contracts_without_floor(narrowed), Some("SET NOT NULL"));
        let raised = format!(
            "{drop} INSERT INTO state_meta (key, value) VALUES ('{SCHEMA_FLOOR_KEY}', '12');"
        );
        assert_eq!(contracts_without_floor(&raised), None);
    }
}
