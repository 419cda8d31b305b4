//! One tick, under the jobs lock: write the outcomes of runs that ended since the last tick,
//! find the due runs, claim them durably, save — one read and at most one write of
//! `jobs.json` per tick however many runs end or start — then start the claimed runs. The
//! parsed file is kept between ticks and read again only when another process changed it.

use std::sync::Arc;

use chrono::Utc;

use super::run::Claimed;
use super::{CronScheduler, Outcome};
use crate::cron::due;
use crate::cron::schedule::format_timestamp;
use crate::cron::store::{JobsFile, JobsLock, JobsStore, StoreError};

/// What identifies a version of the file on disk: size, modification time, inode.
pub(super) type FileStamp = (u64, std::time::SystemTime, u64);

pub(super) fn stamp(store: &JobsStore) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(store.jobs_path()).ok()?;
    Some((meta.len(), meta.modified().ok()?, meta.ino()))
}

/// Takes the lock and the current jobs: the cached parse when the file is as we left it.
fn load(
    store: &JobsStore,
    cached: Option<(FileStamp, JobsFile)>,
) -> Result<(JobsLock, JobsFile), StoreError> {
    let lock = store.lock()?;
    if let Some((seen, file)) = cached
        && stamp(store) == Some(seen)
    {
        return Ok((lock, file));
    }
    match store.load() {
        Ok(file) => Ok((lock, file)),
        // Moved aside under the lock, so no writer races the rename.
        Err(StoreError::Corrupt { path, reason }) => {
            let reason = match store.set_aside(&path) {
                Ok(aside) => format!("{reason}; kept aside as {}", aside.display()),
                Err(e) => format!("{reason}; cannot be moved aside: {e}"),
            };
            Err(StoreError::Corrupt { path, reason })
        }
        Err(e) => Err(e),
    }
}

impl CronScheduler {
    pub(super) async fn tick(self: &Arc<Self>) {
        let now = Utc::now();
        let zone = self.zone();
        let jobs = self.jobs.clone();
        let cached = self.cache.lock().unwrap_or_else(|e| e.into_inner()).take();
        let loaded = tokio::task::spawn_blocking(move || load(&jobs, cached)).await;
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
        let outcomes = self.take_outcomes();
        for outcome in &outcomes {
            outcome.apply(&mut file, now, zone);
        }
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
                    claim_failed = true;
                    tracing::error!(job_id, error = %e, "cannot claim a scheduled run; retried next tick");
                }
            }
        }
        if claim_failed {
            // Nothing is saved, so unclaimed runs stay due; the outcomes wait for the next tick.
            self.requeue_outcomes(outcomes);
            return;
        }
        if scan.changed || !outcomes.is_empty() {
            let jobs = self.jobs.clone();
            let stamp_text = format_timestamp(zone.at(now));
            let saved = tokio::task::spawn_blocking(move || {
                jobs.save(&lock, &file, &stamp_text)?;
                let seen = stamp(&jobs);
                drop(lock);
                Ok::<_, StoreError>((seen, file))
            })
            .await;
            match saved {
                Ok(Ok((seen, file))) => {
                    self.keep_cache(seen, file);
                    self.mark_recorded(&outcomes).await;
                }
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "cannot save the jobs file");
                    self.requeue_outcomes(outcomes);
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot save the jobs file");
                    self.requeue_outcomes(outcomes);
                }
            }
        } else {
            let jobs = self.jobs.clone();
            let seen = tokio::task::spawn_blocking(move || stamp(&jobs))
                .await
                .ok()
                .flatten();
            drop(lock);
            self.keep_cache(seen, file);
        }
        for run in claimed {
            let scheduler = self.clone();
            self.runs
                .spawn(async move { scheduler.run_claimed(run).await });
        }
    }

    fn keep_cache(&self, seen: Option<FileStamp>, file: JobsFile) {
        if let Some(seen) = seen {
            *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = Some((seen, file));
        }
    }

    async fn mark_recorded(&self, outcomes: &[Outcome]) {
        for outcome in outcomes {
            if let Err(e) = self
                .router
                .store()
                .mark_cron_run_recorded(&outcome.job_id, outcome.scheduled_at)
                .await
            {
                tracing::warn!(job_id = %outcome.job_id, error = %e, "cannot note a recorded run; it is written again at the next start");
            }
        }
    }
}
