//! The dead-letter table against a real file: created with the gateway schema, one row per
//! (platform, item id) with the raw payload kept as given, a redelivery adds nothing, and
//! rows survive a reopen.

use hermesd::state::Store;

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_are_kept_once_per_item_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = Store::open(&path).unwrap();
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
    assert!(
        store
            .record_dead_letter("slack", "5", None, "not json", "bad")
            .await
            .unwrap(),
        "ids are per platform"
    );
    store.close().await;

    let store = Store::open(&path).unwrap();
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
