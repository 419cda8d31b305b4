//! Decoding PostgreSQL rows into the store's types, as `read.rs` decodes state.db rows:
//! nullable counters read as 0, JSON columns decoded the same lenient way, and the columns
//! that may hold U+0000 (message content and reasoning, JSON, system prompts) through
//! [`super::pg_text`].

use sqlx::Row;
use sqlx::postgres::PgRow;

use super::error::PgError;
use super::pg_text::opt_from_pg;
use crate::state::error::{StoreError, StoreResult};
pub use crate::state::sqlite::columns::{Columns, message, session};

/// A query failure as the store reports it.
pub fn db(error: sqlx::Error) -> StoreError {
    StoreError::from(PgError::Query(error))
}

/// The session and message columns, in the order [`session`] and [`message`] read them (the
/// names and order `read.rs` uses; the SQL is the same on both backends).
pub use crate::state::sqlite::read::{MESSAGE_COLUMNS, SESSION_COLUMN_COUNT, SESSION_COLUMNS};

impl Columns for PgRow {
    type Error = sqlx::Error;
    fn text(&self, idx: usize) -> Result<Option<String>, sqlx::Error> {
        self.try_get(idx)
    }
    /// Written through [`super::pg_text::to_pg`].
    fn encoded(&self, idx: usize) -> Result<Option<String>, sqlx::Error> {
        Ok(opt_from_pg(self.try_get::<Option<String>, _>(idx)?))
    }
    fn int(&self, idx: usize) -> Result<Option<i64>, sqlx::Error> {
        self.try_get(idx)
    }
    fn real(&self, idx: usize) -> Result<Option<f64>, sqlx::Error> {
        self.try_get(idx)
    }
}

/// Every row decoded by `decode`, or the first failure as the store reports it.
pub fn all<T>(
    rows: &[PgRow],
    decode: impl Fn(&PgRow) -> Result<T, sqlx::Error>,
) -> StoreResult<Vec<T>> {
    rows.iter()
        .map(decode)
        .collect::<Result<_, _>>()
        .map_err(db)
}
