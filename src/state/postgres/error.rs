//! Errors of the PostgreSQL backend. None of them carries the connection URL unredacted.

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
}

pub type PgResult<T> = Result<T, PgError>;
