//! The durable claim of each scheduled run (`hermesd_cron_runs`, ours): a run is claimed
//! (`running`, with its owner process) before it starts and finished (`finished`, with its
//! reply obligations recorded in the same transaction) before anything is sent, so a crash
//! at any point leaves a run either unstarted, owed to the ledger, or visibly interrupted —
//! never run twice, never delivered twice. `job_recorded` says whether `jobs.json` has been
//! told the outcome yet (it lives outside the database, so it is written after). The types
//! are here; the SQLite statements in `sqlite/cron_runs.rs`, PostgreSQL's in `postgres/`.

use super::ledger::{MAX_ERROR_CHARS, NewObligation, OwnerStamp};

/// Finished claims are kept this long (they only guard against a second run of the same
/// scheduled time, which cannot come back after that).
pub(crate) const CRON_RUN_RETENTION_SECONDS: f64 = 30.0 * 86_400.0;

/// One claim.
#[derive(Debug, Clone, PartialEq)]
pub struct CronRun {
    pub job_id: String,
    pub scheduled_at: i64,
    /// `running`, `finished` (ran to an outcome) or `interrupted` (its process died).
    pub state: String,
    pub session_id: Option<String>,
    pub owner: OwnerStamp,
    pub claimed_at: f64,
    /// `ok`, `error` or `interrupted`.
    pub status: Option<String>,
    pub error: Option<String>,
    pub obligation_ids: Vec<String>,
    pub job_recorded: bool,
    /// Whether the claim's owner is still running: its process on state.db; on PostgreSQL,
    /// its instance, which must still hold its lease (pids mean nothing across machines).
    /// A `running` claim of a dead owner was cut short.
    pub owner_alive: bool,
}

/// How a run ended, recorded with its replies.
#[derive(Debug, Clone)]
pub struct CronRunEnd {
    pub job_id: String,
    pub scheduled_at: i64,
    /// `finished` or `interrupted`.
    pub state: &'static str,
    pub status: String,
    pub error: Option<String>,
    pub replies: Vec<NewObligation>,
}

impl CronRunEnd {
    /// The ids of its replies' obligations, in order.
    pub fn obligation_ids(&self) -> Vec<String> {
        self.replies
            .iter()
            .map(NewObligation::obligation_id)
            .collect()
    }

    /// The error as stored: at most [`MAX_ERROR_CHARS`] characters.
    pub(crate) fn stored_error(&self) -> Option<String> {
        self.error
            .as_ref()
            .map(|e| e.chars().take(MAX_ERROR_CHARS).collect())
    }
}
