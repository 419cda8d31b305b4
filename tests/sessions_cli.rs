//! `hermesd sessions …` and `hermesd run` as a user runs them: the real binary, a temporary
//! HERMES_HOME, tables by default and `--json` for scripts, one clear line on every error.

use std::path::Path;
use std::process::{Command, Output};

use hermesd::state::{NewMessage, NewSession, Store};

const HERMESD: &str = env!("CARGO_BIN_EXE_hermesd");

fn hermesd(home: &Path, args: &[&str]) -> Output {
    Command::new(HERMESD)
        .args(args)
        .env_clear()
        .env("HOME", home.join("user-home"))
        .env("HERMES_HOME", home)
        .env("HERMES_TEST_ISOLATION", "1")
        .output()
        .expect("run hermesd")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

async fn seed(db: &Path) {
    let store = Store::open(db).unwrap();
    for (id, source, model) in [
        ("20261101_100000_aaaa0001", "cli", "model-a"),
        ("20261101_110000_bbbb0002", "telegram", "model-b"),
        ("20261101_120000_bbbb0003", "telegram", "model-b"),
    ] {
        let mut s = NewSession::new(id, source);
        s.model = Some(model.into());
        store.create_session(s).await.unwrap();
        store
            .append_message(NewMessage::text(
                id,
                "user",
                &format!("question about docker {id}"),
            ))
            .await
            .unwrap();
        store
            .append_message(NewMessage::text(id, "assistant", "an answer"))
            .await
            .unwrap();
    }
    store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn list_show_search_rename_stats_export() {
    let home = tempfile::tempdir().unwrap();
    seed(&home.path().join("state.db")).await;

    let list = hermesd(home.path(), &["sessions", "list"]);
    assert!(list.status.success(), "{}", stderr(&list));
    let text = stdout(&list);
    assert!(text.starts_with("ID"), "{text}");
    assert_eq!(text.lines().count(), 4, "{text}");
    let list = hermesd(
        home.path(),
        &["sessions", "list", "--source", "cli", "--json"],
    );
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1);
    assert_eq!(rows[0]["id"], "20261101_100000_aaaa0001");
    assert!(
        rows[0]["preview"]
            .as_str()
            .unwrap()
            .starts_with("question about docker")
    );

    let show = hermesd(home.path(), &["sessions", "show", "20261101_1000"]);
    assert!(show.status.success(), "{}", stderr(&show));
    assert!(stdout(&show).contains("user: question about docker"));
    let show = hermesd(
        home.path(),
        &["sessions", "show", "20261101_100000_aaaa0001", "--json"],
    );
    let session: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(session["messages"].as_array().unwrap().len(), 2);

    let search = hermesd(
        home.path(),
        &[
            "sessions", "search", "docker", "--source", "telegram", "--json",
        ],
    );
    let hits: serde_json::Value = serde_json::from_slice(&search.stdout).unwrap();
    assert_eq!(hits.as_array().unwrap().len(), 2);
    assert!(
        hits[0]["snippet"]
            .as_str()
            .unwrap()
            .contains(">>>docker<<<")
    );

    let rename = hermesd(
        home.path(),
        &["sessions", "rename", "20261101_100000", "Docker  help"],
    );
    assert!(rename.status.success(), "{}", stderr(&rename));
    assert!(stdout(&rename).contains("\"Docker help\""));
    let clash = hermesd(
        home.path(),
        &["sessions", "rename", "20261101_110000", "Docker help"],
    );
    assert_eq!(clash.status.code(), Some(1));
    assert_eq!(
        stderr(&clash).trim(),
        "error: title \"Docker help\" already belongs to session 20261101_100000_aaaa0001"
    );

    let stats = hermesd(home.path(), &["sessions", "stats", "--json"]);
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    let models: Vec<&str> = stats
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["model"].as_str().unwrap())
        .collect();
    assert_eq!(models.len(), 2);
    assert!(models.contains(&"model-b"));

    let out = home.path().join("all.jsonl");
    let export = hermesd(
        home.path(),
        &["sessions", "export", "-o", out.to_str().unwrap()],
    );
    assert!(export.status.success(), "{}", stderr(&export));
    let lines = std::fs::read_to_string(&out).unwrap();
    assert_eq!(lines.lines().count(), 3);
    for line in lines.lines() {
        let session: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(session["messages"].as_array().unwrap().len(), 2);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_and_prune_need_explicit_intent() {
    let home = tempfile::tempdir().unwrap();
    seed(&home.path().join("state.db")).await;
    let refused = hermesd(
        home.path(),
        &["sessions", "delete", "20261101_100000_aaaa0001"],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("without --yes"),
        "{}",
        stderr(&refused)
    );
    let deleted = hermesd(
        home.path(),
        &["sessions", "delete", "20261101_100000_aaaa0001", "--yes"],
    );
    assert!(deleted.status.success(), "{}", stderr(&deleted));
    let list = hermesd(home.path(), &["sessions", "list", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2);

    // Nothing has ended, so nothing is old enough to prune.
    let prune = hermesd(
        home.path(),
        &["sessions", "prune", "--older-than", "0", "--json"],
    );
    assert!(prune.status.success(), "{}", stderr(&prune));
    assert_eq!(
        stdout(&prune).trim().replace([' ', '\n'], ""),
        "{\"deleted\":0}"
    );
    let bad = hermesd(home.path(), &["sessions", "prune", "--older-than=-1"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("--older-than"), "{}", stderr(&bad));
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_ambiguous_and_locked_are_one_clear_line() {
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("state.db");
    seed(&db).await;
    let unknown = hermesd(home.path(), &["sessions", "show", "nope"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert_eq!(
        stderr(&unknown).trim(),
        "error: no session matches \"nope\""
    );
    let ambiguous = hermesd(home.path(), &["sessions", "show", "20261101_1"]);
    assert_eq!(ambiguous.status.code(), Some(1));
    assert_eq!(
        stderr(&ambiguous).trim(),
        "error: session prefix \"20261101_1\" is ambiguous: 3 sessions match"
    );

    // Another process holds the write lock for longer than the whole retry budget.
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let locked = hermesd(home.path(), &["sessions", "rename", "20261101_100000", "x"]);
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(locked.status.code(), Some(1));
    let err = stderr(&locked);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("locked"), "{err}");
}

#[test]
fn profiles_select_their_own_database() {
    let root = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(HERMESD)
            .args(args)
            .env_clear()
            .env("HOME", root.path())
            .env("HERMES_TEST_ISOLATION", "1")
            .env("HERMES_STATE_DB_GUARD_BYPASS", "1")
            .output()
            .unwrap()
    };
    let listed = run(&["-p", "coder", "sessions", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(root.path().join(".hermes/profiles/coder/state.db").exists());
    assert!(!root.path().join(".hermes/state.db").exists());
    let bad = run(&["--profile", "Bad Name", "sessions", "list"]);
    assert_eq!(bad.status.code(), Some(78));
    assert!(
        stderr(&bad).contains("invalid profile name"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn the_test_guard_refuses_the_live_home() {
    let root = tempfile::tempdir().unwrap();
    let out = Command::new(HERMESD)
        .args(["sessions", "list"])
        .env_clear()
        .env("HOME", root.path())
        .env("HERMES_TEST_ISOLATION", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("refusing to open the live database"),
        "{}",
        stderr(&out)
    );
    assert!(!root.path().join(".hermes/state.db").exists());
}
