//! Gateway reads on PostgreSQL (the counterpart of `state/gateway_read.rs` and the reads in
//! `cron_runs.rs` and `dead_letters.rs`): the same rows, in the same order, with "owner
//! alive" meaning that the owning instance still holds its lease.

use std::collections::BTreeMap;

use sqlx::AssertSqlSafe;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::ledger_writes::pg_owner_alive;
use super::store::PgStore;
use super::tx::Db;
use crate::state::cron_runs::CronRun;
use crate::state::dead_letters::DeadLetterRow;
use crate::state::error::{StoreError, StoreResult};
use crate::state::ledger::{
    InboundEvent, OBLIGATION_MAX_ATTEMPTS, OBLIGATION_STALE_AFTER_SECONDS, Obligation,
    ObligationState, OwnerStamp,
};
use crate::state::sqlite::gateway_read::{
    INBOUND_COLUMNS, OBLIGATION_COLUMNS, UnknownState, inbound_event, split_ids,
};

fn bad_state(table: &str, state: &str) -> StoreError {
    StoreError::Invalid(format!("unknown {table} state {state:?}"))
}

fn inbound(r: &PgRow) -> StoreResult<InboundEvent> {
    inbound_event(
        (r.try_get(0).db()?, r.try_get(1).db()?, r.try_get(2).db()?),
        r.try_get(3).db()?,
        r.try_get(4).db()?,
        (r.try_get(5).db()?, r.try_get(6).db()?),
        r.try_get(7).db()?,
    )
    .map_err(|UnknownState(state)| bad_state("inbound", &state))
}

pub(super) fn obligation(r: &PgRow) -> StoreResult<Obligation> {
    let state: String = r.try_get(6).db()?;
    let state = ObligationState::parse(&state).ok_or_else(|| bad_state("obligation", &state))?;
    Ok(Obligation {
        obligation_id: r.try_get(0).db()?,
        session_key: r.try_get(1).db()?,
        platform: r.try_get(2).db()?,
        chat_id: r.try_get(3).db()?,
        thread_id: r.try_get(4).db()?,
        content: r.try_get(5).db()?,
        state,
        attempts: r.try_get(7).db()?,
        created_at: r.try_get(8).db()?,
        updated_at: r.try_get(9).db()?,
        owner_pid: r.try_get(10).db()?,
        owner_started_at: r.try_get(11).db()?,
        last_error: r.try_get(12).db()?,
        ambiguous: state.is_ambiguous(),
    })
}

/// The cron-run columns, the last one whether the owner instance is alive.
const CRON_RUN_COLUMNS: &str = concat!(
    "job_id, scheduled_at, state, session_id, owner_pid, owner_started_at, claimed_at, \
     status, error, obligation_ids, job_recorded, ",
    pg_owner_alive!(),
    " AS owner_alive"
);

fn cron_run(r: &PgRow) -> StoreResult<CronRun> {
    Ok(CronRun {
        job_id: r.try_get(0).db()?,
        scheduled_at: r.try_get(1).db()?,
        state: r.try_get(2).db()?,
        session_id: r.try_get(3).db()?,
        owner: OwnerStamp {
            pid: r.try_get::<Option<i64>, _>(4).db()?.unwrap_or(0),
            started_at: r.try_get(5).db()?,
        },
        claimed_at: r.try_get(6).db()?,
        status: r.try_get(7).db()?,
        error: r.try_get(8).db()?,
        obligation_ids: split_ids(r.try_get(9).db()?),
        job_recorded: r.try_get::<i64, _>(10).db()? != 0,
        owner_alive: r.try_get(11).db()?,
    })
}

