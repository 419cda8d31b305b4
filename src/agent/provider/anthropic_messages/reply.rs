//! A non-streamed Messages reply: content blocks (`text`, `thinking`, `tool_use`),
//! `stop_reason`, usage.

use serde_json::Value;

use super::{error_event, finish_reason, usage};
use crate::agent::message::ToolCall;
use crate::agent::provider::error::ProviderError;
use crate::agent::provider::parts::{ReplyParts, call_id_or_generated};

pub(crate) fn parse(body: &[u8]) -> Result<ReplyParts, ProviderError> {
    let value: Value = serde_json::from_slice(body).map_err(|error| {
        ProviderError::BadResponse(format!("the reply is not valid JSON ({error})"))
    })?;
    if value.get("type").and_then(Value::as_str) == Some("error") {
        return Err(error_event(&value));
    }
    let blocks = value
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| ProviderError::BadResponse("the reply has no content blocks".into()))?;
    let mut parts = ReplyParts::default();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                parts.content.push_str(
                    block
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                );
            }
            Some("thinking") => parts.push_reasoning_block(
                block
                    .get("thinking")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            ),
            Some("tool_use") => {
                let position = parts.tool_calls.len();
                parts.tool_calls.push(ToolCall {
                    id: call_id_or_generated(block.get("id").and_then(Value::as_str), position),
                    name: block
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    arguments: block
                        .get("input")
                        .filter(|input| !input.is_null())
                        .map_or_else(|| "{}".to_owned(), Value::to_string),
                });
            }
            // redacted_thinking, server tool blocks, citations: nothing to keep.
            _ => {}
        }
    }
    parts.finish = value
        .get("stop_reason")
        .and_then(Value::as_str)
        .map(finish_reason);
    parts.usage = value.get("usage").map(usage).unwrap_or_default();
    Ok(parts)
}
