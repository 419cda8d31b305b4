//! Scheduled jobs shared with the Python reference (Hermes 0.19.0, `hermes cron` from its
//! venv) on one home: the Python CLI lists and pauses a job `hermesd cron add` wrote (and
//! hermesd keeps what Python added), and the running daemon picks up and delivers a job the
//! Python CLI created — both sides holding `cron/.jobs.lock` around their writes.

#[path = "cron_support/mod.rs"]
mod cron_support;
mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::path::Path;
use std::process::{Command, Output};

use cron_support::{add, cron_cli, in_seconds, jobs};

/// `hermes ARGS` from the reference venv, on `home`.
fn hermes(home: &Path, args: &[&str]) -> Output {
    let python = support::python::python();
    let bin = Path::new(&python).with_file_name("hermes");
    let out = Command::new(bin)
        .args(args)
        .env_clear()
        .env("HERMES_HOME", home)
        .env("HOME", home.join("user"))
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("NO_COLOR", "1")
        .output()
        .expect("run the Python hermes CLI");
    assert!(
        out.status.success(),
        "hermes {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_python_cli_reads_and_edits_a_job_hermesd_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let id = add(
        home,
        "every 2h",
        "check the feed",
        &[
            "--name",
            "feed",
            "--deliver",
            "telegram:42",
            "--skill",
            "news",
        ],
    );
    let listed = String::from_utf8_lossy(&hermes(home, &["cron", "list"]).stdout).to_string();
    for expected in [id.as_str(), "feed", "every 120m", "telegram:42", "news"] {
        assert!(
            listed.contains(expected),
            "{expected:?} missing from:\n{listed}"
        );
    }
    hermes(home, &["cron", "pause", &id]);
    let out = cron_cli(home, &["list", "--json"]);
    let ours: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ours[0]["enabled"], false, "{ours}");
    assert_eq!(ours[0]["state"], "paused");
    // Python's own fields on the record survive our next write.
    let before = jobs(home)[0].clone();
    assert!(cron_cli(home, &["resume", &id]).status.success());
    let after = jobs(home)[0].clone();
    for (key, value) in before.as_object().unwrap() {
        assert!(
            after.get(key).is_some(),
            "field {key} ({value}) was dropped: {after}"
        );
    }
    assert_eq!(after["enabled"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hermesd_runs_a_job_the_python_cli_created() {
    let rig = telegram_support::start("", "cron:\n  tick_seconds: 1\n", &[]).await;
    let home = rig.home.path().to_path_buf();
    let at = in_seconds(4);
    let python_home = home.clone();
    let out = tokio::task::spawn_blocking(move || {
        hermes(
            &python_home,
            &[
                "cron",
                "create",
                &at,
                "made by python",
                "--name",
                "py",
                "--deliver",
                "telegram:4242",
            ],
        )
    })
    .await
    .unwrap();
    assert!(out.status.success());
    let sent = rig.wait_sent_to(4242, 1).await;
    assert!(sent[0].text.contains("echo: made by python"), "{sent:?}");
    // The delivered text names the job; Python made its id.
    let id: String = sent[0]
        .text
        .split("scheduled job ")
        .nth(1)
        .expect("job id in the wrapper")
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    assert_eq!(id.len(), 12, "{sent:?}");
    rig.wait_for("the one-shot retired", |_| {
        (!jobs(&home).iter().any(|j| j["id"] == id.as_str())).then_some(())
    })
    .await;
    assert!(home.join("cron/output").join(&id).is_dir());
    rig.stop().await;
}
