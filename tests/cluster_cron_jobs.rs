//! Scheduled jobs belong to the cluster, not to the instance that made them (issue 28,
//! defect 8): with `state.backend: postgres` the jobs live in the shared database, so a job
//! the agent made on one instance is listed (`/cron`, `hermesd cron list`) and run by
//! another once the first is gone, and a survivor closing a dead instance's interrupted run
//! finds that job and tells its chat. A home `cron/jobs.json` the shared jobs make unused is
//! named in the log at start. Real binaries, one private PostgreSQL, the fake Bot API and the
//! fake model.

#[path = "support/cluster.rs"]
mod cluster_support;
#[path = "cron_support/mod.rs"]
mod cron_support;
mod support;

use std::time::Duration;

use cluster_support::{ClusterRig, USER, WAIT};
use cron_support::in_seconds;
use serde_json::{Value, json};
use support::fake_model::{FakeCall, Reply, Step};

/// Short leases keep failover quick in tests.
const LEASE_SECONDS: f64 = 2.0;
/// Ticks every second; no tool progress lines, so the chat holds only answers.
const SETTINGS: &str = "cron:\n  tick_seconds: 1\ndisplay:\n  tool_progress: \"off\"\n";

/// `hermesd ARGS` on instance `n`, which must succeed; its standard output.
fn cli_ok(rig: &ClusterRig, n: usize, args: &[&str]) -> String {
    let out = rig.cli(n, args);
    assert!(
        out.status.success(),
        "hermesd {args:?} on instance {n} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The jobs instance `n` lists (`hermesd cron list --json`).
fn listed(rig: &ClusterRig, n: usize) -> Vec<Value> {
    let out = cli_ok(rig, n, &["cron", "list", "--json"]);
    serde_json::from_str::<Value>(&out)
        .expect("cron list --json prints JSON")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The instance holding a `running` claim, waiting (bounded) until there is one.
async fn run_owner(rig: &ClusterRig) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    let pool = sqlx::postgres::PgPool::connect(&rig.pg.url())
        .await
        .expect("connect");
    loop {
        let owner: Option<String> = sqlx::query_scalar(
            "SELECT owner_instance FROM hermesd_cron_runs WHERE state = 'running'",
        )
        .fetch_optional(&pool)
        .await
        .expect("read the cron runs");
        if let Some(owner) = owner {
            pool.close().await;
            return owner;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run was never claimed; logs: {:#?}",
            rig.all_logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_the_agent_made_on_one_instance_is_listed_and_run_by_another() {
    let mut rig = ClusterRig::start_with(2, LEASE_SECONDS, SETTINGS).await;
    // B is down while A's agent makes the job, so A's turn makes it, on A's machine.
    rig.kill9(1);
    rig.model.push_all([
        Step::Reply(Reply {
            tool_calls: vec![FakeCall {
                id: "call-1".into(),
                name: "cronjob".into(),
                arguments: json!({"action": "create", "schedule": "every 1h",
                    "prompt": "summarise the deploy queue", "name": "deploys"})
                .to_string(),
            }],
            ..Reply::default()
        }),
        Step::text("Scheduled hourly."),
    ]);
    assert_eq!(
        rig.post(0, 1, "every hour, summarise the deploys").await,
        200
    );
    let sent = rig.wait_sent(1).await;
    assert!(sent[0].text.starts_with("Scheduled hourly"), "{sent:#?}");

    // B's home still has a jobs file from before the move: it must not be read, and it is
    // named at start.
    let stale = rig.instances[1].home.path().join("cron/jobs.json");
    std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
    std::fs::write(
        &stale,
        r#"{"jobs": [{"id": "0123456789ab", "name": "stale", "prompt": "old",
            "schedule": {"kind": "interval", "minutes": 60, "display": "every 60m"},
            "enabled": true, "deliver": "local"}], "updated_at": "2026-01-01T00:00:00+00:00"}"#,
    )
    .unwrap();
    rig.restart(1).await;
    rig.kill9(0);

    // B lists it, in the chat and on its machine's command line; not the stale one.
    assert_eq!(rig.post(1, 2, "/cron").await, 200);
    let sent = rig.wait_sent(2).await;
    assert!(sent[1].text.contains("deploys"), "{sent:#?}");
    let jobs = listed(&rig, 1);
    let names: Vec<&str> = jobs.iter().filter_map(|j| j["name"].as_str()).collect();
    assert_eq!(names, ["deploys"], "{jobs:#?}");
    assert_eq!(jobs[0]["origin"]["chat_id"], USER.to_string());

    // B runs it now and delivers to the chat it was made in.
    cli_ok(&rig, 1, &["cron", "run", "deploys"]);
    let sent = rig.wait_sent(3).await;
    assert!(
        sent[2].text.contains("echo: summarise the deploy queue"),
        "{sent:#?}"
    );
    assert_eq!(
        rig.count("SELECT count(*) FROM hermesd_cron_runs WHERE owner_instance = 'i1'")
            .await,
        1
    );
    // B named its unused home copy at start.
    let warned = rig.instances[1].daemon().logs().into_iter().any(|line| {
        line.contains("differs from the jobs in the shared database")
            && line.contains(&stale.display().to_string())
    });
    assert!(
        warned,
        "the unused home copy is named: {:#?}",
        rig.all_logs()
    );
    // Nothing about the job was written to either home's jobs file.
    assert!(!rig.instances[0].home.path().join("cron/jobs.json").exists());
    assert!(std::fs::read_to_string(&stale).unwrap().contains("stale"));
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_survivor_closing_a_run_of_a_job_made_elsewhere_finds_the_job() {
    let mut rig = ClusterRig::start_with(2, LEASE_SECONDS, SETTINGS).await;
    // The model holds the run's step: the run is under way when its instance dies.
    let (held, _gate) = Step::gated("never delivered: its instance dies");
    rig.model.push(held);
    // Made on A's machine only; due in a few seconds.
    let out = cli_ok(
        &rig,
        0,
        &[
            "cron",
            "add",
            &in_seconds(3),
            "rotate the on-call roster",
            "--name",
            "roster",
            "--deliver",
            &format!("telegram:{USER}"),
        ],
    );
    assert!(out.contains("roster"), "{out}");

    rig.model.wait_for_requests(1, WAIT).await;
    let owner = run_owner(&rig).await;
    let victim = rig
        .instances
        .iter()
        .position(|i| i.name == owner)
        .expect("a known instance");
    rig.kill9(victim);

    // Whichever instance ran it, the survivor knows the job: the notice names it and goes
    // to its chat.
    let sent = rig.wait_sent(1).await;
    assert!(
        sent[0].text.contains("'roster' was interrupted"),
        "the notice: {sent:#?}"
    );
    assert_eq!(
        rig.count("SELECT count(*) FROM hermesd_cron_runs WHERE state = 'interrupted'")
            .await,
        1
    );
    rig.stop().await;
}
