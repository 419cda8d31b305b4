//! A streamed chat-completions reply: `data:` chunks of `choices[0].delta`, a usage chunk
//! (with `stream_options.include_usage`), then `data: [DONE]`.

use serde_json::Value;

use super::{in_body_error, reasoning_text, usage};
use crate::agent::provider::error::ProviderError;
use crate::agent::provider::parts::{CallFragments, ReplyParts};
use crate::agent::provider::sse::SseEvent;
use crate::agent::provider::types::{FinishReason, StreamDelta};

#[derive(Debug, Default)]
pub(crate) struct ChatStream {
    parts: ReplyParts,
    calls: CallFragments,
    finish_reason: Option<String>,
    saw_choice: bool,
    done: bool,
}

impl ChatStream {
    pub fn event(
        &mut self,
        event: &SseEvent,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<(), ProviderError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|error| {
            ProviderError::BadResponse(format!("a stream chunk is not valid JSON ({error})"))
        })?;
        if let Some(error) = in_body_error(&chunk) {
            return Err(error);
        }
        if let Some(counts) = chunk.get("usage").filter(|u| u.is_object()) {
            self.parts.usage = usage(counts);
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|choices| choices.first())
        else {
            return Ok(());
        };
        self.saw_choice = true;
        if let Some(delta) = choice.get("delta") {
            self.delta(delta, on_delta);
        }
        // Some servers send `""` rather than `null` on every chunk but the last.
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str)
            && !reason.is_empty()
        {
            self.finish_reason = Some(reason.to_owned());
        }
        Ok(())
    }

    fn delta(&mut self, delta: &Value, on_delta: &mut (dyn FnMut(StreamDelta) + Send)) {
        if let Some(text) = reasoning_text(delta) {
            self.parts.reasoning.push_str(&text);
            on_delta(StreamDelta::Reasoning(text));
        }
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.parts.content.push_str(text);
            on_delta(StreamDelta::Text(text.to_owned()));
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let arguments = match call.pointer("/function/arguments") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            self.calls.push(
                call.get("index").and_then(Value::as_u64),
                call.get("id").and_then(Value::as_str),
                call.pointer("/function/name").and_then(Value::as_str),
                &arguments,
            );
        }
    }

    /// `[DONE]` arrived: nothing after it matters.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The complete reply. A stream that ended with neither `[DONE]` nor a finish reason was
    /// cut off, and its partial text is not an answer.
    pub fn finish(self) -> Result<ReplyParts, ProviderError> {
        if !self.saw_choice {
            return Err(ProviderError::BadResponse(
                "the provider returned no choices".into(),
            ));
        }
        if !self.done && self.finish_reason.is_none() {
            return Err(ProviderError::BadResponse(
                "the stream ended before the reply was complete".into(),
            ));
        }
        let mut parts = self.parts;
        parts.tool_calls = self.calls.finish();
        parts.finish = Some(FinishReason::from_openai(
            self.finish_reason.as_deref(),
            !parts.tool_calls.is_empty(),
        ));
        Ok(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(chunks: &[&str]) -> Result<ReplyParts, ProviderError> {
        let mut stream = ChatStream::default();
        let mut deltas = Vec::new();
        let mut on_delta = |delta: StreamDelta| deltas.push(delta);
        for data in chunks {
            let event = SseEvent {
                event: None,
                data: (*data).to_owned(),
            };
            stream.event(&event, &mut on_delta)?;
        }
        stream.finish()
    }

    #[test]
    fn empty_finish_reasons_do_not_end_the_reply() {
        let cut = read(&[r#"{"choices":[{"delta":{"content":"a"},"finish_reason":""}]}"#]);
        assert_eq!(cut.unwrap_err().kind(), "bad_response");
        let done = read(&[
            r#"{"choices":[{"delta":{"content":"a"},"finish_reason":""}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":null}"#,
        ]);
        assert_eq!(done.unwrap().content, "a");
    }

    #[test]
    fn an_error_chunk_mid_stream_is_classified() {
        let error = read(&[
            r#"{"choices":[{"delta":{"content":"a"}}]}"#,
            r#"{"error":{"message":"upstream overloaded","code":502}}"#,
        ]);
        assert!(matches!(error, Err(ProviderError::Server { status: 502 })));
    }

    #[test]
    fn tool_calls_without_an_index_follow_their_ids() {
        let parts = read(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"x","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"y","function":{"name":"g","arguments":{"k":1}}}]}}]}"#,
            "[DONE]",
        ])
        .unwrap();
        let names: Vec<(&str, &str, &str)> = parts
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(names, [("x", "f", "{}"), ("y", "g", r#"{"k":1}"#)]);
        assert_eq!(parts.finish, Some(FinishReason::ToolCalls));
    }
}
