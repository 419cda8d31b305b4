//! A streamed Responses reply: typed events (`response.output_text.delta`,
//! `response.function_call_arguments.delta`, ...) ending with `response.completed`,
//! `response.incomplete` or `response.failed`, whose `response` object is the authority.

use serde_json::Value;

use super::reply::{failure, is_empty, response_parts};
use crate::agent::provider::error::ProviderError;
use crate::agent::provider::parts::{CallFragments, ReplyParts};
use crate::agent::provider::sse::SseEvent;
use crate::agent::provider::types::StreamDelta;

#[derive(Debug, Default)]
pub(crate) struct ResponsesStream {
    /// What the deltas said, for servers whose final object has an empty `output`.
    streamed: ReplyParts,
    calls: CallFragments,
    last: Option<ReplyParts>,
}

impl ResponsesStream {
    pub fn event(
        &mut self,
        event: &SseEvent,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<(), ProviderError> {
        if event.data.trim().is_empty() || event.data.trim() == "[DONE]" {
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
        let index = value.get("output_index").and_then(Value::as_u64);
        let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default();
        match kind {
            "response.output_text.delta" | "response.refusal.delta" => {
                let delta = text("delta");
                if !delta.is_empty() {
                    self.streamed.content.push_str(delta);
                    on_delta(StreamDelta::Text(delta.to_owned()));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let delta = text("delta");
                if !delta.is_empty() {
                    self.streamed.reasoning.push_str(delta);
                    on_delta(StreamDelta::Reasoning(delta.to_owned()));
                }
            }
            "response.reasoning_summary_part.added" if !self.streamed.reasoning.is_empty() => {
                self.streamed.reasoning.push('\n');
                on_delta(StreamDelta::Reasoning("\n".into()));
            }
            "response.output_item.added" => {
                let item = value.get("item").unwrap_or(&Value::Null);
                if item.get("type").and_then(Value::as_str) == Some("function_call") {
                    self.calls.push(
                        index,
                        item.get("call_id").and_then(Value::as_str),
                        item.get("name").and_then(Value::as_str),
                        item.get("arguments")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                    );
                }
            }
            "response.function_call_arguments.delta" => {
                self.calls.push(index, None, None, text("delta"));
            }
            "response.function_call_arguments.done" => {
                if let Some(index) = index {
                    self.calls.set_arguments(index, text("arguments"));
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                let response = value.get("response").unwrap_or(&Value::Null);
                self.last = Some(response_parts(response)?);
            }
            "error" => {
                let error = value.get("error").unwrap_or(&value);
                return Err(failure(Some(error), None));
            }
            _ => {}
        }
        Ok(())
    }

    pub fn is_done(&self) -> bool {
        self.last.is_some()
    }

    pub fn finish(self) -> Result<ReplyParts, ProviderError> {
        let Some(mut last) = self.last else {
            return Err(ProviderError::BadResponse(
                "the stream ended before the reply was complete".into(),
            ));
        };
        if is_empty(&last) {
            last.content = self.streamed.content;
            last.reasoning = self.streamed.reasoning;
            last.tool_calls = self.calls.finish();
        }
        if is_empty(&last) && last.finish.is_none() {
            return Err(ProviderError::BadResponse(
                "the provider returned no output".into(),
            ));
        }
        Ok(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(events: &[&str]) -> Result<ReplyParts, ProviderError> {
        let mut reader = ResponsesStream::default();
        for event in crate::agent::provider::sse::data_events(events) {
            reader.event(&event, &mut |_| {})?;
        }
        reader.finish()
    }

    #[test]
    fn a_final_object_without_output_falls_back_to_the_deltas() {
        let parts = read(&[
            r#"{"type":"response.output_text.delta","delta":"hel"}"#,
            r#"{"type":"response.output_text.delta","delta":"lo"}"#,
            r#"{"type":"response.completed","response":{"status":"completed","output":[],"usage":{"input_tokens":5,"output_tokens":2}}}"#,
        ])
        .unwrap();
        assert_eq!(parts.content, "hello");
        assert_eq!(parts.usage.output_tokens, 2);
    }

    #[test]
    fn failures_are_classified_by_code() {
        let failed = read(&[
            r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"rate_limit_exceeded","message":"slow down"}}}"#,
        ]);
        assert!(matches!(failed, Err(ProviderError::RateLimited { .. })));
        let error = read(&[r#"{"type":"error","code":"invalid_prompt","message":"no"}"#]);
        assert_eq!(
            error.unwrap_err().to_string(),
            "unusable response: the provider reported an error: invalid_prompt: no"
        );
    }
}
