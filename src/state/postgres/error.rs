//! Errors of the PostgreSQL backend, and how each becomes the store's backend-neutral
//! [`StoreError`]. None of them carries the connection URL unredacted.

use crate::state::error::{BackendFailure, StoreError};

/// A failed PostgreSQL operation.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("state.postgres_url is not a valid PostgreSQL URL: {0}")]
    BadUrl(String),
    #[error("PostgreSQL at {target}: {source}")]
    Database {
        /// The redacted URL.
        target: String,
        source: sqlx::Error,
    },
    #[error("PostgreSQL: {0}")]
    Query(#[from] sqlx::Error),
    #[error("migrating the PostgreSQL schema failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error(
        "the PostgreSQL schema was changed by a newer hermesd in a way releases before migration \
         {floor} cannot use (this release knows migrations up to {known}; the database has {applied}): \
         run a release that includes migration {floor} on this instance"
    )]
    SchemaTooNew {
        known: i64,
        applied: i64,
        floor: i64,
    },
    #[error("the {scope} lease {key:?} is no longer held with fencing token {token}")]
    LeaseLost {
        scope: &'static str,
        key: String,
        token: i64,
    },
}

impl PgError {
    pub(crate) fn database(url: &str, source: sqlx::Error) -> Self {
        Self::Database {
            target: super::redact_url(url),
            source,
        }
    }

    /// Whether the connection the statement ran on is gone (see [`connection_broke`]): a
    /// transaction being begun on it cannot have committed anything, so it can be begun
    /// again on another connection.
    pub(crate) fn is_broken_connection(&self) -> bool {
        matches!(self, PgError::Query(error) if connection_broke(error))
    }

    /// The shared database's error as it is, a lost lease included (no closed-pool mapping:
    /// for the driver errors of one statement, as they always were reported).
    pub(crate) fn into_shared(self) -> StoreError {
        match self {
            PgError::LeaseLost { scope, key, token } => StoreError::LeaseLost { scope, key, token },
            other => StoreError::Shared(BackendFailure::new(other)),
        }
    }
}

pub type PgResult<T> = Result<T, PgError>;

/// SQLSTATEs of the server ending a session (an operator's or a shutdown's doing, or
/// `idle_session_timeout`): it said so instead of running what was sent.
const SESSION_ENDED: [&str; 3] = ["57P01", "57P02", "57P05"];

/// Whether `error` says the connection is gone (its socket closed or reset, or the server
/// ended the session) rather than that a statement failed on a live one.
pub(crate) fn connection_broke(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|code| SESSION_ENDED.contains(&&*code)),
        _ => false,
    }
}

impl From<PgError> for StoreError {
    /// A closed PostgreSQL pool is the closed store, as a stopped writer is on SQLite.
    fn from(error: PgError) -> Self {
        match error {
            PgError::Query(sqlx::Error::PoolClosed) => StoreError::Closed,
            other => other.into_shared(),
        }
    }
}
