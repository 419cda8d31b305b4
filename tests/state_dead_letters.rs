//! The dead-letter table, on state.db and on PostgreSQL (`on_both_backends!`): one row per
//! (platform, item id) with the raw payload kept as given, a redelivery adds nothing (also
//! from another process or instance), and rows survive a reopen.

mod support;

use hermesd::state::StoreOptions;
use support::store_backends::TestStore;

async fn dead_letters_are_kept_once_per_item_across_reopen(t: &TestStore) {
    let store = &t.store;
    store.ensure_gateway_schema().await.unwrap();
    let raw = r#"{"update_id":5,"message":{"message_id":"x"}}"#;
    assert!(
        store
            .record_dead_letter("telegram", "5", Some("42"), raw, "invalid type")
            .await
            .unwrap()
    );
    assert!(
        !store
            .record_dead_letter("telegram", "5", Some("42"), raw, "invalid type")
            .await
            .unwrap(),
        "a redelivery is not kept twice"
    );
    let other = t.another(StoreOptions::default()).await;
    assert!(
        !other
            .record_dead_letter("telegram", "5", Some("42"), raw, "invalid type")
            .await
            .unwrap(),
        "nor when another process or instance receives it"
    );
    other.close().await;
    assert!(
        store
            .record_dead_letter("slack", "5", None, "not json", "bad")
            .await
            .unwrap(),
        "ids are per platform"
    );
    store.close().await;

    let store = t.another(StoreOptions::default()).await;
    let rows = store.dead_letters().await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].platform, "telegram");
    assert_eq!(rows[0].raw, raw);
    assert_eq!(rows[0].chat_id.as_deref(), Some("42"));
    assert_eq!(rows[0].error, "invalid type");
    assert_eq!(
        (rows[1].platform.as_str(), rows[1].chat_id.as_deref()),
        ("slack", None)
    );
    store.close().await;
}

on_both_backends!(dead_letters_are_kept_once_per_item_across_reopen);
