//! The recovery pass: runs a dead owner left `running` are closed as interrupted, with a
//! notice to the job's chat and `last_status` set — the run is never started again, so a
//! crash can cost a run but never double one. At start-up this covers the previous process;
//! ended runs whose outcome never reached `jobs.json` get it then too. On PostgreSQL another
//! instance can die at any time, so the survivors look again every lease time (the
//! scheduler's survivor sweep): closing a run ends its claim only while it is still
//! `running` (`finish_cron_run`), so of several instances looking at once exactly one
//! records the notice and sends it.
//!
//! These are plain decisions over the store's open runs; the scheduler acts on them (it
//! queues the outcomes and closes the runs through its runner).

use super::Outcome;
use super::RunResult;
use crate::cron::JobRecord;
use crate::state::{CronRun, Store};

/// The runs not yet fully closed, or `None` (logged) when the store cannot say.
pub(super) async fn open_runs(store: &Store) -> Option<Vec<CronRun>> {
    match store.open_cron_runs().await {
        Ok(open) => Some(open),
        Err(e) => {
            tracing::error!(error = %e, "cannot read open scheduled runs");
            None
        }
    }
}

/// Whether `run` was left `running` by an owner that is gone. A live owner (another
/// gateway or instance) is still running it.
pub(super) fn is_orphaned(run: &CronRun) -> bool {
    run.state == "running" && !run.owner_alive
}

/// The outcome of an ended run that never reached `jobs.json` (start-up only: while
/// running, whoever ended a run queued its outcome, and queuing it again would count the
/// run twice).
pub(super) fn unrecorded_outcome(run: &CronRun) -> Option<Outcome> {
    (run.state != "running" && !run.job_recorded).then(|| Outcome {
        job_id: run.job_id.clone(),
        scheduled_at: run.scheduled_at,
        status: run.status.clone().unwrap_or_else(|| "error".into()),
        error: run.error.clone(),
        delivery_error: None,
    })
}

/// What an orphaned run is closed with.
pub(super) fn interrupted() -> RunResult {
    RunResult::Interrupted("the gateway stopped unexpectedly during the run".into())
}

/// A stand-in for a job no longer in the file, so its run can still be closed (the notice
/// stays local: there is no chat to send it to).
pub(super) fn stub_job(job_id: &str) -> JobRecord {
    let mut stub = JobRecord::default();
    stub.set("id", serde_json::json!(job_id));
    stub.set("deliver", serde_json::json!("local"));
    stub
}
