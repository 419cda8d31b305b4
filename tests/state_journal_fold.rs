//! Folding journaled parts into one event (issue 28, defect 3: albums and split pastes in a
//! cluster): the kept row takes the joined payload and the others are answered, in one
//! write; when any of them was taken up meanwhile, nothing changes. On both backends.

mod support;

use hermesd::state::{InboundState, Store};
use serde_json::json;
use support::store_backends::TestStore;

const KEY: &str = "agent:main:telegram:dm:1";

async fn record(store: &Store, ids: &[&str]) {
    store.ensure_gateway_schema().await.expect("gateway schema");
    for id in ids {
        store
            .record_inbound("telegram", id, KEY, json!({"part": id}))
            .await
            .expect("record");
    }
}

async fn state_of(store: &Store, id: &str) -> InboundState {
    store
        .get_inbound("telegram", id)
        .await
        .expect("read")
        .expect("journaled")
        .state
}

async fn parts_fold_into_the_kept_row(t: &TestStore) {
    let store = &t.store;
    record(store, &["1", "2", "3", "4"]).await;
    let joined = json!({"part": "1+2+3"});
    let absorbed = ["2".to_owned(), "3".to_owned()];
    assert!(
        store
            .fold_inbound("telegram", "1", &joined, &absorbed)
            .await
            .expect("fold")
    );
    let unfinished = store.unfinished_inbound().await.expect("unfinished");
    let ids: Vec<&str> = unfinished.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(ids, ["1", "4"], "the absorbed parts are finished");
    assert_eq!(unfinished[0].payload, joined);
    assert_eq!(unfinished[0].state, InboundState::Received);
    assert_eq!(unfinished[1].payload, json!({"part": "4"}), "untouched");
    for id in ["2", "3"] {
        assert_eq!(state_of(store, id).await, InboundState::Answered);
    }
    store.close().await;
}

async fn a_part_taken_up_meanwhile_stops_the_fold(t: &TestStore) {
    let store = &t.store;
    record(store, &["1", "2", "3"]).await;
    store
        .mark_inbound("telegram", "3", InboundState::Processing)
        .await
        .expect("mark");
    let absorbed = ["2".to_owned(), "3".to_owned()];
    let folded = store
        .fold_inbound("telegram", "1", &json!({"part": "all"}), &absorbed)
        .await
        .expect("fold");
    assert!(!folded);
    assert_eq!(state_of(store, "2").await, InboundState::Received);
    let kept = store.get_inbound("telegram", "1").await.unwrap().unwrap();
    assert_eq!(kept.payload, json!({"part": "1"}), "nothing written");
    // A kept row no longer received (its turn started) is not folded into either.
    store
        .mark_inbound("telegram", "1", InboundState::Processing)
        .await
        .expect("mark");
    let folded = store
        .fold_inbound("telegram", "1", &json!({"part": "all"}), &["2".to_owned()])
        .await
        .expect("fold");
    assert!(!folded);
    assert_eq!(state_of(store, "2").await, InboundState::Received);
    store.close().await;
}

on_both_backends!(
    parts_fold_into_the_kept_row,
    a_part_taken_up_meanwhile_stops_the_fold
);
