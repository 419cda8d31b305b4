//! Scheduled jobs inside the daemon. Every tick reads `cron/jobs.json` under its lock (so
//! jobs added by `hermesd cron add` or `hermes cron` are seen within one tick), claims each
//! due run in state.db before anything runs (`hermesd_cron_runs`: at most one run per job
//! and scheduled time, across processes and crashes), saves the advanced schedule, then
//! runs the claimed jobs — at most `cron.max_parallel_jobs` at once, a job never twice
//! concurrently — each as a fresh agent session (source `cron`). A run's output is recorded
//! as delivery obligations in the same transaction that ends its claim and goes out through
//! the chat lanes and the ledger like any reply (`run.rs`). At start, runs a dead process left
//! behind are closed with a notice, never re-run (`recovery.rs`); on PostgreSQL the runs of
//! an instance that dies later are closed the same way by a survivor, within a lease time.

mod file_thread;
mod index;
mod prepare;
mod recovery;
mod run;
mod tick;
mod watch;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use chrono::{DateTime, Utc};

use super::router::Router;
use crate::cron::{JobRecord, JobsStore, Zone};
use crate::home::HermesHome;

/// The scheduler of one gateway.
#[derive(Debug)]
pub struct CronScheduler {
    router: Arc<Router>,
    home: HermesHome,
    jobs: JobsStore,
    /// Ids of jobs running in this process.
    running: Mutex<HashSet<String>>,
    permits: Arc<Semaphore>,
    /// Problems already logged (a broken job or file is reported once, not every tick).
    reported: Mutex<HashSet<String>>,
    /// Wakes the loop before the next tick (a job was triggered to run now).
    wake: Notify,
    /// Ends the tick loop.
    stop: CancellationToken,
    /// Ended runs whose outcome the next tick writes into `jobs.json` (they are durable in
    /// state.db already: a crash before that write is repaired at the next start).
    outcomes: Mutex<Vec<Outcome>>,
    /// What decides due-ness, per job, for the file version last read or written (taken
    /// by a tick while it runs).
    index: Mutex<Option<index::Index>>,
    /// Where the jobs file is read and written.
    file: file_thread::FileThread,
    /// Interrupts running jobs (after the drain at shutdown).
    interrupt: CancellationToken,
    runs: TaskTracker,
}

/// How a run ended, to be written into its job.
#[derive(Debug, Clone)]
struct Outcome {
    job_id: String,
    scheduled_at: i64,
    status: String,
    error: Option<String>,
    delivery_error: Option<String>,
}

impl Outcome {
    /// Records the run in its job; false when its repeat count is used up and the job must
    /// be removed.
    fn apply(&self, job: &mut JobRecord, now: DateTime<Utc>, zone: Zone) -> bool {
        job.record_run(
            now,
            zone,
            &self.status,
            self.error.as_deref(),
            self.delivery_error.as_deref(),
        )
    }
}

impl CronScheduler {
    /// Starts the loop: recovery first, then a tick every `cron.tick_seconds`.
    pub fn start(home: &HermesHome, router: Arc<Router>) -> Arc<Self> {
        let parallel = router.live().config.cron.max_parallel_jobs.max(1) as usize;
        let scheduler = Arc::new(Self {
            router,
            home: home.clone(),
            jobs: JobsStore::new(home.cron_dir()),
            running: Mutex::new(HashSet::new()),
            permits: Arc::new(Semaphore::new(parallel)),
            reported: Mutex::new(HashSet::new()),
            wake: Notify::new(),
            stop: CancellationToken::new(),
            outcomes: Mutex::new(Vec::new()),
            index: Mutex::new(None),
            file: file_thread::FileThread::start(),
            interrupt: CancellationToken::new(),
            runs: TaskTracker::new(),
        });
        let looping = scheduler.clone();
        tokio::spawn(async move { looping.run_loop().await });
        let watching = scheduler.clone();
        tokio::spawn(async move { watching.watch_file().await });
        let coord = scheduler.router.store().coordinator().clone();
        if let Some(every) = coord.is_shared().then(|| coord.lease_ttl()) {
            let sweeping = scheduler.clone();
            tokio::spawn(async move { sweeping.survivor_sweep(every).await });
        }
        scheduler
    }

    /// PostgreSQL: every lease time, closes the runs of instances that died meanwhile (an
    /// instance's runs become recoverable when its lease runs out). On SQLite one process
    /// owns the file, so start-up recovery is all there is.
    async fn survivor_sweep(self: Arc<Self>, every: Duration) {
        let every = every.max(Duration::from_millis(100));
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            self.recover_orphaned().await;
        }
    }

    async fn run_loop(self: Arc<Self>) {
        self.recover().await;
        loop {
            self.tick().await;
            let every = Duration::from_secs(self.router.live().config.cron.tick_seconds.max(1));
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
                _ = self.wake.notified() => {}
            }
        }
    }

    /// Looks for due jobs now instead of at the next tick.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Stops ticking, lets running jobs finish for at most `drain`, then interrupts the rest
    /// (each records its end and sends its notice), waiting a little more for that.
    pub async fn shutdown(&self, drain: Duration) {
        self.stop.cancel();
        self.runs.close();
        if tokio::time::timeout(drain, self.runs.wait()).await.is_ok() {
            return;
        }
        tracing::warn!("shutdown: interrupting scheduled runs still going");
        self.interrupt.cancel();
        if tokio::time::timeout(Duration::from_secs(10), self.runs.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "shutdown: scheduled runs still finishing; they are closed at the next start"
            );
        }
    }

    /// The zone schedules are read in (checked when the config was loaded).
    fn zone(&self) -> Zone {
        Zone::parse(&self.router.live().config.cron.timezone).unwrap_or(Zone::Host)
    }

    fn set_running(&self, job_id: &str, running: bool) {
        let mut set = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if running {
            set.insert(job_id.to_owned());
        } else {
            set.remove(job_id);
        }
    }

    /// Queues an ended run's outcome for the next tick and asks for that tick now.
    fn push_outcome(&self, outcome: Outcome) {
        self.outcomes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(outcome);
        self.wake();
    }

    fn take_outcomes(&self) -> Vec<Outcome> {
        std::mem::take(&mut *self.outcomes.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn requeue_outcomes(&self, outcomes: Vec<Outcome>) {
        let mut queued = self.outcomes.lock().unwrap_or_else(|e| e.into_inner());
        let newer = std::mem::replace(&mut *queued, outcomes);
        queued.extend(newer);
    }

    /// True the first time `problem` is seen (so it is logged once).
    fn first_report(&self, problem: String) -> bool {
        self.reported
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(problem)
    }
}
