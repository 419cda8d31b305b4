//! The store's API on both backends (one suite: a fresh state.db, and a fresh private
//! PostgreSQL cluster): sessions, messages, search, prune/export/delete, write isolation
//! (titles and lineage are in `state_api_titles.rs`). The tests that are about SQLite itself (another process's lock) run on
//! SQLite only.

mod support;

use hermesd::state::{
    Content, InboundState, NewMessage, NewSession, SearchQuery, Store, StoreError, UsageDelta,
};
use serde_json::json;
use support::store_backends::TestStore;

on_both_backends!(
    append_counts_messages_and_tool_calls,
    a_failing_write_never_fails_its_neighbours,
    first_end_reason_wins_and_reopen_clears_it,
    delete_orphans_children_and_prune_only_takes_old_ended_sessions,
    export_clear_and_resolve_prefixes,
    recent_sessions_carry_preview_and_last_active,
    truncate_recounts_messages_and_tool_calls,
    usage_accumulates_and_an_unknown_session_is_an_error,
    text_with_nul_and_structured_content_round_trips,
    start_turn_appends_and_marks_the_event_processing,
    tool_start_marks_say_which_calls_began,
    writes_after_close_fail_clearly,
);

async fn session(store: &Store, id: &str, source: &str) {
    store
        .create_session(NewSession::new(id, source))
        .await
        .expect("create session");
}

async fn say(store: &Store, id: &str, role: &str, text: &str) -> i64 {
    store
        .append_message(NewMessage::text(id, role, text))
        .await
        .expect("append")
}

async fn append_counts_messages_and_tool_calls(t: &TestStore) {
    let store = &t.store;
    session(store, "s1", "cli").await;
    say(store, "s1", "user", "hello").await;
    let mut assistant = NewMessage::text("s1", "assistant", "");
    assistant.content = None;
    assistant.tool_calls = Some(json!([
        {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    ]));
    assistant.reasoning = Some("thinking".into());
    store.append_message(assistant).await.unwrap();
    let mut tool = NewMessage::text("s1", "tool", "ok");
    tool.tool_call_id = Some("c1".into());
    tool.tool_name = Some("terminal".into());
    store.append_message(tool).await.unwrap();
    let mut multimodal = NewMessage::text("s1", "user", "");
    multimodal.content = Some(Content::Json(json!([{"type": "text", "text": "look"}])));
    store.append_message(multimodal.clone()).await.unwrap();

    let s = store.get_session("s1").await.unwrap().unwrap();
    assert_eq!((s.message_count, s.tool_call_count), (4, 2));
    let messages = store.get_messages("s1").await.unwrap();
    assert_eq!(messages.len(), 4);
    assert!(messages.windows(2).all(|w| w[0].id < w[1].id));
    assert_eq!(messages[3].content, multimodal.content);
    let conversation = store.get_messages_as_conversation("s1").await.unwrap();
    assert_eq!(conversation[0], json!({"role": "user", "content": "hello"}));
    assert_eq!(conversation[1]["tool_calls"][1]["id"], "c2");
    assert_eq!(conversation[2]["tool_call_id"], "c1");

    store
        .record_usage(UsageDelta {
            session_id: "s1".into(),
            model: Some("m".into()),
            input_tokens: 10,
            output_tokens: 5,
            api_calls: 1,
            estimated_cost_usd: Some(0.5),
            ..UsageDelta::default()
        })
        .await
        .unwrap();
    let stats = store.model_stats().await.unwrap();
    assert_eq!(stats.len(), 1);
    assert_eq!((stats[0].total_input, stats[0].total_output), (10, 5));
}

async fn a_failing_write_never_fails_its_neighbours(t: &TestStore) {
    let store = &t.store;
    session(store, "s", "cli").await;
    // Many writes queued at once land in the same group-committed transaction.
    let mut tasks = Vec::new();
    for i in 0..200 {
        let store = store.clone();
        let target = if i % 10 == 0 { "missing" } else { "s" };
        tasks.push(tokio::spawn(async move {
            store
                .append_message(NewMessage::text(target, "user", &format!("m{i}")))
                .await
        }));
    }
    let mut ok = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => ok += 1,
            Err(StoreError::SessionNotFound(id)) => assert_eq!(id, "missing"),
            Err(other) => panic!("unexpected error {other}"),
        }
    }
    assert_eq!(ok, 180);
    let s = store.get_session("s").await.unwrap().unwrap();
    assert_eq!(s.message_count, 180);
    assert_eq!(store.get_messages("s").await.unwrap().len(), 180);
}

