//! One tick: find the due runs under the jobs lock, claim them durably, save the advanced
//! schedule, release the lock, then start the claimed runs.

use std::sync::Arc;

use chrono::Utc;

use super::CronScheduler;
use super::run::Claimed;
use crate::cron::due;
use crate::cron::schedule::format_timestamp;
use crate::cron::store::{JobsFile, JobsLock, StoreError};

impl CronScheduler {
    pub(super) async fn tick(self: &Arc<Self>) {
        let now = Utc::now();
        let zone = self.zone();
        let jobs = self.jobs.clone();
        let loaded =
            tokio::task::spawn_blocking(move || -> Result<(JobsLock, JobsFile), StoreError> {
                let lock = jobs.lock()?;
                match jobs.load() {
                    Ok(file) => Ok((lock, file)),
                    // Moved aside under the lock, so no writer races the rename.
                    Err(StoreError::Corrupt { path, reason }) => {
                        let reason = match jobs.set_aside(&path) {
                            Ok(aside) => format!("{reason}; kept aside as {}", aside.display()),
                            Err(e) => format!("{reason}; cannot be moved aside: {e}"),
                        };
                        Err(StoreError::Corrupt { path, reason })
                    }
                    Err(e) => Err(e),
                }
            })
            .await;
        let (lock, mut file) = match loaded {
            Ok(Ok(loaded)) => loaded,
            Ok(Err(StoreError::Corrupt { path, reason })) => {
                // Kept, never overwritten; scheduling goes on from an empty list.
                tracing::error!(path = %path.display(), %reason,
                    "the cron jobs file is not valid JSON (`hermesd doctor` reports it)");
                return;
            }
            Ok(Err(e)) => {
                if self.first_report(e.to_string()) {
                    tracing::error!(error = %e, "scheduled jobs not run: cannot read the jobs file (`hermesd doctor` reports it)");
                }
                return;
            }
            Err(e) => {
                tracing::error!(error = %e, "scheduled jobs tick failed");
                return;
            }
        };
        let scan = due::scan(&mut file.jobs, now, zone, &|id| self.is_running(id));
        for broken in &scan.broken {
            if self.first_report(format!("{}: {}", broken.job_id, broken.reason)) {
                tracing::error!(job_id = %broken.job_id, reason = %broken.reason,
                    "scheduled job skipped: it cannot be scheduled as stored (the other jobs still run)");
            }
        }
        let mut claimed = Vec::new();
        let mut claim_failed = false;
        for run in scan.due {
            let job_id = run.job.id().to_owned();
            let session_id = format!("cron_{job_id}_{}", zone.at(now).format("%Y%m%d_%H%M%S"));
            match self
                .router
                .store()
                .claim_cron_run(&job_id, run.scheduled_at, &session_id)
                .await
            {
                Ok(true) => {
                    self.set_running(&job_id, true);
                    claimed.push(Claimed {
                        job: run.job,
                        scheduled_at: run.scheduled_at,
                        session_id,
                    });
                }
                Ok(false) => {
                    tracing::info!(
                        job_id,
                        scheduled_at = run.scheduled_at,
                        "scheduled run already claimed; not run again"
                    );
                }
                Err(e) => {
                    // Unclaimed runs stay due: the schedule is not advanced past them.
                    claim_failed = true;
                    tracing::error!(job_id, error = %e, "cannot claim a scheduled run; retried next tick");
                }
            }
        }
        if scan.changed && !claim_failed {
            let jobs = self.jobs.clone();
            let stamp = format_timestamp(zone.at(now));
            let saved = tokio::task::spawn_blocking(move || jobs.save(&lock, &file, &stamp)).await;
            match saved {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "cannot save the jobs file"),
                Err(e) => tracing::error!(error = %e, "cannot save the jobs file"),
            }
        } else {
            drop(lock);
        }
        for run in claimed {
            let scheduler = self.clone();
            self.runs
                .spawn(async move { scheduler.run_claimed(run).await });
        }
    }
}
