//! Scheduled-run claims (`hermesd_cron_runs`), on state.db and on PostgreSQL
//! (`on_both_backends!`): a run is claimed once however many processes or instances try,
//! finishing records its replies with it, `jobs.json` bookkeeping closes it, and a run whose
//! owner died is seen as such and concluded exactly once.

mod support;

use hermesd::state::{CronRunEnd, NewObligation, ObligationState, StoreOptions};
use support::owners::{crash, doomed_owner};
use support::store_backends::TestStore;

fn reply(content: &str) -> NewObligation {
    NewObligation {
        session_key: "cron:job1".into(),
        message_ref: "job1:100".into(),
        platform: "telegram".into(),
        chat_id: "42".into(),
        thread_id: None,
        content: content.into(),
    }
}

fn end(scheduled_at: i64, state: &'static str, error: Option<String>) -> CronRunEnd {
    CronRunEnd {
        job_id: "job1".into(),
        scheduled_at,
        state,
        status: if error.is_some() { "error" } else { "ok" }.into(),
        error,
        replies: vec![reply(&format!("run {scheduled_at}"))],
    }
}

async fn a_scheduled_run_is_claimed_once_and_finished_with_its_replies(t: &TestStore) {
    let store = &t.store;
    store.ensure_gateway_schema().await.unwrap();
    assert!(store.claim_cron_run("job1", 100, "sess-1").await.unwrap());
    assert!(!store.claim_cron_run("job1", 100, "sess-2").await.unwrap());
    let other = t.another(StoreOptions::default()).await;
    assert!(
        !other.claim_cron_run("job1", 100, "sess-3").await.unwrap(),
        "claimed once across processes and instances"
    );
    other.close().await;

    let open = store.open_cron_runs().await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(
        (open[0].state.as_str(), open[0].session_id.as_deref()),
        ("running", Some("sess-1"))
    );
    assert_eq!(open[0].owner.pid, i64::from(std::process::id()));
    assert!(open[0].owner_alive, "our own claim is alive");

    let ids = store
        .finish_cron_run(end(100, "finished", None))
        .await
        .unwrap()
        .expect("finished");
    assert_eq!(ids, [reply("run 100").obligation_id()]);
    let owed = store.get_obligation(&ids[0]).await.unwrap().unwrap();
    assert_eq!(owed.state, ObligationState::Pending);
    assert_eq!(
        store
            .finish_cron_run(end(100, "finished", None))
            .await
            .unwrap(),
        None,
        "a run ends once"
    );
    let open = store.open_cron_runs().await.unwrap();
    assert_eq!(open.len(), 1, "jobs.json has not had the outcome yet");
    assert_eq!(
        (open[0].state.as_str(), open[0].status.as_deref()),
        ("finished", Some("ok"))
    );
    assert_eq!(open[0].obligation_ids, ids);
    store.mark_cron_run_recorded("job1", 100).await.unwrap();
    assert!(store.open_cron_runs().await.unwrap().is_empty());

    assert!(store.claim_cron_run("job1", 200, "sess-4").await.unwrap());
    store.mark_cron_run_recorded("job1", 200).await.unwrap();
    assert_eq!(
        store.open_cron_runs().await.unwrap().len(),
        1,
        "a running claim is not recorded"
    );
    let long = "e".repeat(600);
    store
        .finish_cron_run(end(200, "interrupted", Some(long)))
        .await
        .unwrap()
        .expect("finished");
    let runs = store.cron_runs_of("job1").await.unwrap();
    let shown: Vec<(i64, &str, bool)> = runs
        .iter()
        .map(|r| (r.scheduled_at, r.state.as_str(), r.job_recorded))
        .collect();
    assert_eq!(
        shown,
        [(200, "interrupted", false), (100, "finished", true)]
    );
    assert_eq!(runs[0].error.as_ref().map(String::len), Some(500));
    store.close().await;
}

async fn a_run_cut_short_by_a_dead_owner_is_concluded_once(t: &TestStore) {
    t.store.ensure_gateway_schema().await.unwrap();
    let crashed = doomed_owner(t, "crashed").await;
    assert!(crashed.claim_cron_run("job1", 100, "sess-1").await.unwrap());
    crash(t, crashed).await;

    let open = t.store.open_cron_runs().await.unwrap();
    assert_eq!(open.len(), 1);
    assert!(!open[0].owner_alive, "its owner is gone");
    let other = t.another(StoreOptions::default()).await;
    let (a, b) = tokio::join!(
        t.store
            .finish_cron_run(end(100, "interrupted", Some("cut short".into()))),
        other.finish_cron_run(end(100, "interrupted", Some("cut short".into()))),
    );
    let concluded = [a.unwrap(), b.unwrap()];
    assert_eq!(
        concluded.iter().filter(|c| c.is_some()).count(),
        1,
        "{concluded:?}"
    );
    let run = &t.store.cron_runs_of("job1").await.unwrap()[0];
    assert_eq!(run.state, "interrupted");
    other.close().await;
    t.store.close().await;
}

on_both_backends!(
    a_scheduled_run_is_claimed_once_and_finished_with_its_replies,
    a_run_cut_short_by_a_dead_owner_is_concluded_once,
);
