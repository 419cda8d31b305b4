//! One tick, under the jobs lock: write the outcomes of runs that ended since the last tick,
//! find the due runs, claim them durably, save — one read and at most one write of
//! `jobs.json` per tick however many runs end or start — then start the claimed runs.
//! Between ticks only the index (`index.rs`) stays in memory; the file is read again when
//! another process changed it or when a job in it has something due, and then only those
//! jobs are parsed in full. The write streams every other job through as read.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::index::Index;
use super::run::Claimed;
use super::{CronScheduler, Outcome};
use crate::cron::due::{self, BrokenJob, DueRun};
use crate::cron::raw::{self, Item};
use crate::cron::schedule::format_timestamp;
use crate::cron::store::{JobsLock, JobsStore, StoreError};
use crate::cron::{JobRecord, Zone};

/// What the blocking half of a tick found, with the lock still held.
struct Found {
    lock: JobsLock,
    index: Index,
    /// The file as read this tick, when some job in it changed.
    bytes: Option<Vec<u8>>,
    /// Position → the changed job, or `None` when it is removed.
    changes: BTreeMap<usize, Option<JobRecord>>,
    due: Vec<(usize, DueRun)>,
    broken: Vec<BrokenJob>,
}

/// The jobs' bytes (`None` when there are none); corrupt jobs are moved aside under the
/// lock, so no writer races the move, and never overwritten.
fn read(store: &JobsStore, lock: &JobsLock) -> Result<Option<Vec<u8>>, StoreError> {
    let Some(bytes) = store.read_bytes()? else {
        return Ok(None);
    };
    match raw::split(&bytes) {
        Ok(_) => Ok(Some(bytes)),
        Err(reason) => {
            let reason = match store.set_aside(lock) {
                Ok(aside) => format!("{reason}; kept aside as {aside}"),
                Err(e) => format!("{reason}; cannot be moved aside: {e}"),
            };
            Err(StoreError::Corrupt {
                place: store.describe(),
                reason,
            })
        }
    }
}

/// Lock, bring the index up to date, and read in full only the jobs that have something
/// due or an outcome to record; apply the outcomes and scan those jobs.
fn find(
    store: &JobsStore,
    index: Option<Index>,
    outcomes: &[Outcome],
    running: &HashSet<String>,
    now: DateTime<Utc>,
    zone: Zone,
) -> Result<Found, StoreError> {
    let lock = store.lock()?;
    let seen = store.version()?;
    let mut bytes = None;
    let index = match index {
        Some(index) if index.stamp == seen => index,
        _ => {
            bytes = read(store, &lock)?;
            let jobs = bytes.as_deref().map(raw::split).transpose();
            Index::build(seen, &jobs.ok().flatten().unwrap_or_default())
        }
    };
    let is_running = |id: &str| running.contains(id);
    let candidates = index.candidates(now, &is_running);
    let recorded: Vec<(usize, &Outcome)> = outcomes
        .iter()
        .filter_map(|o| index.position(&o.job_id).map(|p| (p, o)))
        .collect();
    let mut found = Found {
        lock,
        index,
        bytes: None,
        changes: BTreeMap::new(),
        due: Vec::new(),
        broken: Vec::new(),
    };
    if candidates.is_empty() && recorded.is_empty() {
        return Ok(found);
    }
    let bytes = match bytes {
        Some(bytes) => bytes,
        None => read(store, &found.lock)?.unwrap_or_default(),
    };
    let jobs = raw::split(&bytes).unwrap_or_default();
    let mut records: BTreeMap<usize, JobRecord> = candidates
        .iter()
        .chain(recorded.iter().map(|(p, _)| p))
        .filter_map(|&p| Some((p, raw::record(jobs.get(p)?))))
        .collect();
    let mut changed = HashSet::new();
    for (position, outcome) in recorded {
        let Some(job) = records.get_mut(&position) else {
            continue; // removed by an earlier outcome of this tick
        };
        if outcome.apply(job, now, zone) {
            changed.insert(position);
        } else {
            records.remove(&position);
            found.changes.insert(position, None);
        }
    }
    for position in candidates {
        let Some(job) = records.get_mut(&position) else {
            continue;
        };
        let scan = due::scan(std::slice::from_mut(job), now, zone, &is_running);
        if scan.changed {
            changed.insert(position);
        } else if scan.due.is_empty() && !changed.contains(&position) {
            found.index.set_dormant(position);
        }
        found.broken.extend(scan.broken);
        found
            .due
            .extend(scan.due.into_iter().map(|run| (position, run)));
    }
    for position in changed {
        if let Some(job) = records.remove(&position) {
            found.changes.insert(position, Some(job));
        }
    }
    drop(jobs);
    if !found.changes.is_empty() {
        found.bytes = Some(bytes);
    }
    Ok(found)
}

