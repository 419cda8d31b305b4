//! Decoding PostgreSQL rows into the store's types, as `read.rs` decodes state.db rows:
//! nullable counters read as 0, JSON columns decoded the same lenient way, and the columns
//! that may hold U+0000 (message content and reasoning, JSON, system prompts) through
//! [`super::pg_text`].

use sqlx::Row;
use sqlx::postgres::PgRow;

use super::error::PgError;
use super::pg_text::opt_from_pg;
use crate::state::encode::{decode_content, decode_json, decode_tool_calls};
use crate::state::error::StoreError;
use crate::state::model::{Message, Session};

/// A query failure as the store reports it.
pub fn db(error: sqlx::Error) -> StoreError {
    StoreError::from(PgError::Query(error))
}

/// The session and message columns, in the order [`session`] and [`message`] read them (the
/// names and order `read.rs` uses; the SQL is the same on both backends).
pub use crate::state::read::{MESSAGE_COLUMNS, SESSION_COLUMN_COUNT, SESSION_COLUMNS};

pub fn text(row: &PgRow, idx: usize) -> Result<Option<String>, sqlx::Error> {
    row.try_get::<Option<String>, _>(idx)
}

/// A column written through [`super::pg_text::to_pg`].
pub fn encoded(row: &PgRow, idx: usize) -> Result<Option<String>, sqlx::Error> {
    Ok(opt_from_pg(row.try_get::<Option<String>, _>(idx)?))
}

pub fn text_or_empty(row: &PgRow, idx: usize) -> Result<String, sqlx::Error> {
    Ok(text(row, idx)?.unwrap_or_default())
}

fn int_or_zero(row: &PgRow, idx: usize) -> Result<i64, sqlx::Error> {
    Ok(row.try_get::<Option<i64>, _>(idx)?.unwrap_or(0))
}

fn real_or_zero(row: &PgRow, idx: usize) -> Result<f64, sqlx::Error> {
    Ok(row.try_get::<Option<f64>, _>(idx)?.unwrap_or(0.0))
}

pub fn session(r: &PgRow) -> Result<Session, sqlx::Error> {
    Ok(Session {
        id: text_or_empty(r, 0)?,
        source: text_or_empty(r, 1)?,
        user_id: text(r, 2)?,
        model: text(r, 3)?,
        model_config: encoded(r, 4)?,
        system_prompt: encoded(r, 5)?,
        parent_session_id: text(r, 6)?,
        started_at: real_or_zero(r, 7)?,
        ended_at: r.try_get(8)?,
        end_reason: text(r, 9)?,
        message_count: int_or_zero(r, 10)?,
        tool_call_count: int_or_zero(r, 11)?,
        input_tokens: int_or_zero(r, 12)?,
        output_tokens: int_or_zero(r, 13)?,
        cache_read_tokens: int_or_zero(r, 14)?,
        cache_write_tokens: int_or_zero(r, 15)?,
        reasoning_tokens: int_or_zero(r, 16)?,
        billing_provider: text(r, 17)?,
        billing_base_url: text(r, 18)?,
        estimated_cost_usd: r.try_get(19)?,
        actual_cost_usd: r.try_get(20)?,
        title: text(r, 21)?,
        api_call_count: int_or_zero(r, 22)?,
    })
}

pub fn message(r: &PgRow) -> Result<Message, sqlx::Error> {
    Ok(Message {
        id: r.try_get(0)?,
        session_id: text_or_empty(r, 1)?,
        role: text_or_empty(r, 2)?,
        content: decode_content(encoded(r, 3)?),
        tool_call_id: text(r, 4)?,
        tool_calls: decode_tool_calls(encoded(r, 5)?),
        tool_name: text(r, 6)?,
        timestamp: real_or_zero(r, 7)?,
        token_count: r.try_get(8)?,
        finish_reason: text(r, 9)?,
        reasoning: encoded(r, 10)?,
        reasoning_content: encoded(r, 11)?,
        reasoning_details: decode_json(encoded(r, 12)?),
        codex_reasoning_items: decode_json(encoded(r, 13)?),
        codex_message_items: decode_json(encoded(r, 14)?),
    })
}
