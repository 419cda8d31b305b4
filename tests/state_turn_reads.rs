//! The store's reads and writes a turn makes on the shared database's hot path (issue 28,
//! "Cost per turn"): one session's unfinished journal rows and one routing entry are read by
//! key, on both backends, with the same answers as the whole-table reads they replace; and on
//! PostgreSQL a statement through the store's pool costs one round trip plus sqlx's ping as
//! the connection goes back (no second ping before use: 20 round trips for 10 statements,
//! not sqlx's default 30), and neither a write nor a read fails for good when the pooled
//! connection it is given broke while idle.

mod support;

use hermesd::state::{InboundState, Store, StoreOptions};
use serde_json::json;
use support::pg_proxy::PgProxy;
use support::postgres::PgCluster;
use support::store_backends::TestStore;

async fn one_sessions_unfinished_events_and_routing_entry_are_read_by_key(t: &TestStore) {
    let store = &t.store;
    store.ensure_gateway_schema().await.expect("gateway schema");
    for (event, key) in [("e1", "k"), ("e2", "other"), ("e3", "k"), ("e4", "k")] {
        store
            .record_inbound("telegram", event, key, json!({"event": event}))
            .await
            .unwrap();
    }
    store
        .mark_inbound("telegram", "e3", InboundState::Processing)
        .await
        .unwrap();
    store
        .mark_inbound("telegram", "e4", InboundState::Answered)
        .await
        .unwrap();
    let ours: Vec<(String, InboundState)> = store
        .unfinished_inbound_of("k")
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.event_id, e.state))
        .collect();
    assert_eq!(
        ours,
        [
            ("e1".to_owned(), InboundState::Received),
            ("e3".to_owned(), InboundState::Processing)
        ],
        "the session's unfinished events, in journal order, no other session's"
    );
    let from_all: Vec<String> = store
        .unfinished_inbound()
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.session_key == "k")
        .map(|e| e.event_id)
        .collect();
    assert_eq!(from_all, ["e1", "e3"]);
    assert!(
        store
            .unfinished_inbound_of("nobody")
            .await
            .unwrap()
            .is_empty()
    );

    let entry = json!({"session_key": "k", "session_id": "s1", "chat_type": "dm"});
    store.save_routing_entry("/a", "k", &entry).await.unwrap();
    store
        .save_routing_entry("/b", "k", &json!({"session_key": "k", "session_id": "s2"}))
        .await
        .unwrap();
    assert_eq!(
        store.load_routing_entry("/a", "k").await.unwrap(),
        Some(entry)
    );
    assert_eq!(store.load_routing_entry("/a", "other").await.unwrap(), None);
    assert_eq!(store.load_routing_entry("/c", "k").await.unwrap(), None);
}

on_both_backends!(one_sessions_unfinished_events_and_routing_entry_are_read_by_key);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_given_a_connection_that_broke_while_idle_is_made_on_another() {
    let pg = tokio::task::spawn_blocking(PgCluster::start)
        .await
        .expect("start PostgreSQL");
    let proxy = PgProxy::start(pg.port()).await;
    let url = proxy.url_for(&pg.url(), pg.port());
    let store = Store::open_postgres(&url, StoreOptions::default())
        .await
        .expect("open through the proxy");
    store.ensure_gateway_schema().await.expect("gateway schema");
    for event in ["e1", "e2", "e3"] {
        store
            .record_inbound("telegram", event, "k", json!({}))
            .await
            .expect("a write before the break");
    }
    // Every connection the pool holds is now a closed socket; the pool has not noticed, and
    // none has been idle long enough to be checked before use.
    proxy.drop_connections();
    store
        .record_inbound("telegram", "e4", "k", json!({}))
        .await
        .expect("the write is made on a new connection");
    let unfinished = store.unfinished_inbound_of("k").await.unwrap();
    assert_eq!(unfinished.len(), 4, "{unfinished:#?}");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_given_a_connection_that_broke_while_idle_is_run_again_on_a_live_one() {
    let pg = tokio::task::spawn_blocking(PgCluster::start)
        .await
        .expect("start PostgreSQL");
    let proxy = PgProxy::start(pg.port()).await;
    let url = proxy.url_for(&pg.url(), pg.port());
    let store = Store::open_postgres(&url, StoreOptions::default())
        .await
        .expect("open through the proxy");
    store.ensure_gateway_schema().await.expect("gateway schema");
    store
        .record_inbound("telegram", "e1", "k", json!({}))
        .await
        .expect("a write before the break");
    let entry = json!({"session_key": "k", "session_id": "s1"});
    store.save_routing_entry("/a", "k", &entry).await.unwrap();
    // Several reads at once, so that the pool holds several idle connections.
    let reads = (0..6).map(|_| store.unfinished_inbound_of("k"));
    for read in futures_util::future::join_all(reads).await {
        assert_eq!(read.expect("a read before the break").len(), 1);
    }
    // Every idle connection is now a closed socket, and the pool does not ping one before
    // handing it out: each read below is first sent on a broken connection.
    proxy.drop_connections();
    assert_eq!(
        store
            .unfinished_inbound_of("k")
            .await
            .expect("the read is run again on a live connection")
            .len(),
        1
    );
    proxy.drop_connections();
    assert_eq!(
        store
            .load_routing_entry("/a", "k")
            .await
            .expect("a read by key"),
        Some(entry)
    );
    proxy.drop_connections();
    assert!(
        store
            .has_unfinished_inbound("k")
            .await
            .expect("a has-work check")
    );
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_statement_costs_one_round_trip_and_the_pools_return_ping() {
    let pg = tokio::task::spawn_blocking(PgCluster::start)
        .await
        .expect("start PostgreSQL");
    let proxy = PgProxy::start(pg.port()).await;
    let pool = hermesd::state::postgres::connect_for_store(
        &proxy.url_for(&pg.url(), pg.port()),
        1,
        std::time::Duration::from_secs(15),
    )
    .await
    .expect("the store's pool, through the proxy");
    let select = "SELECT count(*) FROM pg_class WHERE relpages = $1";
    let run = |n: i32| {
        let pool = pool.clone();
        async move {
            let _: i64 = sqlx::query_scalar(select)
                .bind(n)
                .fetch_one(&pool)
                .await
                .unwrap();
        }
    };
    // Prepared on the pool's one connection.
    run(0).await;
    let pings = |from: usize| {
        proxy.batch_log()[from..]
            .iter()
            .filter(|b| b.sql == "sync")
            .count()
    };
    // The return ping of the last use is sent after the caller has its answer.
    support::conditions::wait_until(
        "the first use's return ping",
        std::time::Duration::from_secs(60),
        || pings(0) >= 1,
    )
    .await;
    let (before, from) = (proxy.round_trips(), proxy.batch_log().len());
    for n in 1..=10 {
        run(n).await;
    }
    support::conditions::wait_until(
        "the last use's return ping",
        std::time::Duration::from_secs(60),
        || proxy.round_trips() >= before + 20,
    )
    .await;
    // The statement, and sqlx's ping as the connection is given back (no option turns that
    // one off); none as it is taken (sqlx's default would make it 30).
    assert_eq!(proxy.round_trips() - before, 20, "{:#?}", proxy.batch_log());
    assert_eq!(pings(from), 10);
    pool.close().await;
}
