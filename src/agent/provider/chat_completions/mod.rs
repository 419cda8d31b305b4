//! `chat_completions`: the OpenAI-compatible `POST /chat/completions` wire format, request and
//! non-streamed reply. Lenient about what real servers send: content as parts, reasoning as
//! `reasoning_content` or `reasoning`, arguments as objects, ids missing, usage missing.

mod stream;

use serde_json::{Map, Value, json};

pub(crate) use stream::ChatStream;

use super::endpoint::Endpoint;
use super::error::ProviderError;
use super::parts::{ReplyParts, call_id_or_generated, count};
use super::prepared::Prepared;
use super::types::{FinishReason, Usage};
use crate::agent::message::{ChatMessage, Role, ToolCall, arguments_text, content_value_text};

/// The request body.
pub(crate) fn body(endpoint: &Endpoint, prepared: &Prepared) -> Value {
    let mut messages = Vec::with_capacity(prepared.messages.len() + 1);
    if let Some(system) = &prepared.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.extend(prepared.messages.iter().map(wire_message));
    let mut body = Map::new();
    body.insert("model".into(), json!(endpoint.model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(prepared.stream));
    if prepared.stream {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if !prepared.tools.is_empty() {
        body.insert("tools".into(), Value::Array(prepared.tools.to_vec()));
        body.insert("tool_choice".into(), json!("auto"));
    }
    if let Some(max_tokens) = prepared.max_tokens {
        // OpenAI's own API wants the newer name for current models; every other server
        // knows `max_tokens`.
        let name = if is_openai_host(&endpoint.base_url) {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body.insert(name.into(), json!(max_tokens));
    }
    Value::Object(body)
}

fn is_openai_host(base_url: &str) -> bool {
    reqwest::Url::parse(base_url)
        .ok()
        .is_some_and(|url| url.host_str() == Some("api.openai.com"))
}

/// A history message on the wire: our OpenAI shape minus `reasoning`, which providers either
/// reject or ignore, and with text where a server requires it.
fn wire_message(message: &ChatMessage) -> Value {
    let mut wire = Map::new();
    wire.insert("role".into(), json!(message.role));
    let content =
        match (&message.content, message.role) {
            _ if !message.images.is_empty() => {
                // OpenAI's content parts: the text, then each image as a data URL.
                let mut parts = vec![json!({"type": "text", "text": message.text()})];
                parts.extend(message.images.iter().map(
                    |image| json!({"type": "image_url", "image_url": {"url": image.data_url()}}),
                ));
                Value::Array(parts)
            }
            (Some(text), _) => json!(text),
            (None, Role::Assistant) => Value::Null,
            (None, _) => json!(""),
        };
    wire.insert("content".into(), content);
    if !message.tool_calls.is_empty() {
        wire.insert("tool_calls".into(), json!(message.tool_calls));
    }
    if let Some(id) = &message.tool_call_id {
        wire.insert("tool_call_id".into(), json!(id));
    }
    if let Some(name) = &message.name {
        wire.insert("name".into(), json!(name));
    }
    Value::Object(wire)
}

/// A non-streamed reply.
pub(crate) fn parse(body: &[u8]) -> Result<ReplyParts, ProviderError> {
    let value: Value = serde_json::from_slice(body).map_err(|error| {
        ProviderError::BadResponse(format!("the reply is not valid JSON ({error})"))
    })?;
    let choice = first_choice(&value)?;
    let message = choice
        .get("message")
        .ok_or_else(|| ProviderError::BadResponse("the first choice has no message".into()))?;
    let tool_calls: Vec<ToolCall> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(position, call)| ToolCall {
                    id: call_id_or_generated(call.get("id").and_then(Value::as_str), position),
                    name: text_at(call, "/function/name"),
                    arguments: arguments_text(
                        call.pointer("/function/arguments")
                            .cloned()
                            .unwrap_or(Value::Null),
                    ),
                })
                .collect()
        })
        .unwrap_or_default();
    let finish = FinishReason::from_openai(
        choice.get("finish_reason").and_then(Value::as_str),
        !tool_calls.is_empty(),
    );
    Ok(ReplyParts {
        content: content_value_text(message.get("content").cloned().unwrap_or(Value::Null))
            .unwrap_or_default(),
        reasoning: reasoning_text(message).unwrap_or_default(),
        tool_calls,
        finish: Some(finish),
        usage: value.get("usage").map(usage).unwrap_or_default(),
    })
}

fn first_choice(value: &Value) -> Result<&Value, ProviderError> {
    if let Some(error) = in_body_error(value) {
        return Err(error);
    }
    value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or_else(|| ProviderError::BadResponse("the provider returned no choices".into()))
}

/// An error object inside a 200 body or a stream chunk (OpenRouter relays upstream failures
/// this way): its numeric `code` gives the kind when there is one.
pub(crate) fn in_body_error(value: &Value) -> Option<ProviderError> {
    let error = value.get("error").filter(|error| !error.is_null())?;
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .unwrap_or("unknown error");
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok());
    Some(match status {
        Some(429) => ProviderError::RateLimited { retry_after: None },
        Some(status @ (401 | 403)) => ProviderError::Auth { status },
        Some(status @ 500..=599) => ProviderError::Server { status },
        _ => ProviderError::BadResponse(format!(
            "the provider reported an error: {}",
            super::error::clean_message(message, None)
        )),
    })
}

/// Reasoning as DeepSeek/vLLM (`reasoning_content`) or OpenRouter (`reasoning`) send it.
pub(crate) fn reasoning_text(message: &Value) -> Option<String> {
    ["reasoning_content", "reasoning"]
        .iter()
        .filter_map(|key| message.get(*key).and_then(Value::as_str))
        .find(|text| !text.is_empty())
        .map(str::to_owned)
}

fn text_at(value: &Value, pointer: &str) -> String {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Chat-completions usage: `prompt_tokens` includes cached tokens, which the details (or
/// Anthropic-style fields some proxies add, or DeepSeek's hit count) break out.
pub(crate) fn usage(value: &Value) -> Usage {
    let prompt = count(value.get("prompt_tokens"));
    let cache_read = [
        value.pointer("/prompt_tokens_details/cached_tokens"),
        value.get("cache_read_input_tokens"),
        value.get("prompt_cache_hit_tokens"),
    ]
    .into_iter()
    .map(count)
    .find(|n| *n > 0)
    .unwrap_or(0);
    let cache_write = [
        value.pointer("/prompt_tokens_details/cache_write_tokens"),
        value.get("cache_creation_input_tokens"),
    ]
    .into_iter()
    .map(count)
    .find(|n| *n > 0)
    .unwrap_or(0);
    let reasoning = [
        value.pointer("/completion_tokens_details/reasoning_tokens"),
        value.pointer("/output_tokens_details/reasoning_tokens"),
    ]
    .into_iter()
    .map(count)
    .find(|n| *n > 0)
    .unwrap_or(0);
    Usage {
        input_tokens: prompt.saturating_sub(cache_read + cache_write),
        output_tokens: count(value.get("completion_tokens")),
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
        reasoning_tokens: reasoning,
        api_calls: 0,
    }
}