async fn first_end_reason_wins_and_reopen_clears_it(t: &TestStore) {
    let store = &t.store;
    session(store, "s", "telegram").await;
    assert!(store.end_session("s", "idle").await.unwrap());
    assert!(!store.end_session("s", "daily").await.unwrap());
    let s = store.get_session("s").await.unwrap().unwrap();
    assert_eq!(s.end_reason.as_deref(), Some("idle"));
    assert!(store.reopen_session("s").await.unwrap());
    let s = store.get_session("s").await.unwrap().unwrap();
    assert_eq!((s.ended_at, s.end_reason), (None, None));
    assert!(store.end_session("s", "daily").await.unwrap());
}

async fn delete_orphans_children_and_prune_only_takes_old_ended_sessions(t: &TestStore) {
    let store = &t.store;
    let old = hermesd::state::now_epoch() - 40.0 * 86_400.0;
    for (id, source, ended) in [
        ("old-ended", "telegram", true),
        ("old-live", "telegram", false),
        ("old-cli", "cli", true),
    ] {
        let mut s = NewSession::new(id, source);
        s.started_at = Some(old);
        store.create_session(s).await.unwrap();
        say(store, id, "user", "hi").await;
        if ended {
            store.end_session(id, "idle").await.unwrap();
        }
    }
    let mut child = NewSession::new("child", "cli");
    child.parent_session_id = Some("old-ended".into());
    store.create_session(child).await.unwrap();
    session(store, "recent", "telegram").await;
    store.end_session("recent", "idle").await.unwrap();

    assert_eq!(
        store.prune_sessions(30.0, Some("telegram")).await.unwrap(),
        1
    );
    assert!(store.get_session("old-ended").await.unwrap().is_none());
    assert!(store.get_messages("old-ended").await.unwrap().is_empty());
    let child = store.get_session("child").await.unwrap().unwrap();
    assert_eq!(
        child.parent_session_id, None,
        "children are orphaned, not deleted"
    );
    assert!(store.get_session("old-live").await.unwrap().is_some());
    assert!(store.get_session("recent").await.unwrap().is_some());
    assert_eq!(store.prune_sessions(30.0, None).await.unwrap(), 1);
    assert!(store.get_session("old-cli").await.unwrap().is_none());

    assert!(store.delete_session("old-live").await.unwrap());
    assert!(!store.delete_session("old-live").await.unwrap());
    let hits = store.search(SearchQuery::new("hi")).await.unwrap();
    assert!(
        hits.is_empty(),
        "deleted messages leave the index: {hits:?}"
    );
}

async fn export_clear_and_resolve_prefixes(t: &TestStore) {
    let store = &t.store;
    session(store, "20260101_000000_aaaa1111", "cli").await;
    session(store, "20260101_000000_aaaa2222", "discord").await;
    say(store, "20260101_000000_aaaa1111", "user", "one").await;
    say(store, "20260101_000000_aaaa1111", "assistant", "two").await;

    let one = store
        .export_session("20260101_000000_aaaa1111")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(one.messages.len(), 2);
    let value = serde_json::to_value(&one).unwrap();
    assert_eq!(value["id"], "20260101_000000_aaaa1111");
    assert_eq!(value["messages"][1]["content"], "two");
    assert_eq!(store.export_all(None).await.unwrap().len(), 2);
    assert_eq!(store.export_all(Some("discord")).await.unwrap().len(), 1);

    assert_eq!(
        store
            .resolve_session_id("20260101_000000_aaaa1")
            .await
            .unwrap(),
        "20260101_000000_aaaa1111"
    );
    assert!(matches!(
        store.resolve_session_id("20260101").await,
        Err(StoreError::AmbiguousPrefix { count: 2, .. })
    ));
    assert!(matches!(
        store.resolve_session_id("zzz").await,
        Err(StoreError::SessionNotFound(_))
    ));

    assert_eq!(
        store
            .clear_messages("20260101_000000_aaaa1111")
            .await
            .unwrap(),
        2
    );
    let s = store
        .get_session("20260101_000000_aaaa1111")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.message_count, 0);
}