/// Writes the changed jobs (the others as read) and brings the index to the new version.
fn write(store: &JobsStore, found: &mut Found, updated_at: &str) -> Result<(), StoreError> {
    let bytes = found.bytes.take().unwrap_or_default();
    let jobs = raw::split(&bytes).unwrap_or_default();
    let items: Vec<Item> = jobs
        .iter()
        .enumerate()
        .filter_map(|(i, raw)| match found.changes.get(&i) {
            None => Some(Item::Raw(raw)),
            Some(Some(job)) => Some(Item::Record(job)),
            Some(None) => None,
        })
        .collect();
    store.save_items(&found.lock, &items, updated_at)?;
    // A version that cannot be read leaves the index unmatched, so the next tick reads again.
    found
        .index
        .apply(&found.changes, store.version().ok().flatten());
    Ok(())
}

impl CronScheduler {
    pub(super) async fn tick(self: &Arc<Self>) {
        let now = Utc::now();
        let zone = self.zone();
        let outcomes = self.outcomes.take();
        let store = self.file.store.clone();
        let index = self.file.take_index();
        let running = self.runner.running_ids();
        let given = outcomes.clone();
        let found = self
            .file
            .thread
            .run(move || find(&store, index, &given, &running, now, zone))
            .await;
        let mut found = match found {
            Some(Ok(found)) => found,
            Some(Err(e)) => {
                self.outcomes.requeue(outcomes);
                match e {
                    // Kept, never overwritten; scheduling goes on from an empty list.
                    StoreError::Corrupt { place, reason } => {
                        tracing::error!(jobs = %place, %reason,
                            "the cron jobs file is not valid JSON (`hermesd doctor` reports it)")
                    }
                    e if self.first_report(e.to_string()) => {
                        tracing::error!(error = %e, "scheduled jobs not run: cannot read the jobs file (`hermesd doctor` reports it)")
                    }
                    _ => {}
                }
                return;
            }
            None => {
                self.outcomes.requeue(outcomes);
                tracing::error!("scheduled jobs tick failed");
                return;
            }
        };
        for broken in &found.broken {
            if self.first_report(format!("{}: {}", broken.job_id, broken.reason)) {
                tracing::error!(job_id = %broken.job_id, reason = %broken.reason,
                    "scheduled job skipped: it cannot be scheduled as stored (the other jobs still run)");
            }
        }
        let mut claimed = Vec::new();
        let mut claim_failed = false;
        for (position, run) in std::mem::take(&mut found.due) {
            let job_id = run.job.id().to_owned();
            let session_id = format!("cron_{job_id}_{}", zone.at(now).format("%Y%m%d_%H%M%S"));
            match self
                .router
                .store()
                .claim_cron_run(&job_id, run.scheduled_at, &session_id)
                .await
            {
                Ok(true) => {
                    self.runner.set_running(&job_id, true);
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
                    if !found.changes.contains_key(&position) {
                        found.index.set_dormant(position);
                    }
                }
                Err(e) => {
                    claim_failed = true;
                    tracing::error!(job_id, error = %e, "cannot claim a scheduled run; retried next tick");
                }
            }
        }
        if claim_failed {
            // Nothing is saved, so unclaimed runs stay due; the outcomes wait for the next
            // tick. The index still matches the file, which is unchanged.
            self.outcomes.requeue(outcomes);
            self.file.keep_index(found.index);
            return;
        }
        if found.changes.is_empty() {
            drop(found.lock);
            self.file.keep_index(found.index);
            self.mark_recorded(&outcomes).await;
        } else {
            let store = self.file.store.clone();
            let updated_at = format_timestamp(zone.at(now));
            let saved = self
                .file
                .thread
                .run(move || {
                    let result = write(&store, &mut found, &updated_at);
                    (result, found.index)
                })
                .await;
            match saved {
                Some((Ok(()), index)) => {
                    self.file.keep_index(index);
                    self.mark_recorded(&outcomes).await;
                }
                Some((Err(e), _)) => {
                    tracing::error!(error = %e, "cannot save the jobs file");
                    self.outcomes.requeue(outcomes);
                }
                None => {
                    tracing::error!("cannot save the jobs file");
                    self.outcomes.requeue(outcomes);
                }
            }
        }
        for run in claimed {
            let runner = self.runner.clone();
            self.runs
                .spawn(async move { runner.run_claimed(run).await });
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
