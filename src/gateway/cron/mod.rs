//! Scheduled jobs inside the daemon. Every tick reads `cron/jobs.json` under its lock (so
//! jobs added by `hermesd cron add` or `hermes cron` are seen within one tick; with
//! `state.backend: postgres` that is the shared copy every instance reads, see
//! [`open_jobs`]), claims each
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
mod jobs_file;
mod prepare;
mod recovery;
mod run;
mod tick;

pub(crate) use run::home_channel;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use chrono::{DateTime, Utc};

use super::router::Router;
use crate::config::Config;
use crate::cron::{JobRecord, JobsStore, Zone};
use crate::home::HermesHome;

/// The scheduler of one gateway: a façade that wires its parts — the jobs file with its
/// index and watcher ([`jobs_file::JobsFile`]), the queue of ended runs' outcomes
/// ([`OutcomeQueue`]), the runner that executes and concludes claimed runs
/// ([`run::JobRunner`]), the recovery pass (`recovery.rs`) — around the tick (`tick.rs`).
#[derive(Debug)]
pub struct CronScheduler {
    router: Arc<Router>,
    /// Problems already logged (a broken job or file is reported once, not every tick).
    reported: Mutex<HashSet<String>>,
    /// Wakes the loop before the next tick (a job was triggered to run now).
    wake: Arc<Notify>,
    /// Ends the tick loop.
    stop: CancellationToken,
    /// Ended runs whose outcome the next tick writes into `jobs.json` (they are durable in
    /// state.db already: a crash before that write is repaired at the next start).
    outcomes: Arc<OutcomeQueue>,
    /// The jobs file, its index and its watcher.
    file: jobs_file::JobsFile,
    runner: Arc<run::JobRunner>,
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

/// How a run ended (the script step, the agent run and recovery each produce one).
#[derive(Debug, Clone)]
enum RunResult {
    Reply(String),
    Failed(String),
    /// Failed, with this message delivered as it is (a `no_agent` script's failure).
    Alert(String),
    /// Its process stopped or died before it finished (recorded as `interrupted`).
    Interrupted(String),
}

/// The jobs `config` calls for — with `state.backend: postgres` the shared copy, seeded from
/// this home when it does not exist yet — opened off the runtime's threads. A home
/// `cron/jobs.json` the shared copy makes unused is logged once, by name, so nobody edits
/// it expecting an effect.
pub async fn open_jobs(home: &HermesHome, config: &Config) -> anyhow::Result<JobsStore> {
    let (home, config) = (home.clone(), config.clone());
    let opened = tokio::task::spawn_blocking(move || {
        let jobs = crate::cron::shared::open_store(&home, &config)?;
        if let Some(unused) = jobs.unused_home_copy()? {
            tracing::warn!(file = %unused.display(),
                "this home's cron/jobs.json differs from the jobs in the shared database and is not read; \
                 `hermesd cron import` replaces the shared jobs with it, `hermesd cron export` overwrites it with them");
        }
        Ok::<_, crate::cron::StoreError>(jobs)
    })
    .await?;
    opened.map_err(|e| anyhow::anyhow!("cannot open the scheduled jobs: {e}"))
}

/// The zone schedules are read in (checked when the config was loaded).
fn zone(router: &Router) -> Zone {
    Zone::parse(&router.live().config.cron.timezone).unwrap_or(Zone::Host)
}

/// Outcomes waiting for the next tick to write them into `jobs.json`.
#[derive(Debug)]
struct OutcomeQueue {
    queued: Mutex<Vec<Outcome>>,
    /// The scheduler's loop, woken so a queued outcome is written now.
    tick: Arc<Notify>,
}

impl OutcomeQueue {
    fn new(tick: Arc<Notify>) -> Self {
        Self {
            queued: Mutex::new(Vec::new()),
            tick,
        }
    }

    /// Queues an ended run's outcome for the next tick and asks for that tick now.
    fn push(&self, outcome: Outcome) {
        self.queued
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(outcome);
        self.tick.notify_one();
    }

    fn take(&self) -> Vec<Outcome> {
        std::mem::take(&mut *self.queued.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Puts back outcomes a tick could not write, ahead of any queued meanwhile.
    fn requeue(&self, outcomes: Vec<Outcome>) {
        let mut queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        let newer = std::mem::replace(&mut *queued, outcomes);
        queued.extend(newer);
    }
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
    /// Starts the loop over `jobs` ([`open_jobs`]): recovery first, then a tick every
    /// `cron.tick_seconds`.
    pub fn start(home: &HermesHome, router: Arc<Router>, jobs: JobsStore) -> Arc<Self> {
        let parallel = router.live().config.cron.max_parallel_jobs.max(1) as usize;
        let wake = Arc::new(Notify::new());
        let outcomes = Arc::new(OutcomeQueue::new(wake.clone()));
        let runner = Arc::new(run::JobRunner {
            router: router.clone(),
            home: home.clone(),
            jobs: jobs.clone(),
            running: Mutex::new(HashSet::new()),
            permits: Arc::new(Semaphore::new(parallel)),
            interrupt: CancellationToken::new(),
            outcomes: outcomes.clone(),
        });
        let scheduler = Arc::new(Self {
            router,
            reported: Mutex::new(HashSet::new()),
            wake,
            stop: CancellationToken::new(),
            outcomes,
            file: jobs_file::JobsFile::open(jobs),
            runner,
            runs: TaskTracker::new(),
        });
        let looping = scheduler.clone();
        tokio::spawn(async move { looping.run_loop().await });
        let watching = scheduler.clone();
        tokio::spawn(async move { watching.file.watch(&watching.stop, &watching.wake).await });
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
            // Ended runs are left alone here: whoever ended them queued their outcomes.
            if let Some(open) = recovery::open_runs(self.router.store()).await {
                for run in open.iter().filter(|run| run.state == "running") {
                    self.close_if_orphaned(run).await;
                }
            }
        }
    }

    /// At start-up: closes the runs dead owners left `running` and queues the outcomes of
    /// ended runs not yet written into `jobs.json`.
    async fn recover(&self) {
        let Some(open) = recovery::open_runs(self.router.store()).await else {
            return;
        };
        for run in &open {
            if run.state == "running" {
                self.close_if_orphaned(run).await;
            } else if let Some(outcome) = recovery::unrecorded_outcome(run) {
                self.outcomes.push(outcome);
            }
        }
    }

    /// Closes `run` as interrupted when its owner is gone (see `recovery.rs`).
    async fn close_if_orphaned(&self, run: &crate::state::CronRun) {
        if !recovery::is_orphaned(run) {
            return;
        }
        let job = self
            .file
            .find(&run.job_id)
            .await
            .unwrap_or_else(|| recovery::stub_job(&run.job_id));
        tracing::warn!(job_id = %run.job_id, scheduled_at = run.scheduled_at,
            "a scheduled run was cut short by a crash; closing it with a notice (not run again)");
        self.runner
            .conclude(&job, run.scheduled_at, recovery::interrupted(), None)
            .await;
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
        self.runner.interrupt.cancel();
        if tokio::time::timeout(Duration::from_secs(10), self.runs.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "shutdown: scheduled runs still finishing; they are closed at the next start"
            );
        }
    }

    fn zone(&self) -> Zone {
        zone(&self.router)
    }

    /// True the first time `problem` is seen (so it is logged once).
    fn first_report(&self, problem: String) -> bool {
        self.reported
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(problem)
    }
}
