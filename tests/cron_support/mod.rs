//! What the scheduled-job tests share: `hermesd cron …` run on a rig's home, timestamps a few
//! seconds ahead, and reads of `cron/jobs.json`. Included with `#[path]`.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::daemon::{HERMESD, base_env};

/// Runs `hermesd cron ARGS` on `home` with the test environment (the rig's bot token too:
/// the CLI reads the same configuration as the daemon, which must be valid).
pub fn cron_cli(home: &Path, args: &[&str]) -> Output {
    Command::new(HERMESD)
        .arg("cron")
        .args(args)
        .env_clear()
        .envs(base_env(home))
        .env("TELEGRAM_BOT_TOKEN", fake_telegram::TOKEN)
        .output()
        .expect("run hermesd cron")
}

/// An ISO timestamp `seconds` from now, in UTC.
pub fn in_seconds(seconds: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(seconds))
        .format("%Y-%m-%dT%H:%M:%S+00:00")
        .to_string()
}

/// The jobs in `home`'s jobs file.
pub fn jobs(home: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(home.join("cron/jobs.json")).expect("jobs.json");
    let doc: Value = serde_json::from_str(&text).expect("jobs.json is JSON");
    doc["jobs"].as_array().cloned().unwrap_or_default()
}

/// Adds a job through the CLI; returns its id.
pub fn add(home: &Path, schedule: &str, prompt: &str, extra: &[&str]) -> String {
    let mut args = vec!["add", schedule, prompt, "--json"];
    args.extend_from_slice(extra);
    let out = cron_cli(home, &args);
    assert!(
        out.status.success(),
        "cron add failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job: Value = serde_json::from_slice(&out.stdout).expect("cron add --json prints the job");
    job["id"].as_str().expect("id").to_owned()
}
