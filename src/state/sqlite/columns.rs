//! One decoder of session and message rows for both backends. A backend's row type says how
//! to read a column ([`Columns`]); what the columns mean (nullable counters read as 0, JSON
//! columns decoded leniently, content decoded from state.db's encoding) is written once here.

use crate::state::encode::{decode_content, decode_json, decode_tool_calls};
use crate::state::model::{Message, Session};

/// Reading the columns of one result row.
pub trait Columns {
    type Error;
    fn text(&self, idx: usize) -> Result<Option<String>, Self::Error>;
    /// A column that may hold U+0000 (message content and reasoning, JSON, system prompts),
    /// which a backend may have had to store escaped.
    fn encoded(&self, idx: usize) -> Result<Option<String>, Self::Error> {
        self.text(idx)
    }
    fn int(&self, idx: usize) -> Result<Option<i64>, Self::Error>;
    fn real(&self, idx: usize) -> Result<Option<f64>, Self::Error>;

    fn text_or_empty(&self, idx: usize) -> Result<String, Self::Error> {
        Ok(self.text(idx)?.unwrap_or_default())
    }
    /// An integer Hermes declares with a default but that may hold NULL.
    fn int_or_zero(&self, idx: usize) -> Result<i64, Self::Error> {
        Ok(self.int(idx)?.unwrap_or(0))
    }
    fn real_or_zero(&self, idx: usize) -> Result<f64, Self::Error> {
        Ok(self.real(idx)?.unwrap_or(0.0))
    }
}

impl Columns for rusqlite::Row<'_> {
    type Error = rusqlite::Error;
    /// Lenient: invalid UTF-8 from other writers becomes U+FFFD, numbers become text.
    fn text(&self, idx: usize) -> rusqlite::Result<Option<String>> {
        crate::state::encode::text(self, idx)
    }
    fn int(&self, idx: usize) -> rusqlite::Result<Option<i64>> {
        self.get(idx)
    }
    fn real(&self, idx: usize) -> rusqlite::Result<Option<f64>> {
        self.get(idx)
    }
}

/// A session from the columns of `read::SESSION_COLUMNS`, in that order.
pub fn session<C: Columns + ?Sized>(r: &C) -> Result<Session, C::Error> {
    Ok(Session {
        id: r.text_or_empty(0)?,
        source: r.text_or_empty(1)?,
        user_id: r.text(2)?,
        model: r.text(3)?,
        model_config: r.encoded(4)?,
        system_prompt: r.encoded(5)?,
        parent_session_id: r.text(6)?,
        started_at: r.real_or_zero(7)?,
        ended_at: r.real(8)?,
        end_reason: r.text(9)?,
        message_count: r.int_or_zero(10)?,
        tool_call_count: r.int_or_zero(11)?,
        input_tokens: r.int_or_zero(12)?,
        output_tokens: r.int_or_zero(13)?,
        cache_read_tokens: r.int_or_zero(14)?,
        cache_write_tokens: r.int_or_zero(15)?,
        reasoning_tokens: r.int_or_zero(16)?,
        billing_provider: r.text(17)?,
        billing_base_url: r.text(18)?,
        estimated_cost_usd: r.real(19)?,
        actual_cost_usd: r.real(20)?,
        title: r.text(21)?,
        api_call_count: r.int_or_zero(22)?,
    })
}

/// A message from the columns of `read::MESSAGE_COLUMNS`, in that order.
pub fn message<C: Columns + ?Sized>(r: &C) -> Result<Message, C::Error> {
    Ok(Message {
        id: r.int_or_zero(0)?,
        session_id: r.text_or_empty(1)?,
        role: r.text_or_empty(2)?,
        content: decode_content(r.encoded(3)?),
        tool_call_id: r.text(4)?,
        tool_calls: decode_tool_calls(r.encoded(5)?),
        tool_name: r.text(6)?,
        timestamp: r.real_or_zero(7)?,
        token_count: r.int(8)?,
        finish_reason: r.text(9)?,
        reasoning: r.encoded(10)?,
        reasoning_content: r.encoded(11)?,
        reasoning_details: decode_json(r.encoded(12)?),
        codex_reasoning_items: decode_json(r.encoded(13)?),
        codex_message_items: decode_json(r.encoded(14)?),
    })
}
