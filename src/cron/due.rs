//! One pass over the jobs: which runs are due now, which were missed beyond their grace
//! window (skipped, said so in `last_status` and the log), and which records need repair
//! (a missing `next_run_at` is recomputed). The caller holds the jobs lock and saves the
//! changed file; nothing here touches the disk or the clock.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::job::JobRecord;
use super::schedule::Zone;

/// A run to start: the job as it was when found due, and the instant it was due for.
#[derive(Debug, Clone)]
pub struct DueRun {
    pub job: JobRecord,
    /// Epoch seconds of the scheduled time: with the job id, the run's identity.
    pub scheduled_at: i64,
}

/// A job that cannot be scheduled as stored; the others still run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenJob {
    pub job_id: String,
    pub reason: String,
}

/// What a pass found.
#[derive(Debug, Default)]
pub struct Scan {
    pub due: Vec<DueRun>,
    pub broken: Vec<BrokenJob>,
    /// The file changed and must be saved.
    pub changed: bool,
}

/// Scans `jobs`, advancing recurring jobs past the runs it returns so the next pass does
/// not see them again. `running` tells whether a job of this process is still running (it
/// is then left alone: a running job is not started again).
pub fn scan(
    jobs: &mut [JobRecord],
    now: DateTime<Utc>,
    zone: Zone,
    running: &dyn Fn(&str) -> bool,
) -> Scan {
    let mut scan = Scan::default();
    for job in jobs.iter_mut() {
        if !job.enabled() || job.id().is_empty() {
            if job.id().is_empty() {
                scan.broken.push(BrokenJob {
                    job_id: "?".into(),
                    reason: "the job has no id".into(),
                });
            }
            continue;
        }
        // Parsing a schedule (a cron expression especially) costs far more than reading a
        // timestamp, so it waits until the job is due or needs repair.
        let next = job.next_run_at();
        if next.is_some_and(|t| t.to_utc() > now) || running(job.id()) {
            continue;
        }
        let schedule = match job.schedule() {
            Ok(schedule) => schedule,
            Err(e) => {
                scan.broken.push(BrokenJob {
                    job_id: job.id().to_owned(),
                    reason: e.0,
                });
                continue;
            }
        };
        let Some(next) = next else {
            // Edited by hand or never set: recompute, and run it from the next pass.
            let next = if schedule.is_once() {
                schedule.next_run(now, job.last_run_at(), zone)
            } else {
                schedule.next_after_now(now, zone)
            };
            if next.is_some() {
                job.set_time("next_run_at", next);
                scan.changed = true;
            }
            continue;
        };
        let late = (now - next.to_utc()).num_seconds();
        let grace = schedule.grace_seconds(now, zone);
        if late > grace {
            tracing::warn!(job_id = job.id(), job = %job.name(), scheduled = %next, late_seconds = late, grace_seconds = grace,
                "scheduled run missed beyond its grace window; skipped");
            job.set("last_status", json!("skipped"));
            job.set(
                "last_error",
                json!(format!(
                    "missed the run due at {} by {late} s (grace {grace} s); skipped",
                    super::schedule::format_timestamp(next)
                )),
            );
            if schedule.is_once() {
                job.set("enabled", Value::Bool(false));
                job.set("state", json!("completed"));
                job.set("next_run_at", Value::Null);
            } else {
                job.set_time("next_run_at", schedule.next_after_now(now, zone));
            }
            scan.changed = true;
            continue;
        }
        scan.due.push(DueRun {
            job: job.clone(),
            scheduled_at: next.timestamp(),
        });
        if !schedule.is_once() {
            // At most once per scheduled time: the next pass looks for the following run.
            job.set_time("next_run_at", schedule.next_after_now(now, zone));
            scan.changed = true;
        }
    }
    scan
}

#[cfg(test)]
#[path = "due_tests.rs"]
mod tests;
