//! `hermesd state migrate` never writes under a running daemon and never prints a password,
//! through the real binary against a private PostgreSQL cluster: `--force` into the
//! state.db of a home a gateway holds is refused naming the daemon (pid, host, since when)
//! and leaves its rows; `--force` into a PostgreSQL database with a live instance lease is
//! refused naming the instance; a libpq `key=value` connection string works as a URL does
//! and its password, like PGPASSWORD's, never appears in the output.

mod support;

use std::path::Path;
use std::process::Output;

use fixture::populated_state_db;
use serde_json::json;
use support::daemon::{API_KEY, Daemon, api_env};
use support::fake_model::FakeModel;
use support::postgres::PgCluster;

#[path = "state_migrate/cli.rs"]
mod cli;
#[allow(dead_code)]
#[path = "state_migrate/fixture.rs"]
mod fixture;

use cli::{hermesd_with_env as hermesd, text};

async fn start_daemon(home: &Path, env: Vec<(String, String)>) -> Daemon {
    let home = home.to_path_buf();
    tokio::task::spawn_blocking(move || Daemon::start(&home, &env))
        .await
        .unwrap()
}

async fn one_turn(daemon: &Daemon) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", daemon.api_url()))
        .bearer_auth(API_KEY)
        .json(&json!({"messages": [{"role": "user", "content": "keep this conversation"}]}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_into_the_state_db_of_a_running_daemon_is_refused_naming_it() {
    let scratch = tempfile::tempdir().unwrap();
    let original = scratch.path().join("original.db");
    populated_state_db(&original, "guard").await;
    let cluster = PgCluster::start();
    let url = cluster.url();
    let filled = hermesd(
        scratch.path(),
        &[
            "state",
            "migrate",
            "--from",
            original.to_str().unwrap(),
            "--to",
            &url,
        ],
        &[],
    );
    assert_eq!(filled.status.code(), Some(0), "{}", text(&filled));

    let model = FakeModel::start().await;
    let home = scratch.path().join("home");
    let daemon = start_daemon(&home, api_env(&home, &model.base_url())).await;
    one_turn(&daemon).await;
    let state_db = home.join("state.db");
    let out = hermesd(
        &home,
        &[
            "state",
            "migrate",
            "--from",
            &url,
            "--to",
            state_db.to_str().unwrap(),
            "--force",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        format!("pid {}", daemon.pid()),
        "running since".to_owned(),
        "gateway.lock".to_owned(),
        "Stop the daemon first".to_owned(),
    ] {
        assert!(stderr.contains(&needle), "no {needle:?} in {}", text(&out));
    }
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("emptied"),
        "{}",
        text(&out)
    );
    tokio::task::block_in_place(|| daemon.terminate());
    let store = hermesd::state::Store::open(&state_db).unwrap();
    let sessions = store.recent_sessions(None, 10).await.unwrap();
    assert_eq!(sessions.len(), 1, "the daemon's conversation is gone");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_into_a_postgres_database_a_running_daemon_leases_is_refused_naming_it() {
    let scratch = tempfile::tempdir().unwrap();
    let original = scratch.path().join("original.db");
    populated_state_db(&original, "leased").await;
    let cluster = PgCluster::start();
    let url = cluster.url();

    let model = FakeModel::start().await;
    let home = scratch.path().join("home");
    let mut env = api_env(&home, &model.base_url());
    env.extend([
        ("HERMES_DATABASE_URL".to_owned(), url.clone()),
        ("HERMES__STATE__BACKEND".to_owned(), "postgres".to_owned()),
        (
            "HERMES__STATE__INSTANCE_ID".to_owned(),
            "guarded-instance".to_owned(),
        ),
    ]);
    let daemon = start_daemon(&home, env).await;
    one_turn(&daemon).await;
    let out = hermesd(
        scratch.path(),
        &[
            "state",
            "migrate",
            "--from",
            original.to_str().unwrap(),
            "--to",
            &url,
            "--force",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("in use by a running hermesd")
            && stderr.contains("instance guarded-instance")
            && stderr.contains("running since"),
        "{}",
        text(&out)
    );
    tokio::task::block_in_place(|| daemon.terminate());
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM sessions WHERE id LIKE 'api-%'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(kept, 1, "the daemon's conversation is gone");
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_value_and_pgpassword_connection_strings_are_used_and_never_printed() {
    const KV_PASSWORD: &str = "kv-pass-7731";
    const ENV_PASSWORD: &str = "env-pass-5520";
    let scratch = tempfile::tempdir().unwrap();
    let original = scratch.path().join("original.db");
    populated_state_db(&original, "dsn").await;
    let cluster = PgCluster::start();
    let leaked = |out: &Output| {
        let all = text(out);
        all.contains(KV_PASSWORD) || all.contains(ENV_PASSWORD)
    };

    // The cluster trusts local connections: the password is accepted and ignored, so the
    // key=value string works end to end.
    let key_value = format!(
        "host=127.0.0.1 port={} user=hermes password={KV_PASSWORD} dbname=postgres",
        cluster.port()
    );
    let source = original.to_str().unwrap();
    let env = [("PGPASSWORD", ENV_PASSWORD)];
    let out = hermesd(
        scratch.path(),
        &["state", "migrate", "--from", source, "--to", &key_value],
        &env,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!leaked(&out), "a password was printed:\n{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("postgres://hermes:***@127.0.0.1") && stdout.contains("verified"),
        "{}",
        text(&out)
    );

    // Failures too: nobody listens on port 1; PGPASSWORD supplies the password.
    let closed = "host=127.0.0.1 port=1 user=hermes password='kv-pass-7731' dbname=postgres \
                  connect_timeout=3";
    let without = "postgres://hermes@127.0.0.1:1/postgres?connect_timeout=3";
    for target in [closed, without] {
        let out = hermesd(
            scratch.path(),
            &["state", "migrate", "--from", source, "--to", target],
            &env,
        );
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(!leaked(&out), "a password was printed:\n{}", text(&out));
    }
}
