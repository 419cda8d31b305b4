//! The ledger-backed delivery path against a real `state.db`: a delivered reply's row is
//! marked delivered, a refused one failed with the platform's error, and a reply left
//! ambiguous by a dead gateway goes out once, with the recovered marker.

mod support;

use std::sync::Arc;

use hermes_adapter::{LengthUnit, OutboundKind, SendErrorKind, SendResult};
use hermesd::gateway::delivery::{Deliverer, DeliveryOutcome, ObligationDelivery, RetryPolicy};
use hermesd::state::{NewObligation, ObligationState, RECOVERED_MARKER, Store, now_epoch};
use support::scripted_adapter::ScriptedAdapter;

fn reply(event_id: &str, content: &str) -> NewObligation {
    NewObligation {
        session_key: "agent:main:telegram:dm:42".into(),
        message_ref: event_id.into(),
        platform: "telegram".into(),
        chat_id: "42".into(),
        thread_id: Some("7".into()),
        content: content.into(),
    }
}

async fn open(path: &std::path::Path) -> Store {
    let store = Store::open(path).expect("open");
    store.ensure_gateway_schema().await.expect("gateway schema");
    store
}

#[tokio::test(flavor = "multi_thread")]
async fn delivered_and_refused_replies_are_recorded_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("state.db")).await;
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    let deliverer = Deliverer::new(adapter.clone(), RetryPolicy::seeded(2));

    let ok_id = store.create_obligation(reply("e1", "hello")).await.unwrap();
    let row = store.get_obligation(&ok_id).await.unwrap().unwrap();
    let result = deliverer.deliver_obligation(&store, &row).await.unwrap();
    let ObligationDelivery::Attempted(report) = result else {
        panic!("not claimed");
    };
    assert_eq!(report.outcome, DeliveryOutcome::Delivered);
    let row = store.get_obligation(&ok_id).await.unwrap().unwrap();
    assert_eq!(row.state, ObligationState::Delivered);
    assert_eq!(row.attempts, 1);
    let sent = adapter.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].1.chat_id.as_str(), sent[0].1.thread_id.as_deref()),
        ("42", Some("7"))
    );

    // Delivered rows are never claimed (or sent) again.
    let again = deliverer.deliver_obligation(&store, &row).await.unwrap();
    assert_eq!(again, ObligationDelivery::NotClaimed);
    assert_eq!(adapter.sent().len(), 1);

    adapter.answer(SendResult::failed(
        SendErrorKind::Forbidden,
        "bot was blocked by the user",
    ));
    let bad_id = store.create_obligation(reply("e2", "bye")).await.unwrap();
    let row = store.get_obligation(&bad_id).await.unwrap().unwrap();
    let result = deliverer.deliver_obligation(&store, &row).await.unwrap();
    assert!(matches!(
        result,
        ObligationDelivery::Attempted(report) if matches!(report.outcome, DeliveryOutcome::Failed { .. })
    ));
    let row = store.get_obligation(&bad_id).await.unwrap().unwrap();
    assert_eq!(row.state, ObligationState::Failed);
    let error = row.last_error.unwrap_or_default();
    assert!(error.contains("bot was blocked by the user"), "{error}");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ambiguous_send_is_recorded_as_failed_for_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("state.db")).await;
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    adapter.answer(SendResult::failed(
        SendErrorKind::Ambiguous,
        "read timed out",
    ));
    let deliverer = Deliverer::new(adapter.clone(), RetryPolicy::seeded(3));
    let id = store.create_obligation(reply("e1", "hello")).await.unwrap();
    let row = store.get_obligation(&id).await.unwrap().unwrap();
    deliverer.deliver_obligation(&store, &row).await.unwrap();
    let row = store.get_obligation(&id).await.unwrap().unwrap();
    assert_eq!(row.state, ObligationState::Failed);
    assert!(row.last_error.unwrap_or_default().contains("ambiguous"));
    assert_eq!(adapter.sent().len(), 1);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_left_mid_send_by_a_dead_gateway_goes_out_once_with_the_marker() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let crashed = support::store_owned_by(&path, support::dead_owner());
    crashed.ensure_gateway_schema().await.unwrap();
    let id = crashed
        .create_obligation(reply("e1", "the answer"))
        .await
        .unwrap();
    assert!(crashed.mark_attempting(&id).await.unwrap());
    crashed.close().await;

    let store = open(&path).await;
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    let deliverer = Deliverer::new(adapter.clone(), RetryPolicy::seeded(4));
    let owed = store.undelivered(now_epoch()).await.unwrap();
    assert_eq!(owed.len(), 1);
    assert!(owed[0].ambiguous);
    for row in &owed {
        deliverer.deliver_obligation(&store, row).await.unwrap();
    }
    // A second recovery pass finds nothing and sends nothing.
    assert!(store.undelivered(now_epoch()).await.unwrap().is_empty());
    for row in &owed {
        let again = deliverer.deliver_obligation(&store, row).await.unwrap();
        assert_eq!(again, ObligationDelivery::NotClaimed);
    }
    let texts = adapter.texts();
    assert_eq!(texts.len(), 1);
    assert_eq!(texts[0].0, format!("{RECOVERED_MARKER}the answer"));
    assert!(matches!(
        adapter.sent()[0].1.kind,
        OutboundKind::Text { reply_to: None, .. }
    ));
    let row = store.get_obligation(&id).await.unwrap().unwrap();
    assert_eq!(row.state, ObligationState::Delivered);
    store.close().await;
}
