//! Scheduled runs across instances on one PostgreSQL database, through the real binary: a
//! job (added once: the instances share their jobs) runs on one of them; when that instance is killed
//! mid-run, a survivor notices within the lease time (not only at a restart), closes the run
//! as interrupted and sends the notice exactly once (with two survivors too), and nobody
//! runs the job again.

#[path = "support/cluster.rs"]
mod cluster_support;
#[path = "cron_support/mod.rs"]
mod cron_support;
mod support;

use std::time::Duration;

use cluster_support::{ClusterRig, USER, WAIT};
use cron_support::in_seconds;
use support::fake_model::Step;

/// Short leases keep failover quick in tests.
const LEASE_SECONDS: f64 = 2.0;
/// Ticks every second, so the job is seen as due at once.
const FAST_TICKS: &str = "cron:\n  tick_seconds: 1\n";
const PROMPT: &str = "summarise the overnight alerts";

/// The instance holding the job's running claim, waiting (bounded) until there is one.
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
async fn a_killed_instances_scheduled_run_is_closed_once_by_the_survivor() {
    killed_mid_run_then_closed_once(2).await;
}

/// Two survivors look every lease time, so they may both find the run orphaned at once:
/// only the first to end its claim sends the notice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_survivors_only_one_closes_the_killed_instances_run() {
    killed_mid_run_then_closed_once(3).await;
}

async fn killed_mid_run_then_closed_once(instances: usize) {
    let mut rig = ClusterRig::start_with(instances, LEASE_SECONDS, FAST_TICKS).await;
    // The model holds the run's step: the run is under way when its instance dies.
    let (held, _gate) = Step::gated("never delivered: its instance dies");
    rig.model.push(held);
    // One job, added on the first instance's machine and shared by all: a one-shot due in
    // a few seconds.
    let added = rig.cli(
        0,
        &[
            "cron",
            "add",
            &in_seconds(3),
            PROMPT,
            "--deliver",
            &format!("telegram:{USER}"),
        ],
    );
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );

    rig.model.wait_for_requests(1, WAIT).await;
    let owner = run_owner(&rig).await;
    let victim = rig
        .instances
        .iter()
        .position(|i| i.name == owner)
        .expect("a known instance");
    rig.kill9(victim);

    // The survivor closes the run once its owner's lease has run out, and tells the chat.
    let sent = rig.wait_sent(1).await;
    assert!(
        sent[0].text.contains("was interrupted"),
        "the notice: {sent:#?}"
    );
    // The killed instance comes back (its start-up recovery finds nothing left to close)
    // and answers a chat message: the notice is still the only message about the run.
    rig.restart(victim).await;
    assert_eq!(rig.post(victim, 1, "anything else?").await, 200);
    let sent = rig.wait_sent(2).await;
    let texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts.len(), 2, "{texts:#?}");
    assert!(texts[0].contains("was interrupted"), "{texts:#?}");
    assert_eq!(texts[1], "echo: anything else?");
    assert_eq!(
        rig.count("SELECT count(*) FROM hermesd_cron_runs WHERE state = 'interrupted'")
            .await,
        1
    );
    assert_eq!(rig.count("SELECT count(*) FROM hermesd_cron_runs").await, 1);
    let runs_asked = rig
        .model
        .requests()
        .iter()
        .filter(|r| r.last_message_text().contains(PROMPT))
        .count();
    assert_eq!(runs_asked, 1, "the job was not run again");
    rig.stop().await;
}
