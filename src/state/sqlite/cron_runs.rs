//! The cron-run claims (`hermesd_cron_runs`, see `state::cron_runs`) on state.db: the
//! table, and claiming, finishing and marking a run recorded inside the writer.

use rusqlite::{Connection, Row, params};

use super::gateway_commands::insert_obligation;
use super::gateway_read::split_ids;
use crate::state::cron_runs::{CRON_RUN_RETENTION_SECONDS, CronRun, CronRunEnd};
use crate::state::error::StoreResult;
use crate::state::ledger::OwnerStamp;
use crate::state::model::now_epoch;
use crate::state::outcome::Outcome;

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
