//! Full-text search on both backends (SQLite's FTS5 indexes; PostgreSQL's full-text search
//! and pg_trgm): words, phrases, prefixes, operators, tool text, CJK via trigram (≥ 3
//! characters) and LIKE (2 characters), filters, paging, context, snippets.

mod support;

use hermesd::state::{NewMessage, NewSession, SearchQuery, Store};
use serde_json::json;
use support::store_backends::TestStore;

on_both_backends!(
    words_phrases_prefixes_and_operators,
    tool_names_and_tool_call_json_are_searchable,
    cjk_three_characters_use_trigram_and_two_use_like,
    source_and_role_filters,
    context_is_one_message_each_side_truncated,
    hostile_queries_never_error,
    operator_precedence_and_case_are_fts5s,
    cjk_substrings_inside_longer_text_and_mixed_queries,
    snippets_mark_matches_and_cut_long_text,
    paging_with_limit_and_offset,
    deleted_and_cleared_messages_leave_the_index,
    words_inside_urls_paths_and_identifiers,
    diacritics_are_ignored_as_fts5_does,
    a_huge_message_of_many_words_is_stored_and_found,
    better_matches_rank_before_newer_ones,
);

async fn fixture(t: &TestStore) -> &Store {
    let store = &t.store;
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
    store
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

async fn words_phrases_prefixes_and_operators(t: &TestStore) {
    let store = fixture(t).await;
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
        ids(store, SearchQuery::new("\"fix the docker\""))
            .await
            .len(),
        1
    );
    assert_eq!(ids(store, SearchQuery::new("deploy*")).await.len(), 1);
    assert_eq!(
        ids(store, SearchQuery::new("docker OR kubernetes"))
            .await
            .len(),
        2
    );
    assert_eq!(
        ids(store, SearchQuery::new("docker NOT staging"))
            .await
            .len(),
        0
    );
    // Hyphenated and dotted compounds are quoted by the sanitiser and still match.
    assert_eq!(ids(store, SearchQuery::new("chat-send")).await.len(), 1);
    assert_eq!(
        ids(store, SearchQuery::new("my-app.config.ts")).await.len(),
        1
    );
}

async fn tool_names_and_tool_call_json_are_searchable(t: &TestStore) {
    let store = fixture(t).await;
    let hits = store.search(SearchQuery::new("nginx")).await.unwrap();
    assert_eq!(hits.len(), 1, "tool_calls JSON is indexed");
    let hits = store.search(SearchQuery::new("terminal")).await.unwrap();
    assert_eq!(hits.len(), 2, "tool name and tool-call JSON");
    assert!(
        hits.iter()
            .any(|h| h.tool_name.as_deref() == Some("terminal"))
    );
}

