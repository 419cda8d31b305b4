//! Plain data types that cross the store's API: what callers write and what reads return.

use serde::Serialize;
use serde_json::Value;

/// Seconds since the Unix epoch as a float, the timestamp format of state.db.
pub fn now_epoch() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A session to create. Only `id` and `source` are required.
#[derive(Debug, Clone, Default)]
pub struct NewSession {
    pub id: String,
    pub source: String,
    pub user_id: Option<String>,
    pub model: Option<String>,
    pub model_config: Option<Value>,
    pub system_prompt: Option<String>,
    pub parent_session_id: Option<String>,
    /// Defaults to now.
    pub started_at: Option<f64>,
}

impl NewSession {
    pub fn new(id: impl Into<String>, source: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            source: source.into(),
            ..Self::default()
        }
    }
}

/// Message content: text, structured (multimodal) JSON, or nothing.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Json(Value),
}

/// A message to append to a session.
#[derive(Debug, Clone, Default)]
pub struct NewMessage {
    pub session_id: String,
    pub role: String,
    pub content: Option<Content>,
    pub tool_call_id: Option<String>,
    /// The list of tool-call objects; stored as JSON.
    pub tool_calls: Option<Value>,
    pub tool_name: Option<String>,
    /// Defaults to now.
    pub timestamp: Option<f64>,
    pub token_count: Option<i64>,
    pub finish_reason: Option<String>,
    pub reasoning: Option<String>,
    pub reasoning_content: Option<String>,
    pub reasoning_details: Option<Value>,
    pub codex_reasoning_items: Option<Value>,
    pub codex_message_items: Option<Value>,
}

impl NewMessage {
    pub fn text(session_id: impl Into<String>, role: impl Into<String>, text: &str) -> Self {
        Self {
            session_id: session_id.into(),
            role: role.into(),
            content: Some(Content::Text(text.to_owned())),
            ..Self::default()
        }
    }
}

/// Token and cost figures added to a session's totals after a model call.
#[derive(Debug, Clone, Default)]
pub struct UsageDelta {
    pub session_id: String,
    pub model: Option<String>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub reasoning_tokens: i64,
    pub api_calls: i64,
    pub estimated_cost_usd: Option<f64>,
    pub billing_provider: Option<String>,
    pub billing_base_url: Option<String>,
}

/// A session row as read back (the columns hermesd knows).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Session {
    pub id: String,
    pub source: String,
    pub user_id: Option<String>,
    pub model: Option<String>,
    pub model_config: Option<String>,
    pub system_prompt: Option<String>,
    pub parent_session_id: Option<String>,
    pub started_at: f64,
    pub ended_at: Option<f64>,
    pub end_reason: Option<String>,
    pub message_count: i64,
    pub tool_call_count: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub reasoning_tokens: i64,
    pub billing_provider: Option<String>,
    pub billing_base_url: Option<String>,
    pub estimated_cost_usd: Option<f64>,
    pub actual_cost_usd: Option<f64>,
    pub title: Option<String>,
    pub api_call_count: i64,
}

/// A message row as read back; JSON columns decoded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub id: i64,
    pub session_id: String,
    pub role: String,
    pub content: Option<Content>,
    pub tool_call_id: Option<String>,
    pub tool_calls: Option<Value>,
    pub tool_name: Option<String>,
    pub timestamp: f64,
    pub token_count: Option<i64>,
    pub finish_reason: Option<String>,
    pub reasoning: Option<String>,
    pub reasoning_content: Option<String>,
    pub reasoning_details: Option<Value>,
    pub codex_reasoning_items: Option<Value>,
    pub codex_message_items: Option<Value>,
}

/// A session in the "recent sessions" listing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionSummary {
    #[serde(flatten)]
    pub session: Session,
    /// The first 63 characters of the first user message.
    pub preview: String,
    /// The newest message's timestamp, or the start time.
    pub last_active: f64,
}

/// One ancestor or descendant in a compression lineage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineageEntry {
    pub id: String,
    pub title: Option<String>,
    pub started_at: f64,
    pub parent_session_id: Option<String>,
}

/// Token and cost totals for one model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelStats {
    pub model: String,
    pub session_count: i64,
    pub total_input: i64,
    pub total_output: i64,
    pub total_cost: Option<f64>,
}

/// Sessions of one source and model started since a moment (`/insights`).
#[derive(Debug, Clone, PartialEq)]
pub struct UsageGroup {
    pub source: String,
    pub model: Option<String>,
    pub sessions: i64,
    pub messages: i64,
    pub tool_calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost: Option<f64>,
}

/// A session with all its messages (export format, one JSON object per line for `export_all`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionExport {
    #[serde(flatten)]
    pub session: Session,
    pub messages: Vec<Message>,
}

/// A full-text search request.
#[derive(Debug, Clone)]
pub struct SearchQuery {
    pub query: String,
    pub source_filter: Vec<String>,
    pub exclude_sources: Vec<String>,
    pub role_filter: Vec<String>,
    pub limit: usize,
    pub offset: usize,
}

impl SearchQuery {
    pub fn new(query: impl Into<String>) -> Self {
        Self {
            query: query.into(),
            source_filter: Vec::new(),
            exclude_sources: Vec::new(),
            role_filter: Vec::new(),
            limit: 20,
            offset: 0,
        }
    }
}

/// One neighbour of a search hit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextLine {
    pub role: String,
    pub content: String,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    pub id: i64,
    pub session_id: String,
    pub role: String,
    pub snippet: String,
    pub timestamp: f64,
    pub tool_name: Option<String>,
    pub source: String,
    pub model: Option<String>,
    pub session_started: f64,
    pub context: Vec<ContextLine>,
}

/// Title provenance as Hermes records it: a title the user set, or one a model generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TitleSource {
    User,
    Generated,
}

impl TitleSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TitleSource::User => "user",
            TitleSource::Generated => "llm",
        }
    }
}
