//! What goes into a model call and what comes out, the same for every API mode.

use serde::Serialize;

use crate::agent::message::{ChatMessage, ToolCall};

/// One model call. `system` is the system prompt; a leading system message in `messages` is
/// appended to it. `tools` are OpenAI function definitions
/// (`{"type":"function","function":{"name","description","parameters"}}`), converted for the
/// other API modes.
#[derive(Debug, Clone, Default)]
pub struct ModelRequest {
    pub system: Option<String>,
    pub messages: Vec<ChatMessage>,
    /// Shared: the same offer goes out with every call of a turn (`agent::tool_offer`).
    pub tools: std::sync::Arc<Vec<serde_json::Value>>,
    pub max_tokens: Option<u32>,
    /// Ask for a server-sent-event stream and report text as it arrives.
    pub stream: bool,
}

/// A complete answer from one provider. Never partial: a call that fails half-way returns an
/// error, not the text received so far.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    pub content: Option<String>,
    /// In the order the model produced them; several mean parallel calls.
    pub tool_calls: Vec<ToolCall>,
    pub reasoning: Option<String>,
    pub finish_reason: FinishReason,
    pub usage: Usage,
    /// The provider and model that answered (a fallback's, when the primary failed).
    pub provider: String,
    pub model: String,
}

impl ModelReply {
    /// The assistant message to append to the history.
    pub fn to_message(&self) -> ChatMessage {
        let mut message =
            ChatMessage::assistant_tool_calls(self.content.clone(), self.tool_calls.clone());
        message.reasoning = self.reasoning.clone();
        message
    }
}

/// Why the model stopped. Providers invent new values; those are kept in `Other`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    ToolCalls,
    /// The output token limit was reached: the reply is cut short.
    Length,
    ContentFilter,
    Other(String),
}

impl FinishReason {
    /// The OpenAI name (`stop`, `tool_calls`, `length`, `content_filter`), as Hermes stores it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stop => "stop",
            Self::ToolCalls => "tool_calls",
            Self::Length => "length",
            Self::ContentFilter => "content_filter",
            Self::Other(other) => other,
        }
    }

    /// Reads an OpenAI-style `finish_reason`; a missing one is inferred from the tool calls.
    pub(crate) fn from_openai(reason: Option<&str>, has_tool_calls: bool) -> Self {
        let reason = match reason {
            None | Some("") => return Self::inferred(has_tool_calls),
            Some(reason) => reason,
        };
        match reason {
            "stop" | "end_turn" | "eos" if has_tool_calls => Self::ToolCalls,
            "stop" | "end_turn" | "eos" => Self::Stop,
            "tool_calls" | "function_call" | "tool_use" => Self::ToolCalls,
            "length" | "max_tokens" => Self::Length,
            "content_filter" => Self::ContentFilter,
            other => Self::Other(other.to_owned()),
        }
    }

    /// `ToolCalls` when there are calls, else `Stop`. Some servers (Ollama, older vLLM) say
    /// `stop` or nothing at all even when they return tool calls.
    pub(crate) fn inferred(has_tool_calls: bool) -> Self {
        if has_tool_calls {
            Self::ToolCalls
        } else {
            Self::Stop
        }
    }
}

/// Token counts of one reply, in the buckets of Hermes' `sessions` table. `input_tokens`
/// excludes cached tokens (read or written), whatever the provider's own convention.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub reasoning_tokens: u64,
    /// HTTP requests made for this reply, counting retries and fallbacks.
    pub api_calls: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.api_calls += other.api_calls;
    }
}

/// Text arriving on a stream, for display while the reply is being written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamDelta {
    Text(String),
    Reasoning(String),
    /// The deltas sent so far are void: that attempt failed and another attempt (a retry or
    /// the next provider) starts from scratch. Sent only when deltas were sent before.
    Restart,
}
