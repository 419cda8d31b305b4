//! The PostgreSQL backend (`state.backend: postgres`): several hermesd instances sharing one
//! database. The connection (its URL is a secret), the embedded schema applied under an
//! advisory lock, the `Store`'s writes and reads (`store.rs` and the session/gateway files),
//! leases with fencing tokens, the session-work notifications and the shared files.

mod budget;
mod chat_order;
mod coordination;
mod error;
mod extras;
mod gateway_reads;
mod gateway_writes;
mod instance;
mod lease;
mod ledger_writes;
mod migrate;
pub mod notify;
mod one_statement;
pub mod pg_text;
mod retry;
mod rows;
mod search;
mod search_syntax;
mod session_reads;
mod session_writes;
mod shared_files;
mod snippet;
mod store;
mod titles;
mod tx;

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

pub use crate::coord::{current_fence, shared_name, with_fence};
pub use budget::{ConnectionBudget, PER_INSTANCE, connection_budget};
pub use coordination::PgCoordination;
pub use error::{PgError, PgResult};
pub use instance::InstanceOwner;
pub use lease::{
    Lease, LeaseScope, acquire, begin_fenced, count_current, release, renew, renew_late,
};
pub use migrate::{SCHEMA_FLOOR_KEY, known_version, migrate};
pub use retry::{Retried, retried};
pub(crate) use search::search;
pub use search::{SEARCH_TEXT, SEARCH_WORDS};
pub(crate) use session_reads::*;
pub use shared_files::{SharedFiles, SharedLock};
pub use store::{DEFAULT_LEASE_TTL, DEFAULT_MAX_CONNECTIONS, PgStore, PgTx};
pub(crate) use titles::{next_title_in_lineage, resolve_by_title};

/// How long taking a pooled connection may wait (opening one included) when the URL does not
/// set `connect_timeout`.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// The URL's connection settings, and how long taking a connection may wait: libpq's
/// `connect_timeout` parameter in whole seconds
/// (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNECT-CONNECT-TIMEOUT),
/// which sqlx does not read, else [`ACQUIRE_TIMEOUT`]. As in libpq, 0 means no limit and 1
/// counts as 2. Never puts the URL into an error.
pub(crate) fn connect_options(url: &str) -> PgResult<(PgConnectOptions, Duration)> {
    let bad = || PgError::BadUrl(redact_url(url));
    let mut timeout = ACQUIRE_TIMEOUT;
    let mut rest = url.to_owned();
    if let Ok(mut parsed) = reqwest::Url::parse(url)
        && parsed.query_pairs().any(|(k, _)| k == "connect_timeout")
    {
        let mut kept = Vec::new();
        for (key, value) in parsed.query_pairs() {
            if key == "connect_timeout" {
                timeout = match value.trim().parse::<u64>().map_err(|_| bad())? {
                    // No limit, as far as a timer can count.
                    0 => Duration::from_secs(u64::from(u32::MAX)),
                    seconds => Duration::from_secs(seconds.max(2)),
                };
            } else {
                kept.push((key.into_owned(), value.into_owned()));
            }
        }
        parsed.set_query(None);
        if !kept.is_empty() {
            parsed.query_pairs_mut().extend_pairs(kept);
        }
        rest = parsed.into();
    }
    let options = PgConnectOptions::from_str(&rest).map_err(|_| bad())?;
    Ok((options, timeout))
}

/// Pool settings for a turn's many short statements. sqlx checks a connection twice per use
/// by default: a ping when it is taken (`test_before_acquire`) and one when it is given back
/// (in `PoolConnection`'s return to the pool, which no option turns off). `checked` keeps the
/// first; the store's pool turns it off (see [`connect_for_store`]).
fn pool_options(max_connections: u32, checked: bool) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .test_before_acquire(checked)
}

/// A pool of at most `max_connections` connections to `url`.
pub async fn connect(url: &str, max_connections: u32) -> PgResult<PgPool> {
    let (options, timeout) = connect_options(url)?;
    pool_options(max_connections, true)
        .acquire_timeout(timeout)
        .connect_with(options)
        .await
        .map_err(|source| PgError::database(url, source))
}

/// The store's own pool: as [`connect`], and a session left idle inside a transaction for
/// `ttl` (the lease time) is ended by the server, its writes rolled back. A process paused
/// inside an unfenced write (a delivery claim's row lock, a cron claim) would otherwise keep
/// its row locks for as long as it is paused, and the instances taking its work over would
/// wait on them; fenced writes set the same timeout themselves (`lease::begin_fenced`).
///
/// A connection is handed out without a ping first (it saves a round trip per statement): a
/// connection that broke while idle is found by the statement sent on it, and every
/// statement on this pool is either run through [`retried`] (reads, and writes that may run
/// twice), which runs it again on a live connection, or begins a transaction through
/// [`PgStore::begin`], which begins it again on another.
pub async fn connect_for_store(url: &str, max_connections: u32, ttl: Duration) -> PgResult<PgPool> {
    let (options, timeout) = connect_options(url)?;
    let options = options.options([(
        "idle_in_transaction_session_timeout",
        ttl.as_millis().max(1).to_string(),
    )]);
    pool_options(max_connections, false)
        .acquire_timeout(timeout)
        .connect_with(options)
        .await
        .map_err(|source| PgError::database(url, source))
}

/// A pool of at most `max_connections` connections to `url` that only renews leases, apart
/// from the pool the store's work shares: a renewal must land within a third of `ttl`
/// however busy that pool is (64 turns may be waiting on 16 connections). Taking one of
/// these connections waits at most that long, and each statement on them is ended by the
/// server after that long (a renewal held up behind a row lock gives its connection back
/// for the next try instead of keeping it).
pub async fn connect_for_renewals(
    url: &str,
    max_connections: u32,
    ttl: Duration,
) -> PgResult<PgPool> {
    let (options, _) = connect_options(url)?;
    let within = renewal_timeout(ttl);
    let options = options.options([("statement_timeout", within.as_millis().to_string())]);
    pool_options(max_connections, true)
        .acquire_timeout(within)
        .connect_with(options)
        .await
        .map_err(|source| PgError::database(url, source))
}

/// How long one renewal may take: the time between two renewals (a third of the lease).
pub fn renewal_timeout(ttl: Duration) -> Duration {
    (ttl / 3).max(Duration::from_millis(10))
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
        for url in [
            "postgres://hermes:s3cret@db:notaport/x",
            "postgres://hermes:s3cret@db/x?connect_timeout=soon",
        ] {
            let error = connect_options(url).unwrap_err();
            let text = error.to_string();
            assert!(!text.contains("s3cret"), "{text}");
            assert!(text.contains("state.postgres_url"), "{text}");
        }
    }

    #[test]
    fn connect_timeout_is_read_as_libpq_reads_it_and_not_passed_on() {
        let timeout = |url: &str| connect_options(url).unwrap().1;
        assert_eq!(timeout("postgres://db/x"), ACQUIRE_TIMEOUT);
        assert_eq!(
            timeout("postgres://db/x?connect_timeout=5"),
            Duration::from_secs(5)
        );
        assert_eq!(
            timeout("postgres://db/x?connect_timeout=1"),
            Duration::from_secs(2)
        );
        assert!(timeout("postgres://db/x?connect_timeout=0") > Duration::from_secs(86_400 * 365));
        let (options, _) =
            connect_options("postgres://db/x?sslmode=disable&connect_timeout=5&application_name=h")
                .unwrap();
        assert_eq!(options.get_application_name(), Some("h"));
        assert_eq!(options.get_database(), Some("x"));
    }
}