async fn recent_sessions_carry_preview_and_last_active(t: &TestStore) {
    let store = &t.store;
    let mut first = NewSession::new("first", "cli");
    first.started_at = Some(1000.0);
    store.create_session(first).await.unwrap();
    let mut second = NewSession::new("second", "telegram");
    second.started_at = Some(2000.0);
    store.create_session(second).await.unwrap();
    let mut m = NewMessage::text("first", "user", &"p".repeat(100));
    m.timestamp = Some(5000.0);
    store.append_message(m).await.unwrap();

    let recent = store.recent_sessions(None, 10).await.unwrap();
    assert_eq!(recent[0].session.id, "second");
    assert_eq!(recent[0].last_active, 2000.0);
    assert_eq!(recent[1].preview.chars().count(), 63);
    assert_eq!(recent[1].last_active, 5000.0);
    assert_eq!(
        store.recent_sessions(Some("cli"), 10).await.unwrap().len(),
        1
    );
}

async fn writes_after_close_fail_clearly(t: &TestStore) {
    let store = &t.store;
    session(store, "s", "cli").await;
    store.close().await;
    let err = store
        .append_message(NewMessage::text("s", "user", "late"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Closed), "{err}");
}

// SQLite only: about SQLite's file lock held by another process.
#[tokio::test(flavor = "multi_thread")]
async fn a_held_lock_is_waited_out_and_an_endless_one_is_a_clear_error() {
    use hermesd::state::{RetryPolicy, StoreOptions};
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let options = StoreOptions {
        retry: RetryPolicy {
            busy_window: Duration::from_millis(20),
            max_attempts: 4,
        },
        ..StoreOptions::default()
    };
    let store = Store::open_with(&path, options).unwrap();
    session(&store, "s", "cli").await;

    // Another process's transaction holds the write lock until the writer has retried.
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let pending = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .append_message(NewMessage::text("s", "user", "waits"))
                .await
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while store.stats().lock_retries.load(Ordering::Relaxed) == 0 {
        assert!(std::time::Instant::now() < deadline, "writer never retried");
        tokio::task::yield_now().await;
    }
    other.execute_batch("COMMIT").unwrap();
    pending
        .await
        .unwrap()
        .expect("the write goes through once the lock is free");

    // A lock that is never released: the caller is told, nothing is dropped silently.
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err = store
        .append_message(NewMessage::text("s", "user", "refused"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Locked { attempts: 4 }), "{err}");
    assert!(err.to_string().contains("locked"), "{err}");
    other.execute_batch("ROLLBACK").unwrap();
    let texts: Vec<_> = store.get_messages("s").await.unwrap();
    assert_eq!(texts.len(), 1, "exactly the confirmed write is stored");
}

async fn truncate_recounts_messages_and_tool_calls(t: &TestStore) {
    let store = &t.store;
    session(store, "s", "cli").await;
    say(store, "s", "user", "run two tools").await;
    let mut calls = NewMessage::text("s", "assistant", "");
    calls.tool_calls = Some(json!([{"id": "a"}, {"id": "b"}]));
    store.append_message(calls).await.unwrap();
    let mut single = NewMessage::text("s", "assistant", "");
    single.tool_calls = Some(json!({"id": "c"}));
    let undo_from = store.append_message(single).await.unwrap();
    say(store, "s", "tool", "done").await;
    let s = store.get_session("s").await.unwrap().unwrap();
    assert_eq!((s.message_count, s.tool_call_count), (4, 3));

    assert_eq!(store.truncate_messages("s", undo_from).await.unwrap(), 2);
    let s = store.get_session("s").await.unwrap().unwrap();
    assert_eq!((s.message_count, s.tool_call_count), (2, 2));
    let ids: Vec<i64> = store
        .get_messages("s")
        .await
        .unwrap()
        .iter()
        .map(|m| m.id)
        .collect();
    assert!(ids.iter().all(|id| *id < undo_from), "{ids:?}");
    assert_eq!(store.clear_messages("s").await.unwrap(), 2);
    let s = store.get_session("s").await.unwrap().unwrap();
    assert_eq!((s.message_count, s.tool_call_count), (0, 0));
}

