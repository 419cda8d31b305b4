//! The journal's order is its own sequence, never a host's clock (issue 28, defect 6). Each
//! instance stamps `received_at` with its own clock; with two instances a few seconds apart,
//! sorting by that stamp put a chat's later message first. Here one event's stamp is moved
//! an hour into the future, as a fast clock on the instance that recorded it would, and the
//! unfinished events still come back in the order they were journaled, on both backends.

mod support;

use hermesd::state::Store;
use serde_json::json;
use support::store_backends::{Backend, TestStore};

/// Moves `event_id`'s `received_at` by `seconds`, as a skewed clock would have stamped it.
async fn skew(t: &TestStore, event_id: &str, seconds: f64) {
    const SQL: &str = "UPDATE hermesd_inbound_events SET received_at = received_at + ";
    match t.backend {
        Backend::Sqlite => {
            let db = rusqlite::Connection::open(t.dir.path().join("state.db")).expect("open");
            let changed = db
                .execute(
                    &format!("{SQL} ?1 WHERE event_id = ?2"),
                    rusqlite::params![seconds, event_id],
                )
                .expect("skew");
            assert_eq!(changed, 1);
        }
        Backend::Postgres => {
            let url = t.cluster.as_ref().expect("a cluster").url();
            let pool = sqlx::postgres::PgPool::connect(&url)
                .await
                .expect("connect");
            let changed = sqlx::query(sqlx::AssertSqlSafe(format!("{SQL} $1 WHERE event_id = $2")))
                .bind(seconds)
                .bind(event_id)
                .execute(&pool)
                .await
                .expect("skew")
                .rows_affected();
            assert_eq!(changed, 1);
            pool.close().await;
        }
    }
}

async fn ids(store: &Store) -> Vec<String> {
    let events = store.unfinished_inbound().await.expect("unfinished");
    events.into_iter().map(|e| e.event_id).collect()
}

async fn a_fast_clock_does_not_reorder_a_chat(t: &TestStore) {
    let store = &t.store;
    store.ensure_gateway_schema().await.expect("gateway schema");
    for id in ["first", "second", "third"] {
        store
            .record_inbound("telegram", id, "agent:main:telegram:dm:1", json!({}))
            .await
            .expect("record");
    }
    // "first" was recorded by an instance whose clock runs an hour fast.
    skew(t, "first", 3600.0).await;
    assert_eq!(ids(store).await, ["first", "second", "third"]);
    // And "third" by one an hour slow: still last.
    skew(t, "third", -7200.0).await;
    assert_eq!(ids(store).await, ["first", "second", "third"]);
    store.close().await;
}

on_both_backends!(a_fast_clock_does_not_reorder_a_chat);
