//! The durable claim of each scheduled run (`hermesd_cron_runs`, ours): a run is claimed
//! (`running`, with its owner process) before it starts and finished (`finished`, with its
//! reply obligations recorded in the same transaction) before anything is sent, so a crash
//! at any point leaves a run either unstarted, owed to the ledger, or visibly interrupted —
//! never run twice, never delivered twice. `job_recorded` says whether `jobs.json` has been
//! told the outcome yet (it lives outside the database, so it is written after).

use rusqlite::{Connection, Row, params};

use super::error::StoreResult;
use super::ledger::{MAX_ERROR_CHARS, NewObligation, OwnerStamp};
use super::model::now_epoch;
use super::outcome::Outcome;
use super::sqlite::gateway_commands::insert_obligation;
use super::sqlite::gateway_read::split_ids;

/// Claims, created with the rest of the gateway schema.
pub const CRON_RUNS_SQL: &str = "CREATE TABLE IF NOT EXISTS hermesd_cron_runs (
    job_id TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    state TEXT NOT NULL,
    session_id TEXT,
    owner_pid INTEGER,
    owner_started_at INTEGER,
    claimed_at REAL NOT NULL,
    finished_at REAL,
    status TEXT,
    error TEXT,
    obligation_ids TEXT,
    job_recorded INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, scheduled_at)
)";

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

pub(crate) fn row(r: &Row<'_>) -> rusqlite::Result<CronRun> {
    let owner = OwnerStamp {
        pid: r.get::<_, Option<i64>>(4)?.unwrap_or(0),
        started_at: r.get(5)?,
    };
    Ok(CronRun {
        job_id: r.get(0)?,
        scheduled_at: r.get(1)?,
        state: r.get(2)?,
        session_id: r.get(3)?,
        owner,
        claimed_at: r.get(6)?,
        status: r.get(7)?,
        error: r.get(8)?,
        obligation_ids: split_ids(r.get(9)?),
        job_recorded: r.get::<_, i64>(10)? != 0,
        owner_alive: owner.is_alive(),
    })
}

/// `INSERT OR IGNORE`: `Changed(1)` when this call claimed the run.
pub fn claim(
    conn: &Connection,
    job_id: &str,
    scheduled_at: i64,
    session_id: &str,
    owner: OwnerStamp,
) -> StoreResult<Outcome> {
    Ok(Outcome::Changed(conn.execute(
        "INSERT OR IGNORE INTO hermesd_cron_runs
             (job_id, scheduled_at, state, session_id, owner_pid, owner_started_at, claimed_at)
         VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6)",
        params![
            job_id,
            scheduled_at,
            session_id,
            owner.pid,
            owner.started_at,
            now_epoch()
        ],
    )?))
}

/// Ends a `running` claim and records its replies; `Changed(0)` (and nothing recorded)
/// when the claim had already ended.
pub fn finish(conn: &Connection, end: &CronRunEnd, owner: OwnerStamp) -> StoreResult<Outcome> {
    let now = now_epoch();
    let (ids, error) = (end.obligation_ids(), end.stored_error());
    let changed = conn.execute(
        "UPDATE hermesd_cron_runs
         SET state = ?1, status = ?2, error = ?3, obligation_ids = ?4, finished_at = ?5
         WHERE job_id = ?6 AND scheduled_at = ?7 AND state = 'running'",
        params![
            end.state,
            end.status,
            error,
            ids.join(","),
            now,
            end.job_id,
            end.scheduled_at
        ],
    )?;
    if changed == 0 {
        return Ok(Outcome::Changed(0));
    }
    for reply in &end.replies {
        insert_obligation(conn, reply, owner)?;
    }
    conn.execute(
        "DELETE FROM hermesd_cron_runs WHERE job_recorded = 1 AND finished_at < ?1",
        [now - CRON_RUN_RETENTION_SECONDS],
    )?;
    Ok(Outcome::Changed(changed))
}

pub fn mark_recorded(conn: &Connection, job_id: &str, scheduled_at: i64) -> StoreResult<Outcome> {
    Ok(Outcome::Changed(conn.execute(
        "UPDATE hermesd_cron_runs SET job_recorded = 1
         WHERE job_id = ?1 AND scheduled_at = ?2 AND state != 'running'",
        params![job_id, scheduled_at],
    )?))
}