impl PgStore {
    /// Received or processing events in journal order (`seq`, not `received_at`).
    pub(crate) async fn unfinished_inbound(&self) -> StoreResult<Vec<InboundEvent>> {
        let sql = format!(
            "SELECT {INBOUND_COLUMNS} FROM hermesd_inbound_events \
             WHERE state IN ('received', 'processing') ORDER BY seq"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .fetch_all(super::retried(self.pool()))
            .await
            .db()?;
        rows.iter().map(inbound).collect()
    }

    /// One session's received or processing events in journal order, through the partial
    /// index of unfinished events by session (migration 0007).
    pub(crate) async fn unfinished_inbound_of(
        &self,
        session_key: &str,
    ) -> StoreResult<Vec<InboundEvent>> {
        let sql = format!(
            "SELECT {INBOUND_COLUMNS} FROM hermesd_inbound_events \
             WHERE state IN ('received', 'processing') AND session_key = $1 ORDER BY seq"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(session_key)
            .fetch_all(super::retried(self.pool()))
            .await
            .db()?;
        rows.iter().map(inbound).collect()
    }

    pub(crate) async fn has_unfinished_inbound(&self, session_key: &str) -> StoreResult<bool> {
        let row = sqlx::query(
            "SELECT EXISTS (SELECT 1 FROM hermesd_inbound_events \
             WHERE state IN ('received', 'processing') AND session_key = $1) AS found",
        )
        .bind(session_key)
        .fetch_one(super::retried(self.pool()))
        .await
        .db()?;
        Ok(row.get("found"))
    }

    pub(crate) async fn get_inbound(
        &self,
        platform: &str,
        event_id: &str,
    ) -> StoreResult<Option<InboundEvent>> {
        let sql = format!(
            "SELECT {INBOUND_COLUMNS} FROM hermesd_inbound_events \
             WHERE platform = $1 AND event_id = $2"
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(platform)
            .bind(event_id)
            .fetch_optional(super::retried(self.pool()))
            .await
            .db()?;
        row.as_ref().map(inbound).transpose()
    }

    pub(crate) async fn reply_edit_target(&self, id: &str) -> StoreResult<Option<String>> {
        sqlx::query_scalar("SELECT message_id FROM hermesd_reply_edits WHERE obligation_id = $1")
            .bind(id)
            .fetch_optional(super::retried(self.pool()))
            .await
            .db()
    }

    /// Ledger rows still owed (`pending` or `attempting`), on every instance.
    pub(crate) async fn owed_replies(&self) -> StoreResult<u64> {
        let (count,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM delivery_obligations WHERE state IN ('pending', 'attempting')",
        )
        .fetch_one(super::retried(self.pool()))
        .await
        .db()?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    pub(crate) async fn get_obligation(&self, id: &str) -> StoreResult<Option<Obligation>> {
        let sql = format!(
            "SELECT {OBLIGATION_COLUMNS} FROM delivery_obligations WHERE obligation_id = $1"
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(super::retried(self.pool()))
            .await
            .db()?;
        row.as_ref().map(obligation).transpose()
    }

    /// Undelivered rows within the attempt cap and the stale cutoff whose owner instance no
    /// longer holds its lease (this instance's own rows are in its hands), oldest first.
    pub(crate) async fn undelivered(&self, now: f64) -> StoreResult<Vec<Obligation>> {
        let sql = format!(
            "SELECT {OBLIGATION_COLUMNS} FROM delivery_obligations o \
             WHERE state IN ('pending', 'attempting', 'failed') \
               AND attempts < $1 AND $2 - created_at <= $3 AND NOT {} \
             ORDER BY created_at, seq",
            pg_owner_alive!()
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(OBLIGATION_MAX_ATTEMPTS)
            .bind(now)
            .bind(OBLIGATION_STALE_AFTER_SECONDS)
            .fetch_all(super::retried(self.pool()))
            .await
            .db()?;
        rows.iter().map(obligation).collect()
    }

    /// The routing index of `scope`; a row whose JSON does not parse is skipped with a
    /// warning.
    pub(crate) async fn load_routing(
        &self,
        scope: &str,
    ) -> StoreResult<BTreeMap<String, serde_json::Value>> {
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT session_key, entry_json FROM gateway_routing WHERE scope = $1")
                .bind(scope)
                .fetch_all(super::retried(self.pool()))
                .await
                .db()?;
        Ok(crate::state::sqlite::gateway_read::parse_routing(
            scope, rows,
        ))
    }

    /// One routing entry of `scope` by its primary key; `None` when absent or unparsable.
    pub(crate) async fn load_routing_entry(
        &self,
        scope: &str,
        session_key: &str,
    ) -> StoreResult<Option<serde_json::Value>> {
        let json: Option<String> = sqlx::query_scalar(
            "SELECT entry_json FROM gateway_routing WHERE scope = $1 AND session_key = $2",
        )
        .bind(scope)
        .bind(session_key)
        .fetch_optional(super::retried(self.pool()))
        .await
        .db()?;
        Ok(json.and_then(|json| {
            crate::state::sqlite::gateway_read::parse_routing(
                scope,
                vec![(session_key.to_owned(), json)],
            )
            .into_values()
            .next()
        }))
    }

    /// Claims still `running`, and ended runs whose outcome `jobs.json` has not had yet.
    pub(crate) async fn open_cron_runs(&self) -> StoreResult<Vec<CronRun>> {
        let sql = format!(
            "SELECT {CRON_RUN_COLUMNS} FROM hermesd_cron_runs o \
             WHERE state = 'running' OR job_recorded = 0 ORDER BY claimed_at"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .fetch_all(super::retried(self.pool()))
            .await
            .db()?;
        rows.iter().map(cron_run).collect()
    }

    /// Every claim of one job, newest first.
    pub(crate) async fn cron_runs_of(&self, job_id: &str) -> StoreResult<Vec<CronRun>> {
        let sql = format!(
            "SELECT {CRON_RUN_COLUMNS} FROM hermesd_cron_runs o \
             WHERE job_id = $1 ORDER BY claimed_at DESC"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(job_id)
            .fetch_all(super::retried(self.pool()))
            .await
            .db()?;
        rows.iter().map(cron_run).collect()
    }

    /// Every kept dead letter, oldest first.
    pub(crate) async fn dead_letters(&self) -> StoreResult<Vec<DeadLetterRow>> {
        let rows: Vec<(String, String, Option<String>, String, String, f64)> = sqlx::query_as(
            "SELECT platform, item_id, chat_id, raw, error, received_at \
             FROM hermesd_dead_letters ORDER BY received_at, seq",
        )
        .fetch_all(super::retried(self.pool()))
        .await
        .db()?;
        Ok(rows
            .into_iter()
            .map(
                |(platform, item_id, chat_id, raw, error, received_at)| DeadLetterRow {
                    platform,
                    item_id,
                    chat_id,
                    raw,
                    error,
                    received_at,
                },
            )
            .collect())
    }
}

impl PgStore {
    /// Which of `call_ids` (calls of `session_id`) were marked as started.
    pub(crate) async fn started_tool_calls(
        &self,
        session_id: &str,
        call_ids: &[String],
    ) -> StoreResult<std::collections::HashSet<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT call_id FROM hermesd_tool_starts WHERE session_id = $1 AND call_id = ANY($2)",
        )
        .bind(session_id)
        .bind(call_ids)
        .fetch_all(super::retry::retried(self.pool()))
        .await
        .db()?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }
}
