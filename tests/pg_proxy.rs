//! The PostgreSQL proxy the fault harness and the cluster benchmark rely on
//! (`tests/support/pg_proxy.rs`), checked against a real server: it counts round trips
//! exactly, its traps hold the answer of a committed statement until released, and a stall
//! stops the traffic without losing it.

mod support;

use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::{PgPool, PgPoolOptions};
use support::pg_proxy::PgProxy;
use support::postgres::PgCluster;

const WAIT: Duration = Duration::from_secs(60);

async fn rig() -> (PgCluster, PgProxy, PgPool) {
    let pg = tokio::task::spawn_blocking(PgCluster::start)
        .await
        .expect("start PostgreSQL");
    let proxy = PgProxy::start(pg.port()).await;
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&proxy.url_for(&pg.url(), pg.port()))
        .await
        .expect("connect through the proxy");
    sqlx::query("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)")
        .execute(&pool)
        .await
        .expect("create table");
    (pg, proxy, pool)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_statement_run_again_is_one_round_trip() {
    let (pg, proxy, _pool) = rig().await;
    // One connection, no pool: a pool adds its own checks on acquire and release.
    let mut conn = sqlx::postgres::PgConnection::connect(&proxy.url_for(&pg.url(), pg.port()))
        .await
        .expect("connect through the proxy");
    let select = "SELECT count(*) FROM t WHERE v = $1";
    // The first run prepares (one round trip for Parse/Describe, one for Bind/Execute).
    let _: i64 = sqlx::query_scalar(select)
        .bind(1)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let before = (proxy.round_trips(), proxy.statements());
    for v in 0..10 {
        let _: i64 = sqlx::query_scalar(select)
            .bind(v)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    }
    assert_eq!(proxy.round_trips() - before.0, 10);
    assert_eq!(proxy.statements() - before.1, 10);
    // A transaction of one statement: BEGIN, the statement, COMMIT.
    let before = proxy.round_trips();
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("INSERT INTO t VALUES (1, 1)")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(
        (3..=4).contains(&(proxy.round_trips() - before)),
        "{} round trips",
        proxy.round_trips() - before
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_holds_a_committed_answer_until_released() {
    let (pg, proxy, pool) = rig().await;
    let direct = PgPool::connect(&pg.url()).await.expect("direct connection");
    let trap = proxy.trap("INSERT INTO t");
    let writer = tokio::spawn({
        let pool = pool.clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            sqlx::query("INSERT INTO t VALUES (7, 7)")
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();
        }
    });
    let caught = trap.sprung(WAIT).await;
    // Held at the idle ReadyForQuery: the row is committed, the client has not heard so.
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM t WHERE id = 7")
        .fetch_one(&direct)
        .await
        .unwrap();
    assert_eq!(
        rows, 1,
        "the trap springs only once the transaction committed"
    );
    assert!(
        !writer.is_finished(),
        "the client was told before the release"
    );
    caught.release();
    tokio::time::timeout(WAIT, writer)
        .await
        .expect("the writer finishes after the release")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_holds_the_traffic_and_loses_none_of_it() {
    let (_pg, proxy, pool) = rig().await;
    proxy.set_stalled(true);
    let insert = tokio::spawn({
        let pool = pool.clone();
        async move {
            sqlx::raw_sql("INSERT INTO t VALUES (3, 3)")
                .execute(&pool)
                .await
                .unwrap();
        }
    });
    // The request is held by the proxy: the statement counter moved (the proxy read the
    // simple query), but the server has not received it.
    support::conditions::wait_until("the insert reached the proxy", WAIT, || {
        proxy.statements() >= 1
    })
    .await;
    assert!(!insert.is_finished());
    proxy.set_stalled(false);
    tokio::time::timeout(WAIT, insert)
        .await
        .expect("the insert completes once the stall ends")
        .unwrap();
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM t")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_dropped_unsprung_leaves_the_next_statement_to_a_later_trap() {
    let (_pg, proxy, pool) = rig().await;
    // Armed on several connections' proxies at once, the harness keeps the first to spring
    // and drops the rest; a dropped one must not take the statement a later trap waits for.
    drop(proxy.trap("INSERT INTO t"));
    let trap = proxy.trap("INSERT INTO t");
    let writer = tokio::spawn({
        let pool = pool.clone();
        async move {
            sqlx::query("INSERT INTO t VALUES (9, 9)")
                .execute(&pool)
                .await
                .unwrap();
        }
    });
    let caught = trap.sprung(WAIT).await;
    assert!(!writer.is_finished(), "the later trap holds the answer");
    caught.release();
    tokio::time::timeout(WAIT, writer)
        .await
        .expect("the writer finishes after the release")
        .unwrap();
}
