//! The model a server's sampling request is answered by, seen from the tools side: a trait
//! the agent's model client implements and the daemon injects into the MCP hub, so the MCP
//! client never names the agent's provider or message types.

use std::sync::Arc;

use futures_util::future::BoxFuture;

/// Who wrote a turn of a sampling conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingRole {
    User,
    Assistant,
}

/// An image a server sent, as the protocol carries it (base64 data with its media type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplingImage {
    pub mime_type: String,
    pub data: String,
}

/// One turn of the server's conversation: its text blocks joined, its images attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplingTurn {
    pub role: SamplingRole,
    pub text: String,
    pub images: Vec<SamplingImage>,
}

/// A request to answer, already within the server's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplingRequest {
    pub system: Option<String>,
    pub turns: Vec<SamplingTurn>,
    pub max_tokens: u32,
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplingReply {
    /// The model that answered (a fallback's, when the first failed).
    pub model: String,
    pub text: String,
    /// Input and output tokens together, for the log line.
    pub tokens: u64,
    /// The answer stopped at `max_tokens` rather than where the model ended it.
    pub hit_token_limit: bool,
}

/// Why the model gave no answer; the text is what the server is told.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct SamplingFailure(pub String);

/// A model that can answer sampling requests.
pub trait SamplingModel: Send + Sync + 'static {
    /// The model to use: `configured` (the server's `sampling.model`) when set, else the
    /// first of `hints` some configured endpoint serves, else this one.
    fn choose(&self, configured: Option<&str>, hints: &[&str]) -> Arc<dyn SamplingModel>;

    /// The name of the model a request goes to first.
    fn model_name(&self) -> String;

    /// One answer, without streaming and without tools.
    fn answer(
        &self,
        request: SamplingRequest,
    ) -> BoxFuture<'_, Result<SamplingReply, SamplingFailure>>;
}
