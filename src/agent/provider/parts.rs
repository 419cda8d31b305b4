//! The pieces of a reply as a wire reader collects them, and tool calls assembled from stream
//! fragments. Shared by the three API modes.

use serde_json::Value;

use super::endpoint::Endpoint;
use super::types::{FinishReason, ModelReply, Usage};
use crate::agent::message::{ToolCall, arguments_text};

/// What a reader has gathered; becomes a [`ModelReply`] once the reply is complete.
#[derive(Debug, Default)]
pub(crate) struct ReplyParts {
    pub content: String,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish: Option<FinishReason>,
    pub usage: Usage,
}

impl ReplyParts {
    pub fn into_reply(self, endpoint: &Endpoint) -> ModelReply {
        let has_calls = !self.tool_calls.is_empty();
        let finish = match self.finish {
            Some(FinishReason::Stop) if has_calls => FinishReason::ToolCalls,
            Some(finish) => finish,
            None => FinishReason::inferred(has_calls),
        };
        ModelReply {
            content: non_empty(self.content),
            tool_calls: self.tool_calls,
            reasoning: non_empty(self.reasoning),
            finish_reason: finish,
            usage: self.usage,
            provider: endpoint.provider.clone(),
            model: endpoint.model.clone(),
        }
    }

    /// Appends reasoning text, separating blocks with a newline.
    pub fn push_reasoning_block(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if !self.reasoning.is_empty() {
            self.reasoning.push('\n');
        }
        self.reasoning.push_str(text);
    }
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// A tool call with no id gets one (some local servers send none), unique within the reply.
pub(crate) fn call_id_or_generated(id: Option<&str>, position: usize) -> String {
    match id.map(str::trim).filter(|id| !id.is_empty()) {
        Some(id) => id.to_owned(),
        None => format!("call_{position}_{:08x}", rand::random::<u32>()),
    }
}

/// Tool calls arriving in fragments, kept in the order they first appeared.
#[derive(Debug, Default)]
pub(crate) struct CallFragments {
    calls: Vec<Fragment>,
}

#[derive(Debug, Default)]
struct Fragment {
    key: Option<u64>,
    id: Option<String>,
    name: String,
    arguments: String,
}

impl CallFragments {
    /// Adds a fragment. `key` is the wire's index for the call; when a server omits it, a new
    /// `id` starts a new call and anything else continues the last one.
    pub fn push(
        &mut self,
        key: Option<u64>,
        id: Option<&str>,
        name: Option<&str>,
        arguments: &str,
    ) {
        let id = id.filter(|id| !id.is_empty());
        let existing = match key {
            Some(key) => self.calls.iter().position(|call| call.key == Some(key)),
            None => match id {
                Some(id) => self
                    .calls
                    .iter()
                    .position(|call| call.id.as_deref() == Some(id)),
                None => self.calls.len().checked_sub(1),
            },
        };
        let index = match existing {
            Some(index) => index,
            None => {
                self.calls.push(Fragment {
                    key,
                    ..Fragment::default()
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[index];
        if let (None, Some(id)) = (&call.id, id) {
            call.id = Some(id.to_owned());
        }
        // Servers send the name once; a few repeat it in every fragment.
        if let (true, Some(name)) = (call.name.is_empty(), name) {
            call.name = name.to_owned();
        }
        call.arguments.push_str(arguments);
    }

    /// Sets the complete arguments of the call with this key (a `done` event's final text).
    pub fn set_arguments(&mut self, key: u64, arguments: &str) {
        if let Some(call) = self.calls.iter_mut().find(|call| call.key == Some(key)) {
            call.arguments = arguments.to_owned();
        }
    }

    pub fn finish(self) -> Vec<ToolCall> {
        self.calls
            .into_iter()
            .enumerate()
            .map(|(position, call)| ToolCall {
                id: call_id_or_generated(call.id.as_deref(), position),
                name: call.name,
                arguments: arguments_text(Value::String(call.arguments)),
            })
            .collect()
    }
}

/// A JSON number as a token count (missing, negative or non-numeric → 0).
pub(crate) fn count(value: Option<&Value>) -> u64 {
    value.and_then(Value::as_u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_assemble_in_first_seen_order() {
        let mut calls = CallFragments::default();
        calls.push(Some(1), Some("b"), Some("second"), "");
        calls.push(Some(0), Some("a"), Some("first"), "{\"x\":");
        calls.push(Some(1), None, None, "{}");
        calls.push(Some(0), None, None, "1}");
        let calls = calls.finish();
        assert_eq!(
            calls,
            [
                ToolCall::new("b", "second", "{}"),
                ToolCall::new("a", "first", "{\"x\":1}")
            ]
        );
    }

    #[test]
    fn fragments_without_an_index_follow_ids() {
        let mut calls = CallFragments::default();
        calls.push(None, Some("a"), Some("f"), "{\"n\"");
        calls.push(None, None, None, ":1}");
        calls.push(None, Some("b"), Some("f"), "");
        let calls = calls.finish();
        assert_eq!(calls[0], ToolCall::new("a", "f", "{\"n\":1}"));
        assert_eq!(calls[1], ToolCall::new("b", "f", "{}"));
    }

    #[test]
    fn missing_ids_are_generated_and_distinct() {
        let mut calls = CallFragments::default();
        calls.push(Some(0), None, Some("f"), "");
        calls.push(Some(1), None, Some("f"), "");
        let calls = calls.finish();
        assert!(calls[0].id.starts_with("call_0_"));
        assert_ne!(calls[0].id, calls[1].id);
    }
}
