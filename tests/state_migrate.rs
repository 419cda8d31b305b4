//! `hermesd state migrate` and `state verify` through the real binary, against a private
//! PostgreSQL cluster: a round trip state.db → PostgreSQL → state.db that Hermes 0.19 opens,
//! resuming an interrupted copy, refusing a foreign target, detecting a changed row, and never
//! printing the URL's password.

mod support;

use std::path::Path;
use std::process::Command;

use fixture::{dump, populated_state_db, row_count};
use hermesd::state::{NewMessage, NewSession, Store};
use support::postgres::PgCluster;

#[path = "state_migrate/cli.rs"]
mod cli;
#[path = "state_migrate/fixture.rs"]
mod fixture;

use cli::*;

/// A populated state.db, a path for the copy back, and a cluster to copy through.
struct Rig {
    dir: tempfile::TempDir,
    original: std::path::PathBuf,
    back: std::path::PathBuf,
    cluster: PgCluster,
    url: String,
}

impl Rig {
    async fn new(tag: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let original = dir.path().join("original.db");
        populated_state_db(&original, tag).await;
        let cluster = PgCluster::start();
        Self {
            back: dir.path().join("back.db"),
            original,
            url: url_with_password(&cluster),
            cluster,
            dir,
        }
    }

    fn home(&self) -> &Path {
        self.dir.path()
    }
}

