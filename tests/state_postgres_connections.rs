//! A server whose `max_connections` is below what the running instances may open together
//! is named at open: the second instance on a 30-connection server (two instances may open
//! 42) logs a warning with the figures, the first (21) does not. Without it the only sign
//! was turns failing with "pool timed out" under load (sqlx retries the server's "too many
//! clients" refusal until its acquire timeout), which is how the cluster benchmark failed
//! in CI on a 60-connection test server with three instances.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use hermesd::state::postgres::{PER_INSTANCE, connection_budget};
use hermesd::state::{Store, StoreOptions};
use support::postgres::PgCluster;

/// Collects what the subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

async fn open(url: &str, id: &str, log: &Captured) -> Store {
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    // The test runs on one thread (tokio's current-thread runtime), so the open runs under
    // this subscriber.
    let _guard = tracing::subscriber::set_default(subscriber);
    let options = StoreOptions {
        instance_id: Some(id.to_owned()),
        ..StoreOptions::default()
    };
    Store::open_postgres(url, options).await.expect("open")
}

#[tokio::test]
async fn an_instance_that_would_overrun_the_servers_connection_limit_says_so_at_open() {
    let cluster = PgCluster::start_with_max_connections(30);
    let url = cluster.url();

    let first_log = Captured::default();
    let first = open(&url, "first", &first_log).await;
    let pool = first.postgres().expect("postgres").pool().clone();
    let alone = connection_budget(&pool).await.expect("budget");
    assert_eq!(alone.allowed, 30, "the test role is a superuser: {alone:?}");
    assert_eq!(alone.instances, 1, "{alone:?}");
    assert_eq!(alone.needed, i64::from(PER_INSTANCE), "{alone:?}");
    assert_eq!(alone.shortfall(), None, "{alone:?}");
    assert!(
        !first_log.text().contains("max_connections"),
        "one instance fits in 30 connections, yet:\n{}",
        first_log.text()
    );

    let second_log = Captured::default();
    let _second = open(&url, "second", &second_log).await;
    let both = connection_budget(&pool).await.expect("budget");
    assert_eq!(both.instances, 2, "{both:?}");
    assert_eq!(both.shortfall(), Some(2 * i64::from(PER_INSTANCE) - 30));
    let logged = second_log.text();
    assert!(
        logged.contains("WARN")
            && logged.contains("raise max_connections")
            && logged.contains("allowed=30")
            && logged.contains("instances=2"),
        "the second instance did not name the limit:\n{logged}"
    );
}