async fn usage_accumulates_and_an_unknown_session_is_an_error(t: &TestStore) {
    let store = &t.store;
    session(store, "cheap", "cli").await;
    session(store, "dear", "cli").await;
    session(store, "free", "cli").await;
    let usage = |id: &str, model: &str, cost: Option<f64>| UsageDelta {
        session_id: id.into(),
        model: Some(model.into()),
        input_tokens: 100,
        output_tokens: 10,
        cache_read_tokens: 1,
        cache_write_tokens: 2,
        reasoning_tokens: 3,
        api_calls: 1,
        estimated_cost_usd: cost,
        billing_provider: Some("openrouter".into()),
        billing_base_url: None,
    };
    for _ in 0..2 {
        store
            .record_usage(usage("cheap", "small", Some(0.25)))
            .await
            .unwrap();
    }
    store
        .record_usage(usage("dear", "large", Some(2.0)))
        .await
        .unwrap();
    store
        .record_usage(usage("free", "local", None))
        .await
        .unwrap();
    let s = store.get_session("cheap").await.unwrap().unwrap();
    assert_eq!(
        (
            s.input_tokens,
            s.output_tokens,
            s.cache_read_tokens,
            s.cache_write_tokens
        ),
        (200, 20, 2, 4)
    );
    assert_eq!((s.reasoning_tokens, s.api_call_count), (6, 2));
    assert_eq!(s.estimated_cost_usd, Some(0.5));
    assert_eq!(s.billing_provider.as_deref(), Some("openrouter"));
    assert_eq!(
        store
            .get_session("free")
            .await
            .unwrap()
            .unwrap()
            .estimated_cost_usd,
        None
    );

    // Most expensive first; a model without any cost comes last.
    let stats = store.model_stats().await.unwrap();
    let order: Vec<(&str, Option<f64>)> = stats
        .iter()
        .map(|m| (m.model.as_str(), m.total_cost))
        .collect();
    assert_eq!(
        order,
        [("large", Some(2.0)), ("small", Some(0.5)), ("local", None)]
    );
    assert_eq!((stats[1].session_count, stats[1].total_input), (1, 200));

    // `/insights`: grouped by source and model over a window, one source on request.
    session(store, "chat", "telegram").await;
    let chat = usage("chat", "small", Some(0.5));
    store.record_usage(chat).await.unwrap();
    let groups = store.usage_since(0.0, None).await.unwrap();
    let rows: Vec<String> = groups
        .iter()
        .map(|g| {
            format!(
                "{} {:?} {} {} {:?}",
                g.source, g.model, g.sessions, g.input_tokens, g.cost
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            "cli Some(\"large\") 1 100 Some(2.0)",
            "cli Some(\"local\") 1 100 None",
            "cli Some(\"small\") 1 200 Some(0.5)",
            "telegram Some(\"small\") 1 100 Some(0.5)",
        ]
    );
    let telegram = store.usage_since(0.0, Some("telegram")).await.unwrap();
    assert_eq!((telegram.len(), telegram[0].output_tokens), (1, 10));
    assert!(store.usage_since(f64::MAX, None).await.unwrap().is_empty());

    let err = store
        .record_usage(usage("missing", "small", None))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::SessionNotFound(id) if id == "missing"),
        "{err}"
    );
}

