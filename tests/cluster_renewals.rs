//! Lease renewals on PostgreSQL cannot be starved (issue 28, defect 4): the instance lease
//! and session leases are renewed on connections of their own, so a store whose 16 pooled
//! connections are all taken by work that waits (here: writes blocked behind a table lock,
//! as turns would queue behind a slow database) still renews every lease before it runs
//! out. A renewal that cannot land (held up behind a row lock) is given up on this host's
//! clock: the session hold is marked lost before anyone else could take the lease.

mod support;

use std::time::{Duration, Instant};

use hermesd::gateway::cluster::Cluster;
use hermesd::state::{Store, StoreOptions};
use serde_json::json;
use sqlx::postgres::PgPool;
use support::conditions::wait_until;
use support::owners::{PATIENCE, instance_lease};
use support::store_backends::{Backend, TestStore};

/// Renewed every third of it: slack for a loaded machine.
const TTL: Duration = Duration::from_secs(6);
const SESSION: &str = "agent:main:telegram:dm:42";
/// More writes than the store's pool has connections, so some also queue for one.
const BLOCKED_WRITES: usize = 24;
const POOL_SIZE: i64 = 16;

async fn instance(t: &TestStore, id: &str) -> Store {
    t.another(StoreOptions {
        instance_id: Some(id.to_owned()),
        lease_ttl: TTL,
        ..StoreOptions::default()
    })
    .await
}

fn pool(t: &TestStore) -> PgPool {
    t.store.postgres().expect("postgres").pool().clone()
}

/// The lease's token and its expiry (epoch microseconds, the database's clock).
async fn lease(pool: &PgPool, scope: &str, key: &str) -> (i64, i64) {
    sqlx::query_as(
        "SELECT token, (extract(epoch FROM expires_at) * 1000000)::bigint FROM hermesd_leases \
         WHERE scope = $1 AND key = $2",
    )
    .bind(scope)
    .bind(key)
    .fetch_one(pool)
    .await
    .expect("read the lease")
}

async fn sessions_waiting_on_a_lock(pool: &PgPool) -> i64 {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    n
}

/// Waits until the database's clock has passed `micros` (epoch microseconds).
async fn wait_past(pool: &PgPool, micros: i64) {
    let start = Instant::now();
    loop {
        let (past,): (bool,) =
            sqlx::query_as("SELECT (extract(epoch FROM now()) * 1000000)::bigint > $1")
                .bind(micros)
                .fetch_one(pool)
                .await
                .unwrap();
        if past {
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "the clock never passed {micros}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_are_renewed_while_every_pooled_connection_waits() {
    let t = TestStore::open(Backend::Postgres).await;
    t.store.ensure_gateway_schema().await.unwrap();
    let pool = pool(&t);
    let a = instance(&t, "a").await;
    let cluster = Cluster::new(&a).expect("a shared store");
    let held = cluster.try_hold(SESSION).await.unwrap().expect("free");

    // Every write to the journal now waits, holding its pooled connection.
    let mut blocker = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE hermesd_inbound_events IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let writes: Vec<_> = (0..BLOCKED_WRITES)
        .map(|n| {
            let a = a.clone();
            tokio::spawn(async move {
                a.record_inbound("telegram", &format!("u-{n}"), SESSION, json!({"n": n}))
                    .await
            })
        })
        .collect();
    let start = Instant::now();
    while sessions_waiting_on_a_lock(&pool).await < POOL_SIZE {
        assert!(start.elapsed() < PATIENCE, "the pool never ran dry");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // From here on, nothing of A's can get a pooled connection. Each lease must still be
    // current, with the same token, once the expiry it had when the pool ran dry has passed.
    let (instance_token, instance_expiry) = lease(&pool, "instance", "a").await;
    let (session_token, session_expiry) = lease(&pool, "session", SESSION).await;
    wait_past(&pool, instance_expiry.max(session_expiry)).await;
    assert_eq!(
        instance_lease(&pool, "a").await,
        Some((instance_token, true)),
        "the instance lease was renewed while the pool was starved"
    );
    let (token, expiry) = lease(&pool, "session", SESSION).await;
    assert_eq!(token, session_token);
    assert!(expiry > session_expiry, "the session lease was renewed");
    assert!(!held.is_lost());
    assert_eq!(
        sessions_waiting_on_a_lock(&pool).await,
        POOL_SIZE,
        "the pool stayed starved the whole time"
    );

    blocker.rollback().await.unwrap();
    for write in writes {
        write
            .await
            .unwrap()
            .expect("the blocked write lands once the lock is gone");
    }
    cluster.release(held).await;
    a.close().await;
    t.store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_hold_whose_renewals_cannot_land_is_given_up_on_time() {
    let t = TestStore::open(Backend::Postgres).await;
    t.store.ensure_gateway_schema().await.unwrap();
    let pool = pool(&t);
    let a = instance(&t, "a").await;
    let cluster = Cluster::new(&a).expect("a shared store");
    let held = cluster.try_hold(SESSION).await.unwrap().expect("free");

    // The lease row is locked: every renewal waits behind the lock and none lands.
    let mut blocker = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM hermesd_leases WHERE scope = 'session' AND key = $1 FOR UPDATE")
        .bind(SESSION)
        .execute(&mut *blocker)
        .await
        .unwrap();
    let waited = wait_until("the hold is marked lost", PATIENCE, || held.is_lost()).await;
    println!("hold given up after {waited:?} (lease time {TTL:?})");
    // The renewals that were tried did not pile up on the row: each was ended.
    let start = Instant::now();
    while sessions_waiting_on_a_lock(&pool).await > 0 {
        assert!(
            start.elapsed() < PATIENCE,
            "a renewal kept waiting on the row"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    blocker.rollback().await.unwrap();
    cluster.release(held).await;
    a.close().await;
    t.store.close().await;
}
