//! The delivery ledger on both backends (`on_both_backends!`): recording an obligation
//! says whether its row is new, which `POST /send` (`hermesd send`) relies on so a retried
//! message is handed to its chat's lane once, even when two retries race.

mod support;

use hermesd::state::{NewObligation, ObligationState};
use support::store_backends::TestStore;

fn message(key: &str, text: &str) -> NewObligation {
    NewObligation {
        session_key: "send:telegram:-1004242".into(),
        message_ref: key.into(),
        platform: "telegram".into(),
        chat_id: "-1004242".into(),
        thread_id: None,
        content: text.into(),
    }
}

async fn recording_an_obligation_says_whether_it_is_new(t: &TestStore) {
    let store = &t.store;
    store.ensure_gateway_schema().await.expect("gateway schema");
    let (id, new) = store
        .create_obligation_if_new(message("key-1", "disk at 91%"))
        .await
        .unwrap();
    assert!(new);
    assert_eq!(id, message("key-1", "disk at 91%").obligation_id());
    let (again, new) = store
        .create_obligation_if_new(message("key-1", "disk at 91%"))
        .await
        .unwrap();
    assert_eq!((again.as_str(), new), (id.as_str(), false));
    // Delivered, it is still the same row and still not new.
    assert!(store.mark_attempting(&id).await.unwrap());
    assert!(store.mark_delivered(&id).await.unwrap());
    let (_, new) = store
        .create_obligation_if_new(message("key-1", "disk at 91%"))
        .await
        .unwrap();
    assert!(!new);
    let row = store.get_obligation(&id).await.unwrap().expect("row");
    assert_eq!(row.state, ObligationState::Delivered);
    // Another key (or another text) is another message.
    let (other, new) = store
        .create_obligation_if_new(message("key-2", "disk at 91%"))
        .await
        .unwrap();
    assert!(new && other != id);
    let (third, new) = store
        .create_obligation_if_new(message("key-1", "disk at 92%"))
        .await
        .unwrap();
    assert!(new && third != id);
}

on_both_backends!(recording_an_obligation_says_whether_it_is_new);
