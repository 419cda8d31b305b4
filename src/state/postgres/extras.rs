//! What a newer Hermes's columns and tables expect hermesd to keep writing once `state migrate`
//! carried them into PostgreSQL (`state/transfer/carried.rs`): the extras SQLite's
//! `sqlite/newer.rs` writes into such a state.db — per-model usage rows, title and creation
//! provenance, last activity, message uids — each only where its table or column exists, so
//! hermesd's rows read the same to that Hermes after a copy back. A database that never had
//! such a home carried in has none of them and is written exactly as before.
//!
//! Each extra rides in a statement the write makes anyway, except the usage row (one upsert per
//! usage record, as on SQLite).

use sqlx::postgres::PgPool;

use super::error::{PgError, PgResult};
use super::rows::db;
use super::tx::PgTx;
use crate::state::error::StoreResult;
use crate::state::model::{UsageDelta, now_epoch};

/// Which of a newer Hermes's columns and tables this database has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extras {
    /// `session_model_usage` (with its `task` column).
    pub model_usage: bool,
    /// `sessions.title_source`.
    pub title_source: bool,
    /// `sessions.created_source`.
    pub created_source: bool,
    /// `sessions.last_activity_at`.
    pub last_activity: bool,
    /// `messages.message_uid`.
    pub message_uid: bool,
}

impl Extras {
    /// Reads the catalogue once, at open (the schema only grows while no instance runs:
    /// `state migrate` refuses a database in use).
    pub async fn detect(pool: &PgPool) -> PgResult<Self> {
        let found: Vec<(String, String)> = sqlx::query_as(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND ( \
                 (table_name = 'sessions' AND column_name IN \
                     ('title_source', 'created_source', 'last_activity_at')) \
                 OR (table_name = 'messages' AND column_name = 'message_uid') \
                 OR (table_name = 'session_model_usage' AND column_name = 'task'))",
        )
        .fetch_all(super::retried(pool))
        .await
        .map_err(PgError::from)?;
        let has = |table: &str, column: &str| found.iter().any(|(t, c)| t == table && c == column);
        Ok(Self {
            model_usage: has("session_model_usage", "task"),
            title_source: has("sessions", "title_source"),
            created_source: has("sessions", "created_source"),
            last_activity: has("sessions", "last_activity_at"),
            message_uid: has("messages", "message_uid"),
        })
    }

    /// What the session counters' update also sets: `last_activity_at` moved forward to the
    /// bound parameter `$at`, never back.
    pub fn activity_assignment(&self, at: usize) -> String {
        if self.last_activity {
            format!(", last_activity_at = GREATEST(COALESCE(last_activity_at, ${at}), ${at})")
        } else {
            String::new()
        }
    }
}

/// Adds a usage delta to the session's row for its model and billing route; the main agent
/// loop's usage, which Hermes keys with the empty task. The route falls back to the session's.
pub async fn record_model_usage(tx: &mut PgTx, u: &UsageDelta) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO session_model_usage (session_id, model, billing_provider, billing_base_url, \
             billing_mode, task, api_call_count, input_tokens, output_tokens, cache_read_tokens, \
             cache_write_tokens, reasoning_tokens, estimated_cost_usd, actual_cost_usd, \
             first_seen, last_seen) \
         SELECT s.id, COALESCE($2, s.model, 'unknown'), COALESCE($3, s.billing_provider, ''), \
             COALESCE($4, s.billing_base_url, ''), COALESCE(s.billing_mode, ''), '', \
             $5, $6, $7, $8, $9, $10, $11, 0, $12, $12 \
         FROM sessions s WHERE s.id = $1 \
         ON CONFLICT ON CONSTRAINT session_model_usage_pkey DO UPDATE SET \
             api_call_count = session_model_usage.api_call_count + EXCLUDED.api_call_count, \
             input_tokens = session_model_usage.input_tokens + EXCLUDED.input_tokens, \
             output_tokens = session_model_usage.output_tokens + EXCLUDED.output_tokens, \
             cache_read_tokens = session_model_usage.cache_read_tokens + EXCLUDED.cache_read_tokens, \
             cache_write_tokens = session_model_usage.cache_write_tokens + EXCLUDED.cache_write_tokens, \
             reasoning_tokens = session_model_usage.reasoning_tokens + EXCLUDED.reasoning_tokens, \
             estimated_cost_usd = \
                 session_model_usage.estimated_cost_usd + EXCLUDED.estimated_cost_usd, \
             last_seen = EXCLUDED.last_seen",
    )
    .bind(&u.session_id)
    .bind(&u.model)
    .bind(&u.billing_provider)
    .bind(&u.billing_base_url)
    .bind(u.api_calls)
    .bind(u.input_tokens)
    .bind(u.output_tokens)
    .bind(u.cache_read_tokens)
    .bind(u.cache_write_tokens)
    .bind(u.reasoning_tokens)
    .bind(u.estimated_cost_usd.unwrap_or(0.0))
    .bind(now_epoch())
    .execute(&mut **tx)
    .await
    .map_err(db)?;
    Ok(())
}
