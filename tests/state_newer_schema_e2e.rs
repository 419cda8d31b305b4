//! The real `hermesd` binary on a home from the newest published Hermes (schema v31) that also
//! carries Hermes's optional CJK index, whose tokenizer hermesd cannot load: turns through the
//! HTTP API, a resumed turn with the same stored prompt, then `sessions search`, `rename` and
//! `delete`; the v31 Python code reads everything back.

mod support;

#[path = "state_newer_schema/fixture.rs"]
mod fixture;

use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::daemon::{API_KEY, Daemon, api_env, cli as hermesd};
use support::fake_model::FakeModel;

fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Two API turns on session `id` with the daemon restarted between them (the second resumes
/// from the store alone), then `sessions search`, `rename` and `delete` (of Python's session
/// `py1`) through the CLI. Returns the system prompt the model saw (the same both times) and
/// the first daemon's log lines.
async fn exercise(home: &std::path::Path, id: &str) -> (Value, Vec<String>) {
    let model = FakeModel::start().await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut logs = Vec::new();
    for text in ["deploy the docker stack", "and again, 再部署一次"] {
        let daemon = Daemon::start(home, &api_env(home, &model.base_url()));
        let response = client
            .post(format!("{}/v1/chat/completions", daemon.api_url()))
            .bearer_auth(API_KEY)
            .header("X-Hermes-Session-Id", id)
            .json(&json!({"model": "hermes-agent",
                           "messages": [{"role": "user", "content": text}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
        let (_, lines) = daemon.terminate();
        if logs.is_empty() {
            logs = lines;
        }
    }
    let requests = model.requests();
    let system = |i: usize| requests[i].body["messages"][0]["content"].clone();
    assert_eq!(
        system(0),
        system(1),
        "the resumed turn sends the stored prompt"
    );
    let found = ok(hermesd(home, &["sessions", "search", "docker", "--json"]));
    assert!(found.contains(id), "{found}");
    ok(hermesd(home, &["sessions", "rename", id, "Docker deploy"]));
    ok(hermesd(home, &["sessions", "delete", "py1", "--yes"]));
    (system(0), logs)
}

/// The one start-up line about a newer Hermes's file (a JSON log record).
fn newer_schema_note(logs: &[String]) -> Value {
    let notes: Vec<&String> = logs
        .iter()
        .filter(|l| l.contains("written by a newer Hermes"))
        .collect();
    assert_eq!(notes.len(), 1, "one start-up note: {logs:#?}");
    serde_json::from_str(notes[0]).expect("a JSON log line")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_resume_rename_delete_and_search_on_a_v31_home_with_an_unloadable_index() {
    let home = tempfile::tempdir().unwrap();
    let path = fixture::make_v31(home.path(), true);
    let (prompt, logs) = exercise(home.path(), "v31-chat").await;
    let note = newer_schema_note(&logs);
    assert_eq!(note["schema_version"], 31, "{note}");
    assert!(
        note["writes"].as_str().unwrap().contains("prompts by hash")
            && note["cjk_index"].as_str().unwrap().starts_with("stale"),
        "{note}"
    );

    let py = fixture::read_v31(&path, "v31-chat");
    assert_eq!(py["system_prompt"], prompt, "{py}");
    assert_eq!(py["title"], "Docker deploy");
    assert_eq!(py["title_source"], "user", "a rename is the user's title");
    assert_eq!(py["created_source"], "api_server");
    assert_eq!(py["messages"][0], "deploy the docker stack");
    assert_eq!(py["messages"].as_array().unwrap().len(), 4, "{py}");
    let usage = py["usage"].as_array().unwrap();
    assert_eq!(usage.len(), 1, "{py}");
    assert_eq!(usage[0]["api_call_count"], 2);
    assert_eq!(usage[0]["input_tokens"], py["input_tokens"]);
    assert_eq!(
        py["fts"],
        json!({"messages_fts": "ok", "messages_fts_trigram": "ok"})
    );
    assert_eq!(py["py1_prompt"], Value::Null, "py1 was deleted");
    assert_eq!(fixture::cjk_stale(&path).as_deref(), Some("1"));
    // A Hermes that has the tokenizer rebuilds the index from scratch (its rule for a stale
    // one), the index passes its integrity check and finds hermesd's CJK turn.
    let cjk = fixture::rebuild_cjk(&path, "部署");
    assert_eq!(cjk["stale_before"], "1", "{cjk}");
    assert_eq!(cjk["stale_after"], Value::Null, "{cjk}");
    assert_eq!(cjk["check"], "ok", "{cjk}");
    assert_eq!(cjk["served"], true, "{cjk}");
    assert_eq!(cjk["hits"], json!(["v31-chat"]), "{cjk}");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let empty: i64 = conn
        .query_row(
            "SELECT count(*) FROM sessions s WHERE NOT EXISTS
                 (SELECT 1 FROM messages m WHERE m.session_id = s.id)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(empty, 0, "no failed turn left an empty session row");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_resume_rename_delete_and_search_on_a_home_from_hermes_0_19() {
    let home = tempfile::tempdir().unwrap();
    let path = fixture::make_v22(home.path());
    let (prompt, logs) = exercise(home.path(), "v22-chat").await;
    let note = newer_schema_note(&logs);
    assert_eq!(note["schema_version"], 22, "{note}");
    assert_eq!(note["writes"], "per-model usage", "{note}");
    let py = fixture::read_v22(&path, "v22-chat");
    assert_eq!(py["version"], 22);
    assert_eq!(py["system_prompt"], prompt, "{py}");
    assert_eq!(py["inline_prompt"], prompt, "0.19 keeps prompts inline");
    assert_eq!(py["title"], "Docker deploy");
    assert_eq!(py["messages"].as_array().unwrap().len(), 4, "{py}");
    let usage = py["usage"].as_array().unwrap();
    assert_eq!(usage.len(), 1, "{py}");
    assert_eq!(usage[0]["api_call_count"], 2);
    assert_eq!(usage[0]["input_tokens"], py["input_tokens"]);
    assert_eq!(py["py1"], Value::Null, "py1 was deleted");
    assert_eq!(
        py["fts"],
        json!({"messages_fts": "ok", "messages_fts_trigram": "ok"})
    );
}
