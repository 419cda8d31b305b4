//! The single writer: a dedicated thread owning the only read-write connection.
//!
//! Callers send [`WriteCommand`]s over a bounded channel (backpressure, not memory growth) and
//! await their own result. The writer drains whatever is queued (up to [`MAX_BATCH`]) into one
//! `BEGIN IMMEDIATE` transaction (group commit), running each command in its own savepoint so
//! a failing command is rolled back alone and its neighbours still commit. A caller hears
//! "ok" only after the COMMIT that made its write durable.

use super::capabilities::Capabilities;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::Rng;
use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::{mpsc, oneshot};

use super::apply;
use crate::state::commands::{Outcome, WriteCommand};
use crate::state::error::{StoreError, StoreResult, is_busy};
use crate::state::sqlite::fifo_gate::FifoGate;
use crate::state::sqlite::schema::FTS_TABLES;

/// The most commands committed in one transaction.
pub const MAX_BATCH: usize = 512;
/// Attempts at a batch when another process holds the write lock (seed: 15).
pub const MAX_ATTEMPTS: u32 = 15;
const RETRY_JITTER_MS: std::ops::Range<u64> = 20..150;
const CHECKPOINT_EVERY_COMMITS: u64 = 50;
const FTS_MERGE_EVERY_WRITES: u64 = 1000;

pub(crate) struct WriteRequest {
    pub command: WriteCommand,
    pub reply: oneshot::Sender<StoreResult<Outcome>>,
    pub enqueued: Instant,
}

// Writes are the hot path and shutdown happens once: boxing the request would cost an
// allocation per write to save bytes on a message sent once per process.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Envelope {
    Write(WriteRequest),
    Shutdown(oneshot::Sender<()>),
}

/// Counters the writer keeps, readable from any thread (for metrics and benchmarks).
#[derive(Debug, Default)]
pub struct WriterStats {
    pub commits: AtomicU64,
    pub writes: AtomicU64,
    pub failed_writes: AtomicU64,
    pub lock_retries: AtomicU64,
    /// Sum of queue-to-reply latencies in microseconds (divide by `writes + failed_writes`).
    pub latency_micros_total: AtomicU64,
    pub latency_micros_max: AtomicU64,
}

/// The writer's lock-contention policy.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// How long one attempt waits on the lock inside SQLite (sub-millisecond polling).
    pub busy_window: Duration,
    /// Attempts at a batch before its callers get [`StoreError::Locked`].
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            busy_window: crate::state::sqlite::connection::BUSY_WINDOW,
            max_attempts: MAX_ATTEMPTS,
        }
    }
}

pub(crate) struct Writer {
    conn: Connection,
    /// The first-come-first-served queue every hermesd writer on this database takes its
    /// turn in, so between our own processes the SQLite lock is handed over in arrival order
    /// without busy-handler races (see `fifo_gate`).
    gate: Option<FifoGate>,
    policy: RetryPolicy,
    rx: mpsc::Receiver<Envelope>,
    stats: Arc<WriterStats>,
    /// What the database's Hermes version expects written beside each command.
    caps: Capabilities,
    commits_since_checkpoint: u64,
    writes_since_merge: u64,
}

impl Writer {
    pub fn new(
        conn: Connection,
        gate: Option<FifoGate>,
        policy: RetryPolicy,
        rx: mpsc::Receiver<Envelope>,
        stats: Arc<WriterStats>,
        caps: Capabilities,
    ) -> Self {
        Self {
            conn,
            gate,
            policy,
            rx,
            stats,
            caps,
            commits_since_checkpoint: 0,
            writes_since_merge: 0,
        }
    }

    /// Runs until every sender is gone or a shutdown arrives; then checkpoints and closes.
    pub fn run(mut self) {
        crate::state::sqlite::connection::set_busy_window(self.policy.busy_window);
        let mut batch = Vec::with_capacity(MAX_BATCH);
        while let Some(first) = self.rx.blocking_recv() {
            let mut shutdown = None;
            match first {
                Envelope::Write(request) => batch.push(request),
                Envelope::Shutdown(done) => shutdown = Some(done),
            }
            while shutdown.is_none() && batch.len() < MAX_BATCH {
                match self.rx.try_recv() {
                    Ok(Envelope::Write(request)) => batch.push(request),
                    Ok(Envelope::Shutdown(done)) => shutdown = Some(done),
                    Err(_) => break,
                }
            }
            if !batch.is_empty() {
                self.commit_batch(std::mem::take(&mut batch));
            }
            if let Some(done) = shutdown {
                self.finish();
                let _ = done.send(());
                return;
            }
        }
        self.finish();
    }

