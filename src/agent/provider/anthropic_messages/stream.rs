//! A streamed Messages reply: `message_start`, per-block `content_block_start` / `_delta` /
//! `_stop`, `message_delta` (stop reason, output usage), `message_stop`; `ping` and `error`
//! may come at any time.

use std::collections::HashMap;

use serde_json::Value;

use super::{error_event, finish_reason, usage};
use crate::agent::provider::error::ProviderError;
use crate::agent::provider::parts::{CallFragments, ReplyParts};
use crate::agent::provider::sse::SseEvent;
use crate::agent::provider::types::StreamDelta;

#[derive(Debug, Default)]
pub(crate) struct AnthropicStream {
    parts: ReplyParts,
    calls: CallFragments,
    /// Tool-use blocks by index: the input given at the start, and whether deltas followed.
    tool_inputs: HashMap<u64, (String, bool)>,
    stop_reason: Option<String>,
    started: bool,
    done: bool,
}

impl AnthropicStream {
    pub fn event(
        &mut self,
        event: &SseEvent,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<(), ProviderError> {
        if event.data.trim().is_empty() {
            return Ok(());
        }
        let value: Value = serde_json::from_str(&event.data).map_err(|error| {
            ProviderError::BadResponse(format!("a stream event is not valid JSON ({error})"))
        })?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or_default();
        let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                self.started = true;
                if let Some(counts) = value.pointer("/message/usage") {
                    self.parts.usage = usage(counts);
                }
            }
            "content_block_start" => self.block_start(index, value.get("content_block"), on_delta),
            "content_block_delta" => self.block_delta(index, value.get("delta"), on_delta),
            "content_block_stop" => self.block_stop(index),
            "message_delta" => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                // Cumulative counts; input figures appear here only on some gateways.
                if let Some(counts) = value.get("usage") {
                    let update = usage(counts);
                    let total = &mut self.parts.usage;
                    total.output_tokens = update.output_tokens.max(total.output_tokens);
                    total.input_tokens = update.input_tokens.max(total.input_tokens);
                    total.cache_read_tokens = update.cache_read_tokens.max(total.cache_read_tokens);
                    total.cache_write_tokens =
                        update.cache_write_tokens.max(total.cache_write_tokens);
                }
            }
            "message_stop" => self.done = true,
            "error" => return Err(error_event(&value)),
            _ => {} // ping and future event types
        }
        Ok(())
    }

    fn block_start(
        &mut self,
        index: u64,
        block: Option<&Value>,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) {
        let Some(block) = block else { return };
        match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => {
                let input = block
                    .get("input")
                    .filter(|input| input.as_object().is_some_and(|map| !map.is_empty()))
                    .map(Value::to_string)
                    .unwrap_or_default();
                self.tool_inputs.insert(index, (input, false));
                self.calls.push(
                    Some(index),
                    block.get("id").and_then(Value::as_str),
                    block.get("name").and_then(Value::as_str),
                    "",
                );
            }
            Some("thinking") => {
                if !self.parts.reasoning.is_empty() {
                    self.parts.reasoning.push('\n');
                    on_delta(StreamDelta::Reasoning("\n".into()));
                }
                let text = block
                    .get("thinking")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                self.reasoning(text, on_delta);
            }
            Some("text") => {
                let text = block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                self.text(text, on_delta);
            }
            _ => {}
        }
    }

    fn block_delta(
        &mut self,
        index: u64,
        delta: Option<&Value>,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) {
        let Some(delta) = delta else { return };
        let text = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => self.text(text("text"), on_delta),
            Some("thinking_delta") => self.reasoning(text("thinking"), on_delta),
            Some("input_json_delta") => {
                if let Some((_, got_delta)) = self.tool_inputs.get_mut(&index) {
                    *got_delta = true;
                }
                self.calls
                    .push(Some(index), None, None, text("partial_json"));
            }
            _ => {} // signature_delta, citations
        }
    }

    /// A tool-use block that streamed no input keeps the input it started with.
    fn block_stop(&mut self, index: u64) {
        if let Some((input, false)) = self.tool_inputs.get(&index)
            && !input.is_empty()
        {
            self.calls.set_arguments(index, input);
        }
    }

    fn text(&mut self, text: &str, on_delta: &mut (dyn FnMut(StreamDelta) + Send)) {
        if !text.is_empty() {
            self.parts.content.push_str(text);
            on_delta(StreamDelta::Text(text.to_owned()));
        }
    }

    fn reasoning(&mut self, text: &str, on_delta: &mut (dyn FnMut(StreamDelta) + Send)) {
        if !text.is_empty() {
            self.parts.reasoning.push_str(text);
            on_delta(StreamDelta::Reasoning(text.to_owned()));
        }
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    pub fn finish(self) -> Result<ReplyParts, ProviderError> {
        if !self.started || (!self.done && self.stop_reason.is_none()) {
            return Err(ProviderError::BadResponse(
                "the stream ended before the reply was complete".into(),
            ));
        }
        let mut parts = self.parts;
        parts.tool_calls = self.calls.finish();
        parts.finish = self.stop_reason.as_deref().map(finish_reason);
        Ok(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(events: &[&str]) -> Result<ReplyParts, ProviderError> {
        let mut reader = AnthropicStream::default();
        for event in crate::agent::provider::sse::data_events(events) {
            reader.event(&event, &mut |_| {})?;
        }
        reader.finish()
    }

    #[test]
    fn an_overloaded_error_event_is_a_server_error() {
        let error = read(&[
            r#"{"type":"message_start","message":{"usage":{"input_tokens":3}}}"#,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ]);
        assert!(matches!(error, Err(ProviderError::Server { status: 529 })));
    }

    #[test]
    fn a_tool_use_without_deltas_keeps_its_start_input() {
        let parts = read(&[
            r#"{"type":"message_start","message":{"usage":{"input_tokens":3}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{"a":1}}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
        ])
        .unwrap();
        assert_eq!(parts.tool_calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(
            (parts.usage.input_tokens, parts.usage.output_tokens),
            (3, 9)
        );
    }
}
