//! The store's API against real database files: sessions, messages, titles, lineage,
//! search, prune/export/delete, and group-commit isolation.

use hermesd::state::{Content, NewMessage, NewSession, SearchQuery, Store, StoreError, UsageDelta};
use serde_json::json;

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("state.db")).expect("open");
    (dir, store)
}

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

#[tokio::test(flavor = "multi_thread")]
async fn append_counts_messages_and_tool_calls() {
    let (_dir, store) = open();
    session(&store, "s1", "cli").await;
    say(&store, "s1", "user", "hello").await;
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

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_write_never_fails_its_neighbours() {
    let (_dir, store) = open();
    session(&store, "s", "cli").await;
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

#[tokio::test(flavor = "multi_thread")]
async fn first_end_reason_wins_and_reopen_clears_it() {
    let (_dir, store) = open();
    session(&store, "s", "telegram").await;
    assert!(store.end_session("s", "idle").await.unwrap());
    assert!(!store.end_session("s", "daily").await.unwrap());
    let s = store.get_session("s").await.unwrap().unwrap();
    assert_eq!(s.end_reason.as_deref(), Some("idle"));
    assert!(store.reopen_session("s").await.unwrap());
    let s = store.get_session("s").await.unwrap().unwrap();
    assert_eq!((s.ended_at, s.end_reason), (None, None));
    assert!(store.end_session("s", "daily").await.unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn titles_are_unique_sanitised_and_numbered_in_lineage() {
    let (_dir, store) = open();
    for id in ["a", "b", "c"] {
        session(&store, id, "cli").await;
    }
    store
        .set_session_title("a", Some("  Fix\u{200B} Docker   Build "))
        .await
        .unwrap();
    assert_eq!(
        store
            .get_session("a")
            .await
            .unwrap()
            .unwrap()
            .title
            .as_deref(),
        Some("Fix Docker Build")
    );
    let err = store
        .set_session_title("b", Some("Fix Docker Build"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Title 'Fix Docker Build' is already in use by session a"
    );
    let err = store
        .set_session_title("b", Some(&"x".repeat(101)))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "Title too long (101 chars, max 100)");

    assert_eq!(
        store
            .next_title_in_lineage("Fix Docker Build")
            .await
            .unwrap(),
        "Fix Docker Build #2"
    );
    assert_eq!(store.next_title_in_lineage("Other").await.unwrap(), "Other");
    store
        .set_session_title("b", Some("Fix Docker Build #2"))
        .await
        .unwrap();
    assert_eq!(
        store
            .next_title_in_lineage("Fix Docker Build #2")
            .await
            .unwrap(),
        "Fix Docker Build #3"
    );
    assert_eq!(
        store
            .resolve_session_by_title("Fix Docker Build")
            .await
            .unwrap(),
        Some("b".into())
    );
    assert_eq!(store.resolve_session_by_title("nope").await.unwrap(), None);
    // A blank title clears it.
    store.set_session_title("b", Some("   ")).await.unwrap();
    assert_eq!(store.get_session("b").await.unwrap().unwrap().title, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compression_child_takes_its_ancestors_title() {
    let (_dir, store) = open();
    session(&store, "parent", "cli").await;
    let mut child = NewSession::new("child", "cli");
    child.parent_session_id = Some("parent".into());
    store.create_session(child).await.unwrap();
    store
        .set_session_title("parent", Some("Plan"))
        .await
        .unwrap();
    store.end_session("parent", "compression").await.unwrap();
    store
        .set_session_title("child", Some("Plan"))
        .await
        .unwrap();
    assert_eq!(
        store.get_session("parent").await.unwrap().unwrap().title,
        None
    );
    assert_eq!(
        store
            .get_session("child")
            .await
            .unwrap()
            .unwrap()
            .title
            .as_deref(),
        Some("Plan")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn lineage_walks_ancestors_and_descendants() {
    let (_dir, store) = open();
    session(&store, "root", "cli").await;
    for (id, parent) in [("mid", "root"), ("leaf", "mid"), ("sibling", "root")] {
        let mut s = NewSession::new(id, "cli");
        s.parent_session_id = Some(parent.into());
        store.create_session(s).await.unwrap();
    }
    let up: Vec<String> = store
        .ancestors("leaf")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(up, ["leaf", "mid", "root"]);
    let mut down: Vec<String> = store
        .descendants("root")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    down.sort();
    assert_eq!(down, ["leaf", "mid", "root", "sibling"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_orphans_children_and_prune_only_takes_old_ended_sessions() {
    let (_dir, store) = open();
    let old = hermesd::state::now_epoch() - 40.0 * 86_400.0;
    for (id, source, ended) in [
        ("old-ended", "telegram", true),
        ("old-live", "telegram", false),
        ("old-cli", "cli", true),
    ] {
        let mut s = NewSession::new(id, source);
        s.started_at = Some(old);
        store.create_session(s).await.unwrap();
        say(&store, id, "user", "hi").await;
        if ended {
            store.end_session(id, "idle").await.unwrap();
        }
    }
    let mut child = NewSession::new("child", "cli");
    child.parent_session_id = Some("old-ended".into());
    store.create_session(child).await.unwrap();
    session(&store, "recent", "telegram").await;
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

#[tokio::test(flavor = "multi_thread")]
async fn export_clear_and_resolve_prefixes() {
    let (_dir, store) = open();
    session(&store, "20260101_000000_aaaa1111", "cli").await;
    session(&store, "20260101_000000_aaaa2222", "discord").await;
    say(&store, "20260101_000000_aaaa1111", "user", "one").await;
    say(&store, "20260101_000000_aaaa1111", "assistant", "two").await;

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

#[tokio::test(flavor = "multi_thread")]
async fn recent_sessions_carry_preview_and_last_active() {
    let (_dir, store) = open();
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

#[tokio::test(flavor = "multi_thread")]
async fn writes_after_close_fail_clearly() {
    let (_dir, store) = open();
    session(&store, "s", "cli").await;
    store.close().await;
    let err = store
        .append_message(NewMessage::text("s", "user", "late"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Closed), "{err}");
}

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