async fn cjk_three_characters_use_trigram_and_two_use_like(t: &TestStore) {
    let store = fixture(t).await;
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

async fn source_and_role_filters(t: &TestStore) {
    let store = fixture(t).await;
    let mut q = SearchQuery::new("部署");
    q.source_filter = vec!["cli".into()];
    assert!(ids(store, q).await.is_empty());
    let mut q = SearchQuery::new("docker OR kubernetes OR chat-send");
    q.exclude_sources = vec!["telegram".into()];
    assert_eq!(ids(store, q).await.len(), 2);
    let mut q = SearchQuery::new("container OR docker");
    q.role_filter = vec!["assistant".into()];
    let hits = ids(store, q).await;
    assert_eq!(hits.len(), 1);
}

async fn context_is_one_message_each_side_truncated(t: &TestStore) {
    let store = fixture(t).await;
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

async fn hostile_queries_never_error(t: &TestStore) {
    let store = fixture(t).await;
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

async fn count(store: &Store, query: &str) -> usize {
    store.search(SearchQuery::new(query)).await.unwrap().len()
}

async fn operator_precedence_and_case_are_fts5s(t: &TestStore) {
    let store = fixture(t).await;
    // Terms side by side bind tighter than NOT: docker and not (staging and thanks).
    assert_eq!(count(store, "docker NOT staging thanks").await, 1);
    assert_eq!(count(store, "docker OR thanks NOT kubernetes").await, 1);
    assert_eq!(count(store, "docker AND staging OR kubernetes").await, 2);
    // Only upper-case operators are operators: here "or" is a word no message has.
    assert_eq!(count(store, "docker or kubernetes").await, 0);
    assert_eq!(count(store, "DOCKER Staging").await, 1);
    assert_eq!(count(store, "\"docker deployment\"").await, 1);
    assert_eq!(count(store, "\"deployment docker\"").await, 0);
    assert_eq!(count(store, "kube* OR nginx").await, 2);
    // Punctuation the sanitiser keeps is still a syntax error: no hits, no error.
    assert_eq!(count(store, "thanks, and").await, 0);
    assert_eq!(count(store, "it's").await, 0);
}

async fn cjk_substrings_inside_longer_text_and_mixed_queries(t: &TestStore) {
    let store = fixture(t).await;
    assert_eq!(
        count(store, "需要部署").await,
        1,
        "a substring across word boundaries"
    );
    assert_eq!(count(store, "环境的文档").await, 1);
    assert_eq!(count(store, "部署环境的 OR 数据库").await, 2);
    assert_eq!(
        count(store, "docker 部署环境").await,
        0,
        "both terms must match"
    );
    assert_eq!(count(store, "部署环境 NOT 需要部署").await, 0);
    // A 2-character CJK term sends the whole query to the LIKE fallback: any term matches.
    assert_eq!(count(store, "部署 docker").await, 3);
    let hits = store.search(SearchQuery::new("部署环境")).await.unwrap();
    assert_eq!(hits[0].session_id, "tg1");
    assert_eq!(hits[0].source, "telegram");
}

async fn snippets_mark_matches_and_cut_long_text(t: &TestStore) {
    let store = fixture(t).await;
    let hits = store.search(SearchQuery::new("docker")).await.unwrap();
    assert_eq!(
        hits[0].snippet.trim(),
        "How do I fix the >>>docker<<< deployment on staging?"
    );
    let words: Vec<String> = (0..200).map(|i| format!("w{i}")).collect();
    let long = format!(
        "{} needle {}",
        words[..100].join(" "),
        words[100..].join(" ")
    );
    store
        .append_message(NewMessage::text("cli1", "user", &long))
        .await
        .unwrap();
    let hits = store.search(SearchQuery::new("needle")).await.unwrap();
    let snippet = &hits[0].snippet;
    assert!(snippet.contains(">>>needle<<<"), "{snippet}");
    assert!(snippet.starts_with("..."), "{snippet}");
    assert!(snippet.ends_with("..."), "{snippet}");
    assert!(snippet.split_whitespace().count() <= 45, "{snippet}");
    let cjk = store.search(SearchQuery::new("部署环境")).await.unwrap();
    assert!(
        cjk[0].snippet.contains(">>>部署环境<<<"),
        "{}",
        cjk[0].snippet
    );
    // The LIKE fallback shows the content around the term, unmarked.
    let like = store.search(SearchQuery::new("数据")).await.unwrap();
    assert_eq!(like[0].snippet, "部署 已完成。数据库 也准备好了");
}

async fn paging_with_limit_and_offset(t: &TestStore) {
    let store = fixture(t).await;
    for query in ["terminal", "部署"] {
        let all: Vec<i64> = store
            .search(SearchQuery::new(query))
            .await
            .unwrap()
            .iter()
            .map(|h| h.id)
            .collect();
        assert_eq!(all.len(), 2, "{query}");
        let mut paged = Vec::new();
        for offset in 0..3 {
            let mut q = SearchQuery::new(query);
            q.limit = 1;
            q.offset = offset;
            paged.extend(store.search(q).await.unwrap().iter().map(|h| h.id));
        }
        assert_eq!(paged, all, "{query}");
    }
}

async fn deleted_and_cleared_messages_leave_the_index(t: &TestStore) {
    let store = fixture(t).await;
    assert_eq!(count(store, "docker").await, 1);
    let kept = store
        .append_message(NewMessage::text("cli1", "user", "docker again"))
        .await
        .unwrap();
    let undone = store
        .append_message(NewMessage::text("cli1", "user", "docker undone"))
        .await
        .unwrap();
    assert_eq!(count(store, "docker").await, 3);
    store.truncate_messages("cli1", undone).await.unwrap();
    let hits = store.search(SearchQuery::new("docker")).await.unwrap();
    assert_eq!(hits.len(), 2);
    assert!(hits.iter().any(|h| h.id == kept));
    store.clear_messages("cli1").await.unwrap();
    assert_eq!(count(store, "docker").await, 0);
    assert_eq!(count(store, "部署").await, 2, "other sessions keep theirs");
}

// PostgreSQL only: its indexes (migration 0002) must serve the exact expressions the search
// queries use, or every search scans the whole message table.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_search_expressions_use_the_indexes() {
    use hermesd::state::postgres::{SEARCH_TEXT, SEARCH_WORDS};
    use support::store_backends::Backend;

    let t = TestStore::open(Backend::Postgres).await;
    let store = fixture(&t).await;
    let pool = store.postgres().expect("a PostgreSQL store").pool();
    let mut conn = pool.acquire().await.unwrap();
    // With so few rows a scan is cheapest; forbid it to see which indexes can serve.
    sqlx::query("SET enable_seqscan = off")
        .execute(&mut *conn)
        .await
        .unwrap();
    for (matcher, index) in [
        (
            format!("{SEARCH_WORDS} @@ to_tsquery('simple', $1)"),
            "idx_messages_search_words",
        ),
        (
            format!("{SEARCH_TEXT} ILIKE $1 ESCAPE '\\'"),
            "idx_messages_search_trigram",
        ),
    ] {
        let sql = format!("EXPLAIN SELECT msg.id FROM messages msg WHERE {matcher}");
        let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind("%部署环境%")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        let plan = plan.join("\n");
        assert!(plan.contains(index), "{index} not used:\n{plan}");
    }
}

async fn words_inside_urls_paths_and_identifiers(t: &TestStore) {
    let store = fixture(t).await;
    store
        .append_message(NewMessage::text(
            "cli1",
            "assistant",
            "See https://github.com/rust-lang/rust, mail ops@example.org; then read_file /etc/hosts",
        ))
        .await
        .unwrap();
    for query in [
        "github",
        "rust-lang",
        "example",
        "ops",
        "file",
        "read_file",
        "hosts",
        "\"etc hosts\"",
    ] {
        assert_eq!(count(store, query).await, 1, "{query}");
    }
    let hits = store.search(SearchQuery::new("github")).await.unwrap();
    assert!(
        hits[0].snippet.contains(">>>github<<<"),
        "{}",
        hits[0].snippet
    );
}

async fn diacritics_are_ignored_as_fts5_does(t: &TestStore) {
    let store = fixture(t).await;
    store
        .append_message(NewMessage::text("cli1", "user", "Un café naïf à Zürich"))
        .await
        .unwrap();
    for query in ["cafe", "CAFÉ", "naif", "zurich", "\"cafe naif\"", "zür*"] {
        assert_eq!(count(store, query).await, 1, "{query}");
    }
    let hits = store.search(SearchQuery::new("cafe")).await.unwrap();
    assert!(
        hits[0].snippet.contains(">>>café<<<"),
        "{}",
        hits[0].snippet
    );
}

async fn a_huge_message_of_many_words_is_stored_and_found(t: &TestStore) {
    let store = fixture(t).await;
    // About 2.4 MB of 300,000 different words: more than one PostgreSQL tsvector can hold.
    let words: Vec<String> = (0..300_000).map(|i| format!("w{i}")).collect();
    let huge = words.join(" ");
    let id = store
        .append_message(NewMessage::text("cli1", "tool", &huge))
        .await
        .expect("a large tool output is stored");
    let hits = store.search(SearchQuery::new("w12345")).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].id, id);
    assert!(
        hits[0].snippet.contains(">>>w12345<<<"),
        "{}",
        hits[0].snippet
    );
    let messages = store.get_messages("cli1").await.unwrap();
    let stored = messages.iter().find(|m| m.id == id).unwrap();
    assert_eq!(
        stored.content,
        Some(hermesd::state::Content::Text(huge)),
        "stored whole"
    );
}

async fn better_matches_rank_before_newer_ones(t: &TestStore) {
    let store = fixture(t).await;
    let best = store
        .append_message(NewMessage::text("cli1", "user", "zebra yak zebra"))
        .await
        .unwrap();
    let newer = store
        .append_message(NewMessage::text(
            "cli1",
            "user",
            "zebra and a long tail of unrelated words that dilute the one match it has",
        ))
        .await
        .unwrap();
    let hits = store
        .search(SearchQuery::new("zebra OR yak"))
        .await
        .unwrap();
    let order: Vec<i64> = hits.iter().map(|h| h.id).collect();
    assert_eq!(order, [best, newer]);
}
