//! Start-up: claims a dead process left `running` are closed as interrupted, with a notice
//! to the job's chat and `last_status` set — the run is never started again, so a crash can
//! cost a run but never double one. Ended runs whose outcome never reached `jobs.json` get it
//! now.

use super::CronScheduler;
use super::run::RunResult;
use crate::cron::JobRecord;

impl CronScheduler {
    pub(super) async fn recover(&self) {
        let open = match self.router.store().open_cron_runs().await {
            Ok(open) => open,
            Err(e) => {
                tracing::error!(error = %e, "cannot read open scheduled runs");
                return;
            }
        };
        for run in open {
            if run.state == "running" {
                if run.owner_alive {
                    continue; // another live gateway (or instance) is running it
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
                    RunResult::Interrupted(
                        "the gateway stopped unexpectedly during the run".into(),
                    ),
                    None,
                )
                .await;
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

    async fn job(&self, job_id: &str) -> Option<JobRecord> {
        let jobs = self.jobs.clone();
        let id = job_id.to_owned();
        self.file
            .run(move || jobs.find(&id).ok().flatten())
            .await
            .flatten()
    }
}
