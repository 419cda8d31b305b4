//! Runs a dead owner left `running` are closed as interrupted, with a notice to the job's
//! chat and `last_status` set — the run is never started again, so a crash can cost a run
//! but never double one. At start-up this covers the previous process; ended runs whose
//! outcome never reached `jobs.json` get it then too. On PostgreSQL another instance can die
//! at any time, so the survivors look again every lease time (`survivor_sweep`): closing a
//! run ends its claim only while it is still `running` (`finish_cron_run`), so of several
//! instances looking at once exactly one records the notice and sends it.

use super::CronScheduler;
use super::run::RunResult;
use crate::cron::JobRecord;
use crate::state::CronRun;

impl CronScheduler {
    /// At start-up: closes the runs dead owners left `running` and queues the outcomes of
    /// ended runs not yet written into `jobs.json`.
    pub(super) async fn recover(&self) {
        let Some(open) = self.open_runs().await else {
            return;
        };
        for run in open {
            if run.state == "running" {
                self.close_if_orphaned(&run).await;
            } else if !run.job_recorded {
                self.push_outcome(super::Outcome {
                    job_id: run.job_id.clone(),
                    scheduled_at: run.scheduled_at,
                    status: run.status.clone().unwrap_or_else(|| "error".into()),
                    error: run.error.clone(),
                    delivery_error: None,
                });
            }
        }
    }

    /// While running, on PostgreSQL: closes the runs of instances that died since. Ended
    /// runs are left alone here: their outcomes are queued by whoever ended them (queuing
    /// them again would count a run twice in `jobs.json`).
    pub(super) async fn recover_orphaned(&self) {
        let Some(open) = self.open_runs().await else {
            return;
        };
        for run in open.iter().filter(|run| run.state == "running") {
            self.close_if_orphaned(run).await;
        }
    }

    async fn open_runs(&self) -> Option<Vec<CronRun>> {
        match self.router.store().open_cron_runs().await {
            Ok(open) => Some(open),
            Err(e) => {
                tracing::error!(error = %e, "cannot read open scheduled runs");
                None
            }
        }
    }

    async fn close_if_orphaned(&self, run: &CronRun) {
        if run.owner_alive {
            return; // another live gateway (or instance) is running it
        }
        let job = self.job(&run.job_id).await.unwrap_or_else(|| {
            let mut stub = JobRecord::default();
            stub.set("id", serde_json::json!(run.job_id));
            stub.set("deliver", serde_json::json!("local"));
            stub
        });
        tracing::warn!(job_id = %run.job_id, scheduled_at = run.scheduled_at,
            "a scheduled run was cut short by a crash; closing it with a notice (not run again)");
        self.conclude(
            &job,
            run.scheduled_at,
            RunResult::Interrupted("the gateway stopped unexpectedly during the run".into()),
            None,
        )
        .await;
    }

    async fn job(&self, job_id: &str) -> Option<JobRecord> {
        let jobs = self.jobs.clone();
        let id = job_id.to_owned();
        self.file
            .run(move || jobs.find(&id).ok().flatten())
            .await
            .flatten()
    }
}
