//! The store's error type: every failure a caller can see, each with a clear message. No
//! backend's own error type shows in it: a driver's error travels inside an opaque
//! [`BackendFailure`] (its message, and its source for logs), so callers match on what went
//! wrong, never on which database said so.

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
    #[error("title {title:?} already belongs to session {holder}")]
    TitleInUse { title: String, holder: String },
    #[error(
        "refusing to open the live database {0} from a test process (set HERMES_STATE_DB_GUARD_BYPASS=1 only if you really mean to)"
    )]
    LiveDatabaseGuard(String),
    #[error("state.db write failed: {0}")]
    WriteFailed(String),
    /// A search the index could not answer (not a query without hits: that is an empty list).
    #[error("search failed on {index}: {message}")]
    SearchFailed { index: String, message: String },
    #[error("the state database writer has stopped")]
    Closed,
    /// A fenced write (one made under a session lease) was refused: another instance holds
    /// the session's lease now, so this instance must write nothing more for it.
    #[error("the {scope} lease {key:?} is no longer held with fencing token {token}")]
    LeaseLost {
        scope: &'static str,
        key: String,
        token: i64,
    },
    /// A turn was to start for an inbound event the journal lists as already answered (or
    /// ignored): another holder of the session took it up meanwhile, so it must not run again.
    #[error("the inbound event {platform}/{event_id} was already answered")]
    AlreadyAnswered { platform: String, event_id: String },
    /// The local database file (state.db) failed.
    #[error("sqlite: {0}")]
    Sqlite(SqliteFailure),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// The shared database failed (its message names the database, password redacted).
    #[error("{0}")]
    Shared(BackendFailure),
}

/// The shared database's error, kept opaque so callers outside `state` never depend on its
/// driver; shown as the driver's message.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct BackendFailure(Box<dyn std::error::Error + Send + Sync>);

impl BackendFailure {
    pub(crate) fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Box::new(error))
    }
}

/// SQLite's error, kept opaque for the same reason; the writer looks inside for lock
/// contention.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct SqliteFailure(rusqlite::Error);

impl SqliteFailure {
    pub(crate) fn is_busy(&self) -> bool {
        is_busy(&self.0)
    }

    pub(crate) fn into_inner(self) -> rusqlite::Error {
        self.0
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        StoreError::Sqlite(SqliteFailure(error))
    }
}

impl StoreError {
    /// True when SQLite reported lock contention (`SQLITE_BUSY` / `SQLITE_LOCKED`).
    pub fn is_busy(&self) -> bool {
        match self {
            StoreError::Sqlite(failure) => failure.is_busy(),
            _ => false,
        }
    }

    /// True when a fenced write was refused because its session lease is no longer held.
    pub fn is_lease_lost(&self) -> bool {
        matches!(self, StoreError::LeaseLost { .. })
    }

    /// True when a turn's start was refused because its event was answered already.
    pub fn is_already_answered(&self) -> bool {
        matches!(self, StoreError::AlreadyAnswered { .. })
    }
}

pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

pub type StoreResult<T> = Result<T, StoreError>;
