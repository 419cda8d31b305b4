//! The transaction every PostgreSQL write runs in, and what each statement's result goes
//! through: a driver error into the store's error (`Db`), a row count into the SQLite
//! writer's terms (`changed`). Below the store and each table's writes.

use sqlx::Transaction;
use sqlx::postgres::Postgres;

use super::error::PgError;
use crate::state::error::StoreResult;

/// A write transaction: plain, or fenced by a session lease.
pub type PgTx = Transaction<'static, Postgres>;

/// Turns a driver error into the store's error, for `?`.
pub(super) trait Db<T> {
    fn db(self) -> StoreResult<T>;
}

impl<T> Db<T> for Result<T, sqlx::Error> {
    fn db(self) -> StoreResult<T> {
        self.map_err(|e| PgError::from(e).into_shared())
    }
}

/// How many rows a statement changed, as the SQLite writer reports it.
pub(super) fn changed(done: sqlx::postgres::PgQueryResult) -> usize {
    usize::try_from(done.rows_affected()).unwrap_or(usize::MAX)
}
