//! Interoperability with the real Python Hermes 0.19.0: it opens and migrates a database
//! hermesd created, hermesd keeps working on the migrated file, and both agree on the FTS
//! query sanitiser and title cleaning for random inputs.

mod support;

use hermesd::state::{
    NewMessage, NewSession, SearchQuery, Store, sanitize_fts5_query, sanitize_title,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

const PY_OPEN_AND_MIGRATE: &str = r#"
import json, pathlib, sys
import hermes_state
db = hermes_state.SessionDB(db_path=pathlib.Path(sys.argv[1]))
version = db._conn.execute("SELECT version FROM schema_version").fetchone()[0]
messages = db.get_messages("s1")
out = {
    "version": version,
    "contents": [m["content"] for m in messages],
    "tool_calls": [m.get("tool_calls") for m in messages],
    "docker_hits": len(db.search_messages("docker")),
    "cjk_hits": len(db.search_messages("部署环境")),
    "by_title": db.resolve_session_by_title("Fix Docker Build"),
    "message_count": db.get_session("s1")["message_count"],
}
db.append_message("s1", "user", "written by python")
db.end_session("s1", "session_reset")
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn python_hermes_migrates_a_hermesd_database_and_hermesd_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = Store::open(&path).unwrap();
    store
        .create_session(NewSession::new("s1", "cli"))
        .await
        .unwrap();
    store
        .set_session_title("s1", Some("Fix Docker Build"))
        .await
        .unwrap();
    store
        .append_message(NewMessage::text("s1", "user", "the docker build fails"))
        .await
        .unwrap();
    let mut call = NewMessage::text("s1", "assistant", "我们需要部署环境");
    call.tool_calls = Some(json!([{"id": "c1", "type": "function",
        "function": {"name": "terminal", "arguments": "{}"}}]));
    store.append_message(call).await.unwrap();
    store.close().await;

    let py = support::python::run(
        PY_OPEN_AND_MIGRATE,
        &[path.to_str().unwrap()],
        dir.path(),
        "",
    );
    assert_eq!(
        py["version"], 22,
        "Python migrated our v11 file to its own version"
    );
    assert_eq!(
        py["contents"],
        json!(["the docker build fails", "我们需要部署环境"])
    );
    assert_eq!(py["tool_calls"][1][0]["id"], "c1");
    assert_eq!(py["docker_hits"], 1);
    assert_eq!(py["cjk_hits"], 1);
    assert_eq!(py["by_title"], "s1");
    assert_eq!(py["message_count"], 2);

    let store = Store::open(&path).unwrap();
    assert_eq!(
        store.schema().version,
        22,
        "hermesd never lowers the version"
    );
    let session = store.get_session("s1").await.unwrap().unwrap();
    assert_eq!(session.end_reason.as_deref(), Some("session_reset"));
    assert_eq!(session.message_count, 3);
    store
        .append_message(NewMessage::text("s1", "assistant", "and hermesd answers"))
        .await
        .unwrap();
    let texts: Vec<String> = store
        .get_messages("s1")
        .await
        .unwrap()
        .into_iter()
        .map(|m| {
            serde_json::to_value(m.content)
                .unwrap()
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(texts[2..], ["written by python", "and hermesd answers"]);
    assert_eq!(
        store
            .search(SearchQuery::new("python"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store
            .search(SearchQuery::new("hermesd"))
            .await
            .unwrap()
            .len(),
        1
    );
    store.close().await;

    let conn = rusqlite::Connection::open(&path).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

const PY_SANITISERS: &str = r#"
import json, sys
import hermes_state
out = []
for line in sys.stdin:
    q = json.loads(line)
    try:
        title = hermes_state.SessionDB.sanitize_title(q)
    except ValueError as e:
        title = "error: " + str(e)
    out.append({"fts": hermes_state.SessionDB._sanitize_fts5_query(q), "title": title})
print(json.dumps(out))
"#;

fn random_query(rng: &mut StdRng) -> String {
    const PIECES: &[&str] = &[
        "docker",
        "chat-send",
        "P2.2",
        "my_var",
        "a.b-c",
        "\"",
        "\"exact phrase\"",
        "AND",
        "or",
        "NOT",
        "*",
        "**",
        "foo*",
        "(",
        ")",
        "{",
        "}",
        ":",
        "^",
        "+",
        "C++",
        "部署",
        "数据库",
        "  ",
        "\t",
        "\u{200B}",
        "\u{7}",
        "x",
        "TODO:",
        "-",
        "_",
        ".",
        "日本語",
    ];
    let n = rng.random_range(0..8);
    let mut q = String::new();
    for _ in 0..n {
        q.push_str(PIECES[rng.random_range(0..PIECES.len())]);
        if rng.random_bool(0.6) {
            q.push(' ');
        }
    }
    q
}

#[test]
fn fts_sanitiser_and_title_cleaning_agree_with_python_on_random_input() {
    let seed: u64 = rand::rng().random();
    println!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut queries: Vec<String> = (0..400).map(|_| random_query(&mut rng)).collect();
    queries.push("x".repeat(120));
    let stdin: String = queries
        .iter()
        .map(|q| serde_json::to_string(q).unwrap() + "\n")
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let py = support::python::run(PY_SANITISERS, &[], dir.path(), &stdin);
    assert_eq!(py.as_array().unwrap().len(), queries.len());
    for (query, expected) in queries.iter().zip(py.as_array().unwrap()) {
        assert_eq!(
            sanitize_fts5_query(query),
            expected["fts"].as_str().unwrap(),
            "FTS sanitiser differs for {query:?}"
        );
        let ours = match sanitize_title(query) {
            Ok(t) => json!(t),
            Err(e) => json!(format!("error: {e}")),
        };
        assert_eq!(ours, expected["title"], "title differs for {query:?}");
    }
}
