//! The writes a turn makes as one statement on PostgreSQL (issue 28, "Cost per turn": no
//! `BEGIN`, fence check and `COMMIT` round trips around them): each checks the session lease
//! inside the statement, so under a lease taken over by another instance it is refused with
//! a lost lease and writes nothing, and under a current lease it writes what the transaction
//! wrote.

mod support;

use std::time::Duration;

use hermesd::coord::Trust;
use hermesd::state::postgres::{self, LeaseScope, with_fence};
use hermesd::state::{NewMessage, NewObligation, NewSession, Store, StoreOptions, UsageDelta};
use serde_json::json;
use sqlx::postgres::PgPool;
use support::postgres::PgCluster;

const KEY: &str = "telegram:dm:7";

/// What the turn's writes leave in the database: the session's message and usage counters,
/// its messages, the event's state, the owed replies and the routing entry.
async fn written(pool: &PgPool) -> (i64, i64, i64, String, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT COALESCE(message_count, 0) FROM sessions WHERE id = 's'), \
                (SELECT COALESCE(input_tokens, 0) FROM sessions WHERE id = 's'), \
                (SELECT count(*) FROM messages WHERE session_id = 's'), \
                (SELECT state FROM hermesd_inbound_events WHERE event_id = 'e1'), \
                (SELECT count(*) FROM delivery_obligations), \
                (SELECT count(*) FROM gateway_routing)",
    )
    .fetch_one(pool)
    .await
    .expect("read what was written")
}

/// Every one-statement write of a turn, under whatever lease the caller set.
async fn turn_writes(store: &Store) -> Vec<Result<(), hermesd::state::StoreError>> {
    let reply = NewObligation {
        session_key: KEY.to_owned(),
        message_ref: "e1".to_owned(),
        platform: "telegram".to_owned(),
        chat_id: "7".to_owned(),
        thread_id: None,
        content: "hello back".to_owned(),
    };
    let usage = UsageDelta {
        session_id: "s".to_owned(),
        input_tokens: 5,
        ..UsageDelta::default()
    };
    vec![
        store
            .save_routing_entry("/home", KEY, &json!({"session_key": KEY}))
            .await,
        store
            .start_turn(NewMessage::text("s", "user", "hello"), "telegram", "e1")
            .await
            .map(drop),
        store.record_usage(usage).await,
        store
            .append_message(NewMessage::text("s", "assistant", "hello back"))
            .await
            .map(drop),
        store
            .answer_inbound("telegram", "e1", vec![reply])
            .await
            .map(drop),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_statement_writes_under_a_lost_lease_write_nothing_and_under_a_current_one_write() {
    let pg = tokio::task::spawn_blocking(PgCluster::start)
        .await
        .expect("start PostgreSQL");
    let options = |name: &str| StoreOptions {
        instance_id: Some(name.to_owned()),
        lease_ttl: Duration::from_secs(60),
        ..StoreOptions::default()
    };
    let store = Store::open_postgres(&pg.url(), options("a"))
        .await
        .expect("open");
    store.ensure_gateway_schema().await.unwrap();
    store
        .create_session(NewSession::new("s", "telegram"))
        .await
        .unwrap();
    store
        .record_inbound("telegram", "e1", KEY, json!({}))
        .await
        .unwrap();
    let pool = store.postgres().unwrap().pool().clone();
    let ttl = Duration::from_secs(60);
    let lost = postgres::acquire(&pool, LeaseScope::Session, KEY, "a", ttl)
        .await
        .unwrap()
        .expect("a free lease");
    // Another instance takes the session over (the first lease is released, as if expired).
    assert!(postgres::release(&pool, &lost).await.unwrap());
    let current = postgres::acquire(&pool, LeaseScope::Session, KEY, "b", ttl)
        .await
        .unwrap()
        .expect("the takeover");
    let before = written(&pool).await;
    let refused = with_fence(lost.into(), Trust::unbounded(), turn_writes(&store)).await;
    for (n, result) in refused.iter().enumerate() {
        let error = result.as_ref().expect_err("a write under a lost lease");
        assert!(error.is_lease_lost(), "write {n}: {error}");
    }
    assert_eq!(
        written(&pool).await,
        before,
        "a refused write wrote something"
    );

    let done = with_fence(
        current.clone().into(),
        Trust::unbounded(),
        turn_writes(&store),
    )
    .await;
    for (n, result) in done.iter().enumerate() {
        assert!(result.is_ok(), "write {n}: {result:?}");
    }
    assert_eq!(
        written(&pool).await,
        (2, 5, 2, "answered".to_owned(), 1, 1),
        "the writes under the current lease"
    );
    // The answered event does not start a turn again, even under the current lease (a copy
    // queued before a lost hold): refused, nothing written.
    let again = with_fence(
        current.into(),
        Trust::unbounded(),
        store.start_turn(NewMessage::text("s", "user", "hello"), "telegram", "e1"),
    )
    .await;
    let error = again.expect_err("a turn started twice");
    assert!(error.is_already_answered(), "{error}");
    assert_eq!(
        written(&pool).await,
        (2, 5, 2, "answered".to_owned(), 1, 1),
        "a refused start wrote something"
    );
    // An unknown event is an error and records no reply, as in a transaction.
    let current = postgres::acquire(&pool, LeaseScope::Session, "other", "b", ttl)
        .await
        .unwrap()
        .expect("a free lease");
    let reply = NewObligation {
        session_key: "other".to_owned(),
        message_ref: "nope".to_owned(),
        content: "x".to_owned(),
        ..NewObligation::default()
    };
    let unknown = with_fence(
        current.into(),
        Trust::unbounded(),
        store.answer_inbound("telegram", "nope", vec![reply]),
    )
    .await;
    assert!(unknown.is_err(), "{unknown:?}");
    assert_eq!(
        written(&pool).await.4,
        1,
        "a reply for an unknown event was recorded"
    );
    store.close().await;
}
