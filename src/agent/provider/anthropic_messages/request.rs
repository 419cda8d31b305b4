//! OpenAI-style history and tools → a Messages request, with cache markers.

use std::collections::HashSet;

use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

use crate::agent::message::{ChatMessage, Role};
use crate::agent::provider::endpoint::Endpoint;
use crate::agent::provider::prepared::Prepared;
use crate::agent::provider::transport::secret_header;

/// Messages requires `max_tokens`; this is used when the caller sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;
const API_VERSION: &str = "2023-06-01";
/// Anthropic allows four cache breakpoints per request.
const CACHE_BREAKPOINTS: usize = 4;

pub(crate) fn headers(endpoint: &Endpoint) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = vec![(
        HeaderName::from_static("anthropic-version"),
        HeaderValue::from_static(API_VERSION),
    )];
    if let Some(key) = &endpoint.api_key {
        headers.extend(secret_header(
            HeaderName::from_static("x-api-key"),
            key.expose(),
        ));
    }
    headers
}

pub(crate) fn body(endpoint: &Endpoint, prepared: &Prepared) -> Value {
    let marked = cache_marked(prepared);
    let mut messages: Vec<Value> = Vec::with_capacity(prepared.messages.len());
    for (index, message) in prepared.messages.iter().enumerate() {
        let cache = marked.contains(&index);
        match message.role {
            Role::Tool => push_tool_result(&mut messages, message, cache),
            Role::Assistant => messages.push(json!({
                "role": "assistant",
                "content": assistant_blocks(message, cache),
            })),
            Role::User | Role::System => messages.push(json!({
                "role": "user",
                "content": user_content(message, cache),
            })),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(endpoint.model));
    body.insert(
        "max_tokens".into(),
        json!(prepared.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if let Some(system) = &prepared.system {
        body.insert(
            "system".into(),
            json!([{"type": "text", "text": system, "cache_control": marker()}]),
        );
    }
    body.insert("messages".into(), Value::Array(messages));
    let tools = tools(prepared.tools);
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(prepared.stream));
    Value::Object(body)
}

fn marker() -> Value {
    json!({"type": "ephemeral"})
}

/// Hermes' `system_and_3` layout: the system prompt plus the last three messages (the last
/// four when there is no system prompt), so each turn re-reads the previous turns from cache.
fn cache_marked(prepared: &Prepared) -> HashSet<usize> {
    let budget = CACHE_BREAKPOINTS - usize::from(prepared.system.is_some());
    let len = prepared.messages.len();
    (len.saturating_sub(budget)..len).collect()
}

fn user_content(message: &ChatMessage, cache: bool) -> Value {
    let text = match message.text() {
        text if text.trim().is_empty() => "(empty message)",
        text => text,
    };
    if message.images.is_empty() {
        return if cache {
            json!([{"type": "text", "text": text, "cache_control": marker()}])
        } else {
            json!(text)
        };
    }
    // Anthropic's base64 image blocks, placed before the text as its documentation advises;
    // the cache marker goes on the last block, as for any other message.
    let mut blocks: Vec<Value> = message.images.iter().map(image_block).collect();
    let mut last = json!({"type": "text", "text": text});
    if cache {
        last["cache_control"] = marker();
    }
    blocks.push(last);
    Value::Array(blocks)
}

/// Anthropic's base64 image block.
fn image_block(image: &crate::agent::message::ImagePart) -> Value {
    json!({"type": "image", "source": {
        "type": "base64",
        "media_type": image.media_type(),
        "data": image.base64(),
    }})
}

fn assistant_blocks(message: &ChatMessage, cache: bool) -> Value {
    let mut blocks: Vec<Value> = Vec::new();
    if !message.text().is_empty() {
        blocks.push(json!({"type": "text", "text": message.text()}));
    }
    for call in &message.tool_calls {
        // Messages wants the input as an object; unparsable arguments become `{}` (the
        // original text stays in our history).
        let input = serde_json::from_str::<Value>(&call.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        blocks.push(json!({
            "type": "tool_use",
            "id": tool_id(&call.id),
            "name": call.name,
            "input": input,
        }));
    }
    if blocks.is_empty() {
        blocks.push(json!({"type": "text", "text": "(empty)"}));
    }
    if cache && let Some(Value::Object(last)) = blocks.last_mut() {
        last.insert("cache_control".into(), marker());
    }
    Value::Array(blocks)
}

/// Tool results become `tool_result` blocks; consecutive ones share one user message.
fn push_tool_result(messages: &mut Vec<Value>, message: &ChatMessage, cache: bool) {
    let content = match message.text() {
        "" => "(no output)",
        text => text,
    };
    // Images a tool returned go inside its result, after the text: a `tool_result`'s content
    // may be a list of text and image blocks
    // (https://docs.anthropic.com/en/docs/build-with-claude/tool-use, "tool_result").
    let content = if message.images.is_empty() {
        json!(content)
    } else {
        let mut blocks = vec![json!({"type": "text", "text": content})];
        blocks.extend(message.images.iter().map(image_block));
        Value::Array(blocks)
    };
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": tool_id(message.tool_call_id.as_deref().unwrap_or_default()),
        "content": content,
    });
    if cache {
        block["cache_control"] = marker();
    }
    let previous_results = messages.last_mut().and_then(|last| {
        let blocks = last.get_mut("content")?.as_array_mut()?;
        let is_results = blocks.first()?.get("type")? == "tool_result";
        is_results.then_some(blocks)
    });
    match previous_results {
        Some(blocks) => blocks.push(block),
        None => messages.push(json!({"role": "user", "content": [block]})),
    }
}

/// Anthropic accepts tool ids of `[A-Za-z0-9_-]` only; both sides of a pair are mapped the
/// same way, so they still match.
fn tool_id(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "tool_0".to_owned()
    } else {
        clean
    }
}

/// OpenAI function definitions → Messages tools. A duplicate name would fail the whole request,
/// so later duplicates are dropped.
fn tools(tools: &[Value]) -> Vec<Value> {
    let mut seen = HashSet::new();
    tools
        .iter()
        .filter_map(|tool| {
            let function = tool.get("function")?;
            let name = function.get("name")?.as_str()?;
            if !seen.insert(name.to_owned()) {
                tracing::warn!(tool = name, "dropping a duplicate tool definition");
                return None;
            }
            let schema = function
                .get("parameters")
                .filter(|schema| schema.is_object())
                .cloned()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            Some(json!({
                "name": name,
                "description": function.get("description").and_then(Value::as_str).unwrap_or_default(),
                "input_schema": schema,
            }))
        })
        .collect()
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