async fn text_with_nul_and_structured_content_round_trips(t: &TestStore) {
    let store = &t.store;
    let mut s = NewSession::new("s", "cli");
    s.system_prompt = Some("prompt\u{0}with nul \u{FFFF}".into());
    s.model_config = Some(json!({"temperature": 0.5}));
    store.create_session(s).await.unwrap();
    let mut m = NewMessage::text("s", "tool", "out\u{0}put \u{FFFF}0 kept");
    m.reasoning = Some("why\u{0}".into());
    m.reasoning_details = Some(json!([{"text": "a\u{0}b"}]));
    let text_id = store.append_message(m.clone()).await.unwrap();
    let mut structured = NewMessage::text("s", "user", "");
    structured.content = Some(Content::Json(
        json!([{"type": "text", "text": "see \u{0}"}]),
    ));
    store.append_message(structured.clone()).await.unwrap();

    let session = store.get_session("s").await.unwrap().unwrap();
    assert_eq!(
        session.system_prompt.as_deref(),
        Some("prompt\u{0}with nul \u{FFFF}")
    );
    assert_eq!(
        session.model_config.as_deref(),
        Some(r#"{"temperature":0.5}"#)
    );
    let messages = store.get_messages("s").await.unwrap();
    assert_eq!(messages[0].id, text_id);
    assert_eq!(messages[0].content, m.content);
    assert_eq!(messages[0].reasoning, m.reasoning);
    assert_eq!(messages[0].reasoning_details, m.reasoning_details);
    assert_eq!(messages[1].content, structured.content);
    let recent = store.recent_sessions(None, 1).await.unwrap();
    // SQLite's text functions end a string at U+0000, and structured content is stored
    // behind a NUL marker: its preview is empty on both backends.
    assert_eq!(recent[0].preview, "");
}

/// Journals an inbound event (the gateway's table), as the adapters do before a turn.
async fn journal(t: &TestStore, event_id: &str) {
    match t.store.postgres() {
        // Raw SQL: the gateway's PostgreSQL writes are another part of issue 22.
        Some(pg) => {
            sqlx::query(
                "INSERT INTO hermesd_inbound_events (platform, event_id, session_key, state, \
                 payload_json, received_at, updated_at) \
                 VALUES ('telegram', $1, 'k', 'received', '{}', 1, 1)",
            )
            .bind(event_id)
            .execute(pg.pool())
            .await
            .unwrap();
        }
        None => {
            t.store.ensure_gateway_schema().await.unwrap();
            t.store
                .record_inbound("telegram", event_id, "k", json!({}))
                .await
                .unwrap();
        }
    }
}

async fn inbound_state(t: &TestStore, event_id: &str) -> String {
    match t.store.postgres() {
        Some(pg) => sqlx::query_scalar(
            "SELECT state FROM hermesd_inbound_events WHERE platform = 'telegram' AND event_id = $1",
        )
        .bind(event_id)
        .fetch_one(pg.pool())
        .await
        .unwrap(),
        None => {
            let event = t.store.get_inbound("telegram", event_id).await.unwrap();
            event.unwrap().state.as_str().to_owned()
        }
    }
}

async fn start_turn_appends_and_marks_the_event_processing(t: &TestStore) {
    let store = &t.store;
    session(store, "s", "telegram").await;
    journal(t, "e1").await;
    journal(t, "e2").await;
    let id = store
        .start_turn(NewMessage::text("s", "user", "hello"), "telegram", "e1")
        .await
        .unwrap();
    assert_eq!(inbound_state(t, "e1").await, "processing");
    let messages = store.get_messages("s").await.unwrap();
    assert_eq!((messages.len(), messages[0].id), (1, id));
    assert_eq!(
        store.get_session("s").await.unwrap().unwrap().message_count,
        1
    );

    // A turn that cannot append its message leaves its event as it was.
    let err = store
        .start_turn(NewMessage::text("missing", "user", "hi"), "telegram", "e2")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::SessionNotFound(_)), "{err}");
    assert_eq!(inbound_state(t, "e2").await, "received");

    // An event answered meanwhile (by another holder of the session) does not start again:
    // a copy of it still queued after a lost hold must not run twice (issue 28).
    store
        .mark_inbound("telegram", "e2", InboundState::Answered)
        .await
        .unwrap();
    let err = store
        .start_turn(NewMessage::text("s", "user", "again"), "telegram", "e2")
        .await
        .unwrap_err();
    assert!(err.is_already_answered(), "{err}");
    assert_eq!(inbound_state(t, "e2").await, "answered");
    assert_eq!(
        store.get_messages("s").await.unwrap().len(),
        1,
        "nothing appended"
    );
    // An event the journal does not know starts as before.
    store
        .start_turn(
            NewMessage::text("s", "user", "unjournaled"),
            "telegram",
            "e9",
        )
        .await
        .unwrap();
}

async fn tool_start_marks_say_which_calls_began(t: &TestStore) {
    let store = &t.store;
    store.ensure_gateway_schema().await.unwrap();
    let ids = ["c1".to_owned(), "c2".to_owned(), "c3".to_owned()];
    assert!(
        store
            .started_tool_calls("s", &ids)
            .await
            .unwrap()
            .is_empty()
    );
    store.mark_tool_started("s", "c2").await.unwrap();
    // Marking twice is harmless (a retried write).
    store.mark_tool_started("s", "c2").await.unwrap();
    store.mark_tool_started("other", "c1").await.unwrap();
    let started = store.started_tool_calls("s", &ids).await.unwrap();
    assert_eq!(started.into_iter().collect::<Vec<_>>(), ["c2"]);
}
