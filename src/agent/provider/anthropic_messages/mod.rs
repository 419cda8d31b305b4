//! `anthropic_messages`: Anthropic's native Messages API. Our OpenAI-style history becomes
//! Messages blocks (system prompt apart, `tool_use` / `tool_result` blocks, consecutive tool
//! results in one user message) with prompt-cache markers placed as Hermes'
//! `prompt_caching.py` does.

mod reply;
mod request;
mod stream;

pub(crate) use reply::parse;
pub use request::DEFAULT_MAX_TOKENS;
pub(crate) use request::{body, headers};
pub(crate) use stream::AnthropicStream;

use serde_json::Value;

use super::error::{ProviderError, clean_message};
use super::parts::count;
use super::types::{FinishReason, Usage};

/// Anthropic's `stop_reason` in our terms.
fn finish_reason(stop_reason: &str) -> FinishReason {
    match stop_reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Messages usage: `input_tokens` already excludes the cache reads and writes.
fn usage(value: &Value) -> Usage {
    Usage {
        input_tokens: count(value.get("input_tokens")),
        output_tokens: count(value.get("output_tokens")),
        cache_read_tokens: count(value.get("cache_read_input_tokens")),
        cache_write_tokens: count(value.get("cache_creation_input_tokens")),
        reasoning_tokens: 0,
        api_calls: 0,
    }
}

/// An `{"type":"error","error":{"type","message"}}` body or stream event.
fn error_event(value: &Value) -> ProviderError {
    let kind = value
        .pointer("/error/type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let message = value
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("unknown error");
    match kind {
        "rate_limit_error" => ProviderError::RateLimited { retry_after: None },
        "overloaded_error" => ProviderError::Server { status: 529 },
        "api_error" => ProviderError::Server { status: 500 },
        "authentication_error" => ProviderError::Auth { status: 401 },
        "permission_error" => ProviderError::Auth { status: 403 },
        _ => ProviderError::BadResponse(format!(
            "the provider reported an error: {}",
            clean_message(message, None)
        )),
    }
}
