//! The PostgreSQL backend (`state.backend: postgres`): several hermesd instances sharing one
//! database. The connection (its URL is a secret), the embedded schema applied under an
//! advisory lock, the `Store`'s writes and reads (`store.rs` and the session/gateway files),
//! leases with fencing tokens, the session-work notifications and the shared files.

mod error;
mod fence_scope;
mod gateway_reads;
mod gateway_writes;
mod instance;
mod lease;
mod ledger_writes;
mod migrate;
pub mod notify;
pub mod pg_text;
mod rows;
mod search;
mod search_syntax;
mod session_reads;
mod session_writes;
mod shared_files;
mod snippet;
mod store;
mod titles;

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

pub use error::{PgError, PgResult};
pub use fence_scope::{current_fence, with_fence};
pub use instance::InstanceOwner;
pub use lease::{Lease, LeaseScope, acquire, begin_fenced, count_current, release, renew};
pub use migrate::migrate;
pub(crate) use search::search;
pub use search::{SEARCH_TEXT, SEARCH_WORDS};
pub(crate) use session_reads::*;
pub use shared_files::{SharedFiles, SharedLock, shared_name};
pub use store::{DEFAULT_LEASE_TTL, DEFAULT_MAX_CONNECTIONS, PgStore, PgTx};
pub(crate) use titles::{next_title_in_lineage, resolve_by_title};

/// How long a caller waits for a pooled connection before the operation fails.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// Parses `url` without ever putting it into an error.
pub(crate) fn connect_options(url: &str) -> PgResult<PgConnectOptions> {
    PgConnectOptions::from_str(url).map_err(|_| PgError::BadUrl(redact_url(url)))
}

/// A pool of at most `max_connections` connections to `url`.
pub async fn connect(url: &str, max_connections: u32) -> PgResult<PgPool> {
    let options = connect_options(url)?;
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options)
        .await
        .map_err(|source| PgError::database(url, source))
}

/// `url` as it may be shown: the password replaced by `***`, or nothing of it when it does
/// not parse (a malformed URL may hold the password anywhere).
pub fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some(crate::config::REDACTED));
            }
            // Query parameters may carry `password=`; show only their names.
            let names: Vec<String> = parsed.query_pairs().map(|(k, _)| k.into_owned()).collect();
            if !names.is_empty() {
                let shown: Vec<String> = names
                    .iter()
                    .map(|name| format!("{name}={}", crate::config::REDACTED))
                    .collect();
                parsed.set_query(Some(&shown.join("&")));
            }
            parsed.to_string()
        }
        Err(_) => "(unparsable URL)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_keeps_host_and_database_but_no_password() {
        assert_eq!(
            redact_url("postgres://hermes:s3cret@db.example:5433/hermes"),
            "postgres://hermes:***@db.example:5433/hermes"
        );
        assert_eq!(
            redact_url("postgresql://db/hermes?sslmode=require&password=s3cret"),
            "postgresql://db/hermes?sslmode=***&password=***"
        );
        assert_eq!(redact_url("postgres://db/hermes"), "postgres://db/hermes");
        assert_eq!(redact_url("s3cret garbage"), "(unparsable URL)");
    }

    #[test]
    fn a_malformed_url_is_refused_without_echoing_it() {
        let error = connect_options("postgres://hermes:s3cret@db:notaport/x").unwrap_err();
        let text = error.to_string();
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("state.postgres_url"), "{text}");
    }
}
