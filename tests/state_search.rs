//! Full-text search through the real FTS5 indexes: words, phrases, prefixes, operators,
//! tool text, CJK via trigram (≥ 3 characters) and LIKE (2 characters), filters, context.

use hermesd::state::{NewMessage, NewSession, SearchQuery, Store};
use serde_json::json;

async fn fixture() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state.db")).unwrap();
    store
        .create_session(NewSession::new("cli1", "cli"))
        .await
        .unwrap();
    store
        .create_session(NewSession::new("tg1", "telegram"))
        .await
        .unwrap();
    let rows = [
        (
            "cli1",
            "user",
            "How do I fix the docker deployment on staging?",
        ),
        (
            "cli1",
            "assistant",
            &format!("Restart the container. {}", "x".repeat(400)),
        ),
        ("cli1", "user", "thanks, and kubernetes?"),
        ("tg1", "user", "我们需要部署环境的文档"),
        ("tg1", "assistant", "部署 已完成。数据库 也准备好了"),
        ("tg1", "user", "chat-send failed in my-app.config.ts"),
    ];
    for (session, role, text) in rows {
        store
            .append_message(NewMessage::text(session, role, text))
            .await
            .unwrap();
    }
    let mut tool_call = NewMessage::text("cli1", "assistant", "");
    tool_call.content = None;
    tool_call.tool_calls = Some(json!([{"id": "c1", "function": {"name": "terminal",
        "arguments": "{\"command\": \"systemctl restart nginx\"}"}}]));
    store.append_message(tool_call).await.unwrap();
    let mut tool = NewMessage::text("cli1", "tool", "exit code 0");
    tool.tool_name = Some("terminal".into());
    store.append_message(tool).await.unwrap();
    (dir, store)
}

async fn ids(store: &Store, query: SearchQuery) -> Vec<(String, String)> {
    store
        .search(query)
        .await
        .unwrap()
        .into_iter()
        .map(|h| (h.session_id, h.snippet))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn words_phrases_prefixes_and_operators() {
    let (_dir, store) = fixture().await;
    let hits = store
        .search(SearchQuery::new("docker deployment"))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert!(
        hits[0].snippet.contains(">>>docker<<<"),
        "{}",
        hits[0].snippet
    );
    assert_eq!(hits[0].source, "cli");
    assert_eq!(hits[0].role, "user");

    assert_eq!(
        ids(&store, SearchQuery::new("\"fix the docker\""))
            .await
            .len(),
        1
    );
    assert_eq!(ids(&store, SearchQuery::new("deploy*")).await.len(), 1);
    assert_eq!(
        ids(&store, SearchQuery::new("docker OR kubernetes"))
            .await
            .len(),
        2
    );
    assert_eq!(
        ids(&store, SearchQuery::new("docker NOT staging"))
            .await
            .len(),
        0
    );
    // Hyphenated and dotted compounds are quoted by the sanitiser and still match.
    assert_eq!(ids(&store, SearchQuery::new("chat-send")).await.len(), 1);
    assert_eq!(
        ids(&store, SearchQuery::new("my-app.config.ts"))
            .await
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_names_and_tool_call_json_are_searchable() {
    let (_dir, store) = fixture().await;
    let hits = store.search(SearchQuery::new("nginx")).await.unwrap();
    assert_eq!(hits.len(), 1, "tool_calls JSON is indexed");
    let hits = store.search(SearchQuery::new("terminal")).await.unwrap();
    assert_eq!(hits.len(), 2, "tool name and tool-call JSON");
    assert!(
        hits.iter()
            .any(|h| h.tool_name.as_deref() == Some("terminal"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cjk_three_characters_use_trigram_and_two_use_like() {
    let (_dir, store) = fixture().await;
    let three = store.search(SearchQuery::new("部署环境")).await.unwrap();
    assert_eq!(three.len(), 1);
    assert!(three[0].snippet.contains(">>>"), "{}", three[0].snippet);
    let two = store.search(SearchQuery::new("部署")).await.unwrap();
    assert_eq!(two.len(), 2, "LIKE fallback finds both rows");
    assert!(two[0].id > two[1].id, "newest first");
    let either = store
        .search(SearchQuery::new("数据库 OR 部署环境"))
        .await
        .unwrap();
    assert_eq!(either.len(), 2);
    assert!(
        store
            .search(SearchQuery::new("不存在的词"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn source_and_role_filters() {
    let (_dir, store) = fixture().await;
    let mut q = SearchQuery::new("部署");
    q.source_filter = vec!["cli".into()];
    assert!(ids(&store, q).await.is_empty());
    let mut q = SearchQuery::new("docker OR kubernetes OR chat-send");
    q.exclude_sources = vec!["telegram".into()];
    assert_eq!(ids(&store, q).await.len(), 2);
    let mut q = SearchQuery::new("container OR docker");
    q.role_filter = vec!["assistant".into()];
    let hits = ids(&store, q).await;
    assert_eq!(hits.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn context_is_one_message_each_side_truncated() {
    let (_dir, store) = fixture().await;
    let hits = store.search(SearchQuery::new("kubernetes")).await.unwrap();
    assert_eq!(hits.len(), 1);
    let context = &hits[0].context;
    assert_eq!(context.len(), 3, "previous, match, next: {context:?}");
    assert_eq!(context[0].role, "assistant");
    assert_eq!(context[0].content.chars().count(), 200);
    assert_eq!(context[1].content, "thanks, and kubernetes?");
    let first = store.search(SearchQuery::new("staging")).await.unwrap();
    assert_eq!(first[0].context.len(), 2, "no previous message");
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_queries_never_error() {
    let (_dir, store) = fixture().await;
    for q in [
        "",
        "   ",
        "\"",
        "AND",
        "OR NOT",
        "(((",
        "C++ {x}",
        "col:docker",
        "***",
        "^",
        "\"\"\"",
        "NEAR(a b)",
        "部",
        "a\u{0}b",
        &"docker ".repeat(1000),
    ] {
        store.search(SearchQuery::new(q)).await.unwrap();
    }
    let hits = store
        .search(SearchQuery::new("TODO: docker (staging)"))
        .await
        .unwrap();
    assert_eq!(hits.len(), 0, "TODO is not in the text; AND semantics");
    let hits = store
        .search(SearchQuery::new("docker: (staging)"))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
}
