//! Schema compatibility with the Python Hermes: exactly the seed's v11 layout when we create
//! the file, and a database migrated by a newer Hermes keeps working untouched.

use std::collections::BTreeSet;
use std::path::Path;

use hermesd::state::{NewMessage, NewSession, SearchQuery, Store};
use rusqlite::Connection;

fn names(conn: &Connection, kind: &str) -> BTreeSet<String> {
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = ?1 AND name NOT LIKE 'sqlite_%'")
        .unwrap();
    stmt.query_map([kind], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn columns(conn: &Connection, table: &str) -> Vec<String> {
    let mut stmt = conn
        .prepare(&format!("PRAGMA table_info({table})"))
        .unwrap();
    stmt.query_map([], |r| r.get(1))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

async fn create_and_close(path: &Path) {
    let store = Store::open(path).unwrap();
    store
        .create_session(NewSession::new("s", "cli"))
        .await
        .unwrap();
    store
        .append_message(NewMessage::text("s", "user", "hello world"))
        .await
        .unwrap();
    store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_database_has_exactly_the_seed_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    create_and_close(&path).await;
    let conn = Connection::open(&path).unwrap();

    let fts_shadow = ["config", "content", "data", "docsize", "idx"];
    let mut expected: BTreeSet<String> = ["sessions", "messages", "state_meta", "schema_version"]
        .into_iter()
        .map(String::from)
        .collect();
    for fts in ["messages_fts", "messages_fts_trigram"] {
        expected.insert(fts.into());
        for suffix in fts_shadow {
            expected.insert(format!("{fts}_{suffix}"));
        }
    }
    assert_eq!(names(&conn, "table"), expected);

    assert_eq!(
        columns(&conn, "sessions"),
        [
            "id",
            "source",
            "user_id",
            "model",
            "model_config",
            "system_prompt",
            "parent_session_id",
            "started_at",
            "ended_at",
            "end_reason",
            "message_count",
            "tool_call_count",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
            "billing_provider",
            "billing_base_url",
            "billing_mode",
            "estimated_cost_usd",
            "actual_cost_usd",
            "cost_status",
            "cost_source",
            "pricing_version",
            "title",
            "api_call_count"
        ]
    );
    assert_eq!(
        columns(&conn, "messages"),
        [
            "id",
            "session_id",
            "role",
            "content",
            "tool_call_id",
            "tool_calls",
            "tool_name",
            "timestamp",
            "token_count",
            "finish_reason",
            "reasoning",
            "reasoning_content",
            "reasoning_details",
            "codex_reasoning_items",
            "codex_message_items"
        ]
    );
    let triggers: Vec<String> = names(&conn, "trigger").into_iter().collect();
    assert_eq!(
        triggers,
        [
            "messages_fts_delete",
            "messages_fts_insert",
            "messages_fts_trigram_delete",
            "messages_fts_trigram_insert",
            "messages_fts_trigram_update",
            "messages_fts_update"
        ]
    );
    let indexes = names(&conn, "index");
    for index in [
        "idx_sessions_source",
        "idx_sessions_parent",
        "idx_sessions_started",
        "idx_messages_session",
        "idx_messages_session_id",
        "idx_sessions_title_unique",
    ] {
        assert!(indexes.contains(index), "missing {index}");
    }
    let version: i64 = conn
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 11);
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 1);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_from_a_newer_hermes_opens_and_keeps_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    create_and_close(&path).await;
    {
        // What Hermes 0.19 adds: more columns (some NOT NULL with defaults), more tables,
        // version 22, and compacted (inactive) rows.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "ALTER TABLE sessions ADD COLUMN session_key TEXT;
             ALTER TABLE sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE messages ADD COLUMN platform_message_id TEXT;
             ALTER TABLE messages ADD COLUMN active INTEGER NOT NULL DEFAULT 1;
             ALTER TABLE messages ADD COLUMN compacted INTEGER NOT NULL DEFAULT 0;
             CREATE TABLE gateway_routing(scope TEXT NOT NULL DEFAULT '', session_key TEXT NOT NULL,
                 entry_json TEXT NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (scope, session_key));
             INSERT INTO gateway_routing VALUES ('', 'k', '{}', 1);
             UPDATE schema_version SET version = 22;
             INSERT INTO messages (session_id, role, content, timestamp, active, compacted)
                 VALUES ('s', 'user', 'compacted away', 2, 0, 0);",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema().version, 22, "never lowers the version");
    store
        .append_message(NewMessage::text("s", "assistant", "still works"))
        .await
        .unwrap();
    let messages = store.get_messages("s").await.unwrap();
    let texts: Vec<String> = messages
        .iter()
        .map(|m| {
            serde_json::to_value(&m.content)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        texts,
        ["hello world", "still works"],
        "inactive rows hidden"
    );
    let hits = store.search(SearchQuery::new("works")).await.unwrap();
    assert_eq!(hits.len(), 1);
    store.close().await;

    let conn = Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 22);
    let routing: i64 = conn
        .query_row("SELECT count(*) FROM gateway_routing", [], |r| r.get(0))
        .unwrap();
    assert_eq!(routing, 1, "unknown tables are kept");
    assert!(columns(&conn, "sessions").contains(&"archived".to_owned()));
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_utf8_written_by_another_program_reads_back_lossily() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    create_and_close(&path).await;
    {
        let conn = Connection::open(&path).unwrap();
        // A lone surrogate encoded CESU-style (ED A0 80) is not valid UTF-8.
        conn.execute(
            "INSERT INTO messages (session_id, role, content, timestamp)
             VALUES ('s', 'user', CAST(X'61EDA08062' AS TEXT), 3)",
            [],
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let messages = store.get_messages("s").await.unwrap();
    let last = serde_json::to_value(&messages.last().unwrap().content).unwrap();
    assert!(last.as_str().unwrap().starts_with('a'));
    assert!(last.as_str().unwrap().contains('\u{FFFD}'));
    store.recent_sessions(None, 5).await.unwrap();
}
