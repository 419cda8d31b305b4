//! A Responses `response` object → reply parts; used for non-streamed replies and for the
//! final object of a stream.

use serde_json::Value;

use crate::agent::message::{ToolCall, arguments_text};
use crate::agent::provider::error::{ProviderError, clean_message};
use crate::agent::provider::parts::{ReplyParts, call_id_or_generated, count};
use crate::agent::provider::types::{FinishReason, Usage};

pub(crate) fn parse(body: &[u8]) -> Result<ReplyParts, ProviderError> {
    let value: Value = serde_json::from_slice(body).map_err(|error| {
        ProviderError::BadResponse(format!("the reply is not valid JSON ({error})"))
    })?;
    let parts = response_parts(&value)?;
    // An incomplete response (content filter, token limit) may rightly have no output.
    if is_empty(&parts) && parts.finish.is_none() {
        return Err(ProviderError::BadResponse(
            "the provider returned no output".into(),
        ));
    }
    Ok(parts)
}

pub(crate) fn is_empty(parts: &ReplyParts) -> bool {
    parts.content.is_empty() && parts.tool_calls.is_empty() && parts.reasoning.is_empty()
}

/// Everything a response object says; empty output is left for the caller to judge.
pub(crate) fn response_parts(response: &Value) -> Result<ReplyParts, ProviderError> {
    let status = response
        .get("status")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    if matches!(status.as_deref(), Some("failed" | "cancelled")) || has_error(response) {
        return Err(failure(response.get("error"), status.as_deref()));
    }
    let mut parts = ReplyParts::default();
    for item in response
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        output_item(item, &mut parts);
    }
    if parts.content.is_empty()
        && let Some(text) = response.get("output_text").and_then(Value::as_str)
    {
        parts.content.push_str(text);
    }
    parts.finish = match status.as_deref() {
        Some("incomplete") => Some(incomplete_reason(response)),
        Some("completed") | None => None,
        Some(other) => Some(FinishReason::Other(other.to_owned())),
    };
    parts.usage = response.get("usage").map(usage).unwrap_or_default();
    Ok(parts)
}

fn has_error(response: &Value) -> bool {
    response.get("error").is_some_and(|error| !error.is_null()) && response.get("output").is_none()
}

fn output_item(item: &Value, parts: &mut ReplyParts) {
    let texts = |key: &str| -> Vec<String> {
        item.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    };
    match item.get("type").and_then(Value::as_str) {
        Some("message") => {
            let text = item
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|part| part.get("text").or_else(|| part.get("refusal")))
                .filter_map(Value::as_str)
                .collect::<String>();
            // Commentary-phase text is narration between tool calls, not the answer (as in
            // Hermes): it is shown as reasoning.
            match item.get("phase").and_then(Value::as_str) {
                Some("commentary" | "analysis") => parts.push_reasoning_block(&text),
                _ => parts.content.push_str(&text),
            }
        }
        Some("reasoning") => {
            let summary = texts("summary");
            let text = if summary.is_empty() {
                texts("content")
            } else {
                summary
            };
            parts.push_reasoning_block(&text.join("\n"));
        }
        Some("function_call") => {
            let position = parts.tool_calls.len();
            let id = item
                .get("call_id")
                .or_else(|| item.get("id"))
                .and_then(Value::as_str);
            parts.tool_calls.push(ToolCall {
                id: call_id_or_generated(id, position),
                name: item
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                arguments: arguments_text(item.get("arguments").cloned().unwrap_or(Value::Null)),
            });
        }
        _ => {} // built-in tool calls run by the provider
    }
}

fn incomplete_reason(response: &Value) -> FinishReason {
    match response
        .pointer("/incomplete_details/reason")
        .and_then(Value::as_str)
    {
        Some("max_output_tokens") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_owned()),
        None => FinishReason::Other("incomplete".into()),
    }
}

/// A failed response or an `error` event: `code: message`, classified by code.
pub(crate) fn failure(error: Option<&Value>, status: Option<&str>) -> ProviderError {
    let code = error
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    match code {
        "rate_limit_exceeded" => ProviderError::RateLimited { retry_after: None },
        "server_error" | "server_is_overloaded" => ProviderError::Server { status: 500 },
        _ => {
            let detail = match (code, message) {
                ("", "") => format!("the response {}", status.unwrap_or("failed")),
                ("", message) => message.to_owned(),
                (code, "") => code.to_owned(),
                (code, message) => format!("{code}: {message}"),
            };
            ProviderError::BadResponse(format!(
                "the provider reported an error: {}",
                clean_message(&detail, None)
            ))
        }
    }
}

/// Responses usage: `input_tokens` includes the cached ones, broken out in the details.
fn usage(value: &Value) -> Usage {
    let cache_read = count(value.pointer("/input_tokens_details/cached_tokens"));
    Usage {
        input_tokens: count(value.get("input_tokens")).saturating_sub(cache_read),
        output_tokens: count(value.get("output_tokens")),
        cache_read_tokens: cache_read,
        cache_write_tokens: 0,
        reasoning_tokens: count(value.pointer("/output_tokens_details/reasoning_tokens")),
        api_calls: 0,
    }
}
