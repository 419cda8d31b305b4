//! A cron job's `workdir` stays inside the walls (issue 27, point 4), through the real
//! binary: the `cronjob` tool refuses a workdir outside the turn's allowed roots (the attack
//! was `workdir: "/"`, which let the run's file tools read anything), and a job stored with
//! such a workdir before this rule is not run but answered with a notice. The operator's
//! `hermesd cron add --workdir` is trusted with any existing directory and says so in the job.

#[path = "cron_support/mod.rs"]
mod cron_support;
mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, MessageSpec, User};
use serde_json::{Value, json};
use support::fake_model::{Reply, Step};
use telegram_support::start;

use cron_support::{add, cron_cli, in_seconds, jobs};

const FAST: &str = "cron:\n  tick_seconds: 1\n";
const DM: i64 = 7;
const CHAT: i64 = 4242;

fn jobs_or_none(home: &std::path::Path) -> Vec<Value> {
    if home.join("cron/jobs.json").exists() {
        jobs(home)
    } else {
        Vec::new()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cronjob_tool_refuses_a_workdir_outside_the_allowed_roots() {
    let rig = start("", FAST, &[]).await;
    let home = rig.home.path().to_path_buf();
    rig.model.push(Step::Reply(Reply::tool_call(
        "cronjob",
        json!({
            "action": "create",
            "schedule": in_seconds(3600),
            "prompt": "read /etc/hostname with read_file",
            "workdir": "/",
        }),
    )));
    rig.model.push(Step::text("scheduled"));
    rig.telegram.push_message(MessageSpec::text(
        Chat::private(DM),
        User::new(7, "Bob"),
        "schedule it",
    ));
    rig.wait_for("the turn's reply", |rig| {
        rig.sent_to(DM)
            .into_iter()
            .find(|m| m.text.contains("scheduled"))
    })
    .await;
    let requests = rig.model.requests();
    let tool_result = requests[1].body["messages"].to_string();
    assert!(
        tool_result.contains("the job was not created")
            && tool_result.contains("lies outside the directories the agent may use"),
        "{tool_result}"
    );
    assert!(
        jobs_or_none(&home).is_empty(),
        "no job was stored: {:?}",
        jobs_or_none(&home)
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_job_with_a_workdir_outside_the_roots_is_not_run_but_reported() {
    let mut rig = start("", FAST, &[]).await;
    let home = rig.home.path().to_path_buf();
    rig.stop_daemon().await;
    add(
        &home,
        &in_seconds(2),
        "list the files here",
        &["--deliver", &format!("telegram:{CHAT}")],
    );
    // A job stored by an older version, or edited by anyone but the operator's CLI: a
    // workdir outside every root and no operator mark.
    let path = home.join("cron/jobs.json");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["jobs"][0]["workdir"] = json!("/");
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    rig.start_daemon().await;

    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert!(
        sent[0].text.contains("failed") && sent[0].text.contains("workdir"),
        "the chat is told why: {sent:?}"
    );
    assert!(
        !rig.model.requests().iter().any(|r| r.body["messages"]
            .to_string()
            .contains("list the files here")),
        "the job never reached the model"
    );
    rig.stop().await;
}

#[test]
fn cron_add_trusts_the_operator_with_any_existing_directory_and_marks_the_job() {
    let home = tempfile::tempdir().unwrap();
    let missing = cron_cli(
        home.path(),
        &["add", "30m", "x", "--workdir", "/no/such/dir/anywhere"],
    );
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("is not an existing directory"), "{stderr}");

    let outside = tempfile::tempdir().unwrap();
    let outside_dir = outside.path().display().to_string();
    add(home.path(), "30m", "x", &["--workdir", &outside_dir]);
    let stored = jobs(home.path());
    assert_eq!(stored[0]["workdir"], outside_dir.as_str());
    assert_eq!(stored[0]["workdir_set_by"], "operator", "{stored:?}");
}
