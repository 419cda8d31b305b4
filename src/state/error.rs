//! The store's error type: every failure a caller can see, each with a clear message.

/// A failed store operation. Writes are never dropped silently: a caller either gets its
/// result or one of these.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database is locked by another process (gave up after {attempts} attempts)")]
    Locked { attempts: u32 },
    #[error("no session matches {0:?}")]
    SessionNotFound(String),
    #[error("session prefix {prefix:?} is ambiguous: {count} sessions match")]
    AmbiguousPrefix { prefix: String, count: usize },
    #[error("no inbound event {event_id:?} from {platform:?} is journaled")]
    InboundNotFound { platform: String, event_id: String },
    #[error("{0}")]
    Invalid(String),
    #[error("Title '{title}' is already in use by session {holder}")]
    TitleInUse { title: String, holder: String },
    #[error(
        "refusing to open the live database {0} from a test process (set HERMES_STATE_DB_GUARD_BYPASS=1 only if you really mean to)"
    )]
    LiveDatabaseGuard(String),
    #[error("state.db write failed: {0}")]
    WriteFailed(String),
    #[error("the state database writer has stopped")]
    Closed,
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Postgres(super::postgres::PgError),
}

impl From<super::postgres::PgError> for StoreError {
    /// A closed PostgreSQL pool is the closed store, as a stopped writer is on SQLite.
    fn from(error: super::postgres::PgError) -> Self {
        match error {
            super::postgres::PgError::Query(sqlx::Error::PoolClosed) => StoreError::Closed,
            other => StoreError::Postgres(other),
        }
    }
}

impl StoreError {
    /// True when SQLite reported lock contention (`SQLITE_BUSY` / `SQLITE_LOCKED`).
    pub fn is_busy(&self) -> bool {
        match self {
            StoreError::Sqlite(e) => is_busy(e),
            _ => false,
        }
    }

    /// True when a fenced write was refused because its session lease is no longer held.
    pub fn is_lease_lost(&self) -> bool {
        matches!(
            self,
            StoreError::Postgres(super::postgres::PgError::LeaseLost { .. })
        )
    }
}

pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

pub type StoreResult<T> = Result<T, StoreError>;