const PY_READ_BACK: &str = r#"
import json, pathlib, sys
import hermes_state
db = hermes_state.SessionDB(db_path=pathlib.Path(sys.argv[1]))
tag = sys.argv[2]
parent = db.get_session("z-parent-" + tag)
messages = db.get_messages("z-parent-" + tag)
out = {
    "title": parent["title"],
    "input_tokens": parent["input_tokens"],
    "end_reason": parent["end_reason"],
    "child_parent": db.get_session("a-child-" + tag)["parent_session_id"],
    "contents": [m["content"] for m in messages],
    "child_messages": len(db.get_messages("a-child-" + tag)),
    "docker_hits": len(db.search_messages("docker")),
    "cjk_hits": len(db.search_messages("部署环境")),
    "by_title": db.resolve_session_by_title("部署 Docker " + tag),
}
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_state_db_goes_to_postgres_and_back_unchanged_and_hermes_reads_the_result() {
    let rig = Rig::new("rt").await;
    let (home, original, back, url) = (rig.home(), &rig.original, &rig.back, &rig.url);
    let cluster = &rig.cluster;

    // Small batches so every table takes several (and keys continue across batches).
    let out = migrate(
        home,
        original.to_str().unwrap(),
        url,
        &["--batch-size", "2"],
    );
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("verified"), "{}", text(&out));
    assert!(
        stdout.contains("hermesd_leases"),
        "the tables only PostgreSQL has are noted: {}",
        text(&out)
    );

    let pool = pg(cluster).await;
    // Structured content ("\0json:" + JSON in state.db) is stored in the PostgreSQL backend's
    // escaped form, since PostgreSQL text cannot hold U+0000.
    let stored: String =
        sqlx::query_scalar("SELECT content FROM messages WHERE session_id = 'a-child-rt'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(stored.starts_with("\u{FFFF}0json:["), "{stored:?}");
    // New messages on PostgreSQL get ids past the copied ones.
    let max: i64 = sqlx::query_scalar("SELECT max(id) FROM messages")
        .fetch_one(&pool)
        .await
        .unwrap();
    let next: i64 = sqlx::query_scalar(
        "INSERT INTO messages (session_id, role, content, timestamp) \
         VALUES ('a-child-rt', 'user', 'x', 1) RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        next > max,
        "the id sequence was advanced past {max}, got {next}"
    );
    sqlx::query("DELETE FROM messages WHERE id = $1")
        .bind(next)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let out = migrate(home, url, back.to_str().unwrap(), &["--batch-size", "3"]);
    assert_exit(&out, 0);
    let (before, after) = (dump(original), dump(back));
    assert_eq!(row_count(&before, "messages"), 10);
    assert_eq!(row_count(&before, "hermesd_reply_edits"), 1);
    assert_eq!(row_count(&before, "hermesd_cron_runs"), 1);
    assert_eq!(
        before, after,
        "every copied table is equal after the round trip"
    );

    let py = support::python::run(PY_READ_BACK, &[back.to_str().unwrap(), "rt"], home, "");
    assert_eq!(py["title"], "部署 Docker rt");
    assert_eq!(py["input_tokens"], 1234);
    assert_eq!(py["end_reason"], "compression");
    assert_eq!(py["child_parent"], "z-parent-rt");
    assert_eq!(py["contents"][7], "我们需要部署环境");
    assert_eq!(py["contents"][0], "the docker build fails #0 😀");
    assert_eq!(py["child_messages"], 1);
    assert_eq!(py["docker_hits"], 7, "the FTS index was filled: {py}");
    assert_eq!(py["cjk_hits"], 1, "{py}");
    assert_eq!(py["by_title"], "z-parent-rt");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_migration_is_continued_by_running_it_again() {
    let rig = Rig::new("resume").await;
    let (home, original, back, url) = (rig.home(), &rig.original, &rig.back, &rig.url);
    let cluster = &rig.cluster;
    let args = ["--batch-size", "2", "--max-batches", "3"];

    let out = migrate(home, original.to_str().unwrap(), url, &args);
    assert_exit(&out, 75);
    let pool = pg(cluster).await;
    assert_eq!(
        (
            count(&pool, "sessions").await,
            count(&pool, "messages").await
        ),
        (2, 4),
        "three batches of two rows landed"
    );
    // Again: a partial copy of the same source needs no --force.
    let out = migrate(home, original.to_str().unwrap(), url, &args);
    assert_exit(&out, 75);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("continuing"),
        "{}",
        text(&out)
    );
    assert_eq!(count(&pool, "messages").await, 10);
    pool.close().await;
    let out = migrate(
        home,
        original.to_str().unwrap(),
        url,
        &["--batch-size", "2"],
    );
    assert_exit(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("verified"),
        "{}",
        text(&out)
    );

    // And back, interrupted the same way.
    let out = migrate(
        home,
        url,
        back.to_str().unwrap(),
        &["--batch-size", "4", "--max-batches", "2"],
    );
    assert_exit(&out, 75);
    let out = migrate(home, url, back.to_str().unwrap(), &["--batch-size", "4"]);
    assert_exit(&out, 0);
    assert_eq!(dump(original), dump(back));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_non_empty_target_is_refused_unless_forced_and_a_changed_row_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let (first, second) = (home.join("first.db"), home.join("second.db"));
    populated_state_db(&first, "one").await;
    populated_state_db(&second, "two").await;
    let cluster = PgCluster::start();
    let url = url_with_password(&cluster);
    assert_exit(&migrate(home, first.to_str().unwrap(), &url, &[]), 0);

    let out = migrate(home, second.to_str().unwrap(), &url, &[]);
    assert_exit(&out, 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--force") && stderr.contains("sessions (2 rows)"),
        "{}",
        text(&out)
    );
    // Nothing was touched: the first copy still verifies.
    assert_exit(&verify(home, &first, &url), 0);
    // A state.db target with other data is refused too, and --force replaces its data.
    let third = home.join("third.db");
    populated_state_db(&third, "three").await;
    let out = migrate(home, &url, third.to_str().unwrap(), &[]);
    assert_exit(&out, 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--force"),
        "{}",
        text(&out)
    );
    assert_exit(
        &migrate(home, &url, third.to_str().unwrap(), &["--force"]),
        0,
    );
    assert_eq!(dump(&third), dump(&first));

    let out = migrate(home, second.to_str().unwrap(), &url, &["--force"]);
    assert_exit(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("emptied"),
        "{}",
        text(&out)
    );
    assert_exit(&verify(home, &second, &url), 0);

    // `postgres` stands for the configured database: HERMES_DATABASE_URL, else
    // state.postgres_url.
    let second_db = second.to_str().unwrap();
    let by_word = ["state", "verify", "--from", second_db, "--to", "postgres"];
    let out = hermesd_with_env(home, &by_word, &[("HERMES_DATABASE_URL", url.as_str())]);
    assert_exit(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("postgres://hermes:***@127.0.0.1"),
        "{}",
        text(&out)
    );
    std::fs::write(
        home.join("config.yaml"),
        format!("state:\n  postgres_url: \"{url}\"\n"),
    )
    .unwrap();
    assert_exit(&hermesd(home, &by_word), 0);

    // One changed character in one row is found, and the table named.
    let pool = pg(&cluster).await;
    sqlx::query(
        "UPDATE messages SET content = content || '.' WHERE id = (SELECT min(id) FROM messages)",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let out = verify(home, &second, &url);
    assert_exit(&out, 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("differ in: messages"), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_gets_a_clear_error_without_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let source = home.join("bad.db");
    populated_state_db(&source, "bad").await;
    // A BLOB (state.db's dynamic typing allows one anywhere) has no lossless place in a text
    // column: the copy stops naming the table, the row and the column.
    {
        let conn = rusqlite::Connection::open(&source).unwrap();
        conn.execute("UPDATE messages SET content = x'00ff' WHERE id = 3", [])
            .unwrap();
    }
    let cluster = PgCluster::start();
    let url = url_with_password(&cluster);
    let out = migrate(home, source.to_str().unwrap(), &url, &[]);
    assert_exit(&out, 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("table messages")
            && stderr.contains("id=3")
            && stderr.contains("column content")
            && stderr.contains("BLOB"),
        "{}",
        text(&out)
    );

    // A database without hermesd's schema is no source, and no target file is left behind.
    let pool = pg(&cluster).await;
    sqlx::query("CREATE DATABASE unrelated")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let unrelated = url.replace("/postgres", "/unrelated");
    let never = home.join("never.db");
    let out = migrate(home, &unrelated, never.to_str().unwrap(), &[]);
    assert_exit(&out, 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no table sessions"),
        "{}",
        text(&out)
    );
    assert!(
        !never.exists(),
        "a refused migration created {}",
        never.display()
    );

    // Two state.db files, or two URLs: one side must be PostgreSQL.
    let out = migrate(
        home,
        source.to_str().unwrap(),
        home.join("x.db").to_str().unwrap(),
        &[],
    );
    assert_exit(&out, 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("exactly one"),
        "{}",
        text(&out)
    );
    // A database nobody listens on.
    let closed = format!("postgres://hermes:{PASSWORD}@127.0.0.1:1/postgres");
    let out = migrate(home, source.to_str().unwrap(), &closed, &[]);
    assert_exit(&out, 1);
    // `postgres` names the configured database; none is configured here.
    let out = migrate(home, source.to_str().unwrap(), "postgres", &[]);
    assert_exit(&out, 78);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("HERMES_DATABASE_URL"),
        "{}",
        text(&out)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_migration_killed_mid_copy_is_finished_by_the_next_run() {
    const MESSAGES: usize = 1500;
    let dir = tempfile::tempdir().unwrap();
    let (home, original) = (dir.path(), dir.path().join("original.db"));
    let store = Store::open(&original).unwrap();
    store
        .create_session(NewSession::new("big", "cli"))
        .await
        .unwrap();
    for i in 0..MESSAGES {
        store
            .append_message(NewMessage::text("big", "user", &format!("message {i}")))
            .await
            .unwrap();
    }
    store.close().await;
    let cluster = PgCluster::start();
    let url = url_with_password(&cluster);

    // One row per transaction, so the copy is still running when it is killed.
    let mut child = Command::new(support::daemon::daemon_binary())
        .args(["--home", home.to_str().unwrap(), "state", "migrate"])
        .args(["--from", original.to_str().unwrap(), "--to", &url])
        .args(["--batch-size", "1"])
        .env("HERMES_TEST_ISOLATION", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pool = pg(&cluster).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    // The messages table exists once the schema is migrated; wait for the first copied row.
    while sqlx::query_scalar::<_, i64>("SELECT count(*) FROM messages")
        .fetch_one(&pool)
        .await
        .unwrap_or(0)
        == 0
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no message was copied in time"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let partial = count(&pool, "messages").await;
    assert!(
        partial > 0 && (partial as usize) < MESSAGES,
        "killed mid-copy: {partial} of {MESSAGES} rows"
    );

    let out = migrate(home, original.to_str().unwrap(), &url, &[]);
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("continuing") && stdout.contains("verified"),
        "{}",
        text(&out)
    );
    assert_eq!(count(&pool, "messages").await as usize, MESSAGES);
    pool.close().await;
}
