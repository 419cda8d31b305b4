//! `/background` on both backends (`on_both_backends!`): the command's acknowledgement and
//! the task's journaled event are recorded in one transaction (`Store::answer_and_spawn`),
//! so a crash leaves both or neither; the same task recorded twice is spawned once.

mod support;

use hermesd::state::{InboundRecord, InboundState, NewInbound, NewObligation};
use support::store_backends::TestStore;

const CHAT_KEY: &str = "agent:main:telegram:dm:42";

fn ack(command: &str, text: &str) -> NewObligation {
    NewObligation {
        session_key: CHAT_KEY.into(),
        message_ref: command.into(),
        platform: "telegram".into(),
        chat_id: "42".into(),
        thread_id: None,
        content: text.into(),
    }
}

fn task(id: &str) -> NewInbound {
    NewInbound {
        platform: "telegram".into(),
        event_id: format!("bg:{id}"),
        session_key: format!("bg:telegram:{id}"),
        payload_json: format!(r#"{{"event_id":"bg:{id}","text":"sum it up"}}"#),
    }
}

async fn the_ack_and_the_task_are_recorded_together_once(t: &TestStore) {
    let store = &t.store;
    store.ensure_gateway_schema().await.expect("gateway schema");
    store
        .record_inbound(
            "telegram",
            "u1",
            CHAT_KEY,
            serde_json::json!({"text": "/bg sum it up"}),
        )
        .await
        .unwrap();

    let (record, ids) = store
        .answer_and_spawn("telegram", "u1", vec![ack("u1", "started")], task("bg_1"))
        .await
        .unwrap();
    assert_eq!(record, InboundRecord::Recorded);
    assert_eq!(ids, vec![ack("u1", "started").obligation_id()]);
    let command = store.get_inbound("telegram", "u1").await.unwrap().unwrap();
    assert_eq!(command.state, InboundState::Answered);
    assert_eq!(command.reply_obligation_ids, ids);
    assert!(store.get_obligation(&ids[0]).await.unwrap().is_some());
    // The task is an unfinished event under its own key: a restart runs it.
    let unfinished = store.unfinished_inbound().await.unwrap();
    assert_eq!(unfinished.len(), 1, "{unfinished:?}");
    assert_eq!(unfinished[0].event_id, "bg:bg_1");
    assert_eq!(unfinished[0].session_key, "bg:telegram:bg_1");
    assert_eq!(unfinished[0].state, InboundState::Received);
    assert_eq!(unfinished[0].payload["text"], "sum it up");
    assert!(!store.has_unfinished_inbound(CHAT_KEY).await.unwrap());

    // The same task again (the command run twice): nothing new, not even its ack.
    let (again, ids) = store
        .answer_and_spawn(
            "telegram",
            "u1",
            vec![ack("u1", "started again")],
            task("bg_1"),
        )
        .await
        .unwrap();
    assert_eq!((again, ids.len()), (InboundRecord::Duplicate, 0));
    let other_ack = ack("u1", "started again").obligation_id();
    assert!(store.get_obligation(&other_ack).await.unwrap().is_none());
    assert_eq!(store.unfinished_inbound().await.unwrap().len(), 1);
}

async fn a_failed_answer_records_no_task(t: &TestStore) {
    let store = &t.store;
    store.ensure_gateway_schema().await.expect("gateway schema");
    // The failure injected between the two writes: the answered event is not journaled, so
    // the transaction fails after the task's row went in, and both are rolled back.
    let failed = store
        .answer_and_spawn(
            "telegram",
            "missing",
            vec![ack("missing", "started")],
            task("bg_2"),
        )
        .await;
    assert!(failed.is_err(), "{failed:?}");
    assert!(
        store
            .get_inbound("telegram", "bg:bg_2")
            .await
            .unwrap()
            .is_none()
    );
    let id = ack("missing", "started").obligation_id();
    assert!(store.get_obligation(&id).await.unwrap().is_none());
    assert!(store.unfinished_inbound().await.unwrap().is_empty());
}

on_both_backends!(
    the_ack_and_the_task_are_recorded_together_once,
    a_failed_answer_records_no_task
);