    fn commit_batch(&mut self, batch: Vec<WriteRequest>) {
        let mut last_error = None;
        let max_attempts = self.policy.max_attempts.max(1);
        for attempt in 1..=max_attempts {
            match self.try_batch(&batch) {
                Ok(results) => {
                    self.after_commit(results.len() as u64);
                    self.reply_all(batch, results);
                    return;
                }
                Err(e) if is_busy(&e) => {
                    self.stats.lock_retries.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(attempt, error = %e, "state.db write lock busy; retrying");
                    let jitter = rand::rng().random_range(RETRY_JITTER_MS);
                    std::thread::sleep(Duration::from_millis(jitter));
                    last_error = Some(e);
                }
                Err(e) => {
                    tracing::error!(error = %e, commands = batch.len(), "state.db transaction failed");
                    let message = e.to_string();
                    let results = batch
                        .iter()
                        .map(|_| Err(StoreError::WriteFailed(message.clone())))
                        .collect();
                    self.reply_all(batch, results);
                    return;
                }
            }
        }
        tracing::error!(
            error = ?last_error.map(|e| e.to_string()),
            commands = batch.len(),
            "state.db stayed locked by another process; failing these writes"
        );
        let results = batch
            .iter()
            .map(|_| {
                Err(StoreError::Locked {
                    attempts: max_attempts,
                })
            })
            .collect();
        self.reply_all(batch, results);
    }

    /// One transaction over the whole batch. A command's own failure is isolated by its
    /// savepoint; only lock contention or a failing COMMIT aborts the transaction.
    fn try_batch(&mut self, batch: &[WriteRequest]) -> rusqlite::Result<Vec<StoreResult<Outcome>>> {
        // Held until this function returns: the transaction commits or rolls back first.
        let _turn = self.gate.as_ref().and_then(|gate| match gate.enter() {
            Ok(turn) => Some(turn),
            Err(e) => {
                tracing::debug!(error = %e, "writer queue unavailable; relying on SQLite's lock");
                None
            }
        });
        let mut tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut results = Vec::with_capacity(batch.len());
        for request in batch {
            let savepoint = tx.savepoint()?;
            match apply::apply(&savepoint, &self.caps, &request.command) {
                Ok(outcome) => {
                    savepoint.commit()?;
                    results.push(Ok(outcome));
                }
                Err(StoreError::Sqlite(e)) if e.is_busy() => return Err(e.into_inner()),
                Err(e) => {
                    drop(savepoint); // rolls back this command only
                    results.push(Err(e));
                }
            }
        }
        tx.commit()?;
        Ok(results)
    }

    fn reply_all(&self, batch: Vec<WriteRequest>, results: Vec<StoreResult<Outcome>>) {
        let now = Instant::now();
        for (request, result) in batch.into_iter().zip(results) {
            let counter = if result.is_ok() {
                &self.stats.writes
            } else {
                &self.stats.failed_writes
            };
            counter.fetch_add(1, Ordering::Relaxed);
            let micros = now.duration_since(request.enqueued).as_micros() as u64;
            self.stats
                .latency_micros_total
                .fetch_add(micros, Ordering::Relaxed);
            self.stats
                .latency_micros_max
                .fetch_max(micros, Ordering::Relaxed);
            // A caller that stopped waiting still had its write committed.
            let _ = request.reply.send(result);
        }
    }

    /// Periodic maintenance: a PASSIVE checkpoint every 50 commits (never blocks readers or
    /// other processes) and a bounded FTS segment merge every 1000 writes.
    fn after_commit(&mut self, writes: u64) {
        self.stats.commits.fetch_add(1, Ordering::Relaxed);
        self.commits_since_checkpoint += 1;
        self.writes_since_merge += writes;
        if self.commits_since_checkpoint >= CHECKPOINT_EVERY_COMMITS {
            self.commits_since_checkpoint = 0;
            if let Err(e) = self.conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE);") {
                tracing::debug!(error = %e, "passive checkpoint skipped");
            }
        }
        if self.writes_since_merge >= FTS_MERGE_EVERY_WRITES {
            self.writes_since_merge = 0;
            for table in FTS_TABLES {
                // A bounded merge (not 'optimize', whose cost grows with the index) keeps the
                // segment count low without holding the write lock for long.
                let sql = format!("INSERT INTO {table}({table}, rank) VALUES('merge', 64)");
                if let Err(e) = self.conn.execute_batch(&sql) {
                    tracing::debug!(error = %e, table, "fts merge skipped");
                }
            }
        }
    }

    fn finish(&mut self) {
        if let Err(e) = self.conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE);") {
            tracing::debug!(error = %e, "final checkpoint skipped");
        }
    }
}
