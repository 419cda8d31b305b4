//! The `hermesd state` command line as the migration tests run it, and the PostgreSQL side's
//! checks.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use crate::support::postgres::PgCluster;

pub const PASSWORD: &str = "pw-s3cret-9f2";

pub fn hermesd(home: &Path, args: &[&str]) -> Output {
    hermesd_with_env(home, args, &[])
}

pub fn hermesd_with_env(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(crate::support::daemon::daemon_binary())
        .arg("--home")
        .arg(home)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.join("user-home"))
        .env("HERMES_TEST_ISOLATION", "1")
        .envs(env.iter().copied())
        .output()
        .expect("run hermesd")
}

pub fn text(output: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

pub fn migrate(home: &Path, from: &str, to: &str, extra: &[&str]) -> Output {
    let mut args = vec!["state", "migrate", "--from", from, "--to", to];
    args.extend_from_slice(extra);
    hermesd(home, &args)
}

pub fn verify(home: &Path, state_db: &Path, url: &str) -> Output {
    let state_db = state_db.to_str().unwrap();
    hermesd(home, &["state", "verify", "--from", state_db, "--to", url])
}

pub fn assert_exit(output: &Output, code: i32) {
    assert_eq!(output.status.code(), Some(code), "{}", text(output));
    assert!(
        !text(output).contains(PASSWORD),
        "the password leaked:\n{}",
        text(output)
    );
}

/// The cluster's URL with a password in it (trust authentication ignores it; it is here to
/// prove it is never printed).
pub fn url_with_password(cluster: &PgCluster) -> String {
    format!(
        "postgres://hermes:{PASSWORD}@127.0.0.1:{}/postgres",
        cluster.port()
    )
}

pub async fn count(pool: &sqlx::PgPool, table: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
        .fetch_one(pool)
        .await
        .unwrap()
}

pub async fn pg(cluster: &PgCluster) -> sqlx::PgPool {
    sqlx::PgPool::connect(&cluster.url())
        .await
        .expect("connect")
}
