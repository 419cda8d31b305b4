//! What a hook reads and what it may answer, as Hermes's shell hooks define it.
//!
//! stdin is one JSON object: `hook_event_name`, `tool_name` (tool events, else null),
//! `tool_input` (the call's arguments when they are an object), `session_id`, `cwd` and
//! `extra` (the event's other fields). stdout, when it is a JSON object, may block a
//! `pre_tool_call` — `{"decision": "block", "reason": ...}` or `{"action": "block",
//! "message": ...}` — or add context for `pre_llm_call` — `{"context": "..."}`. Anything
//! else (empty, not JSON, another shape) means nothing.

use serde_json::{Map, Value, json};

/// The reason given when a blocking hook names none.
pub const DEFAULT_BLOCK_REASON: &str = "blocked by a shell hook";

/// The stdin payload of one hook run.
#[derive(Debug, Clone, Default)]
pub struct Payload {
    pub tool_name: Option<String>,
    pub tool_input: Option<Value>,
    pub session_id: String,
    pub cwd: String,
    pub extra: Map<String, Value>,
}

impl Payload {
    pub fn to_json(&self, event: &str) -> String {
        json!({
            "hook_event_name": event,
            "tool_name": self.tool_name,
            "tool_input": self.tool_input.as_ref().filter(|v| v.is_object()),
            "session_id": self.session_id,
            "cwd": self.cwd,
            "extra": self.extra,
        })
        .to_string()
    }
}

/// What a hook's answer means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `pre_tool_call` only: the call must not run; the model is told the reason.
    Block(String),
    /// `pre_llm_call` (and any event but `pre_tool_call`): text to add to the turn.
    Context(String),
    Nothing,
}

fn text_of(primary: Option<&Value>, secondary: Option<&Value>) -> String {
    [primary, secondary]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|text| !text.is_empty())
        .map_or_else(|| DEFAULT_BLOCK_REASON.to_owned(), str::to_owned)
}

/// Reads a hook's stdout for `event`.
pub fn parse_answer(event: &str, stdout: &str) -> Answer {
    let stdout = stdout.trim();
    if stdout.is_empty() {
        return Answer::Nothing;
    }
    let Ok(Value::Object(data)) = serde_json::from_str::<Value>(stdout) else {
        return Answer::Nothing;
    };
    if event == "pre_tool_call" {
        if data.get("action").and_then(Value::as_str) == Some("block") {
            return Answer::Block(text_of(data.get("message"), data.get("reason")));
        }
        if data.get("decision").and_then(Value::as_str) == Some("block") {
            return Answer::Block(text_of(data.get("reason"), data.get("message")));
        }
        return Answer::Nothing;
    }
    match data.get("context").and_then(Value::as_str) {
        Some(context) if !context.trim().is_empty() => Answer::Context(context.to_owned()),
        _ => Answer::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_block_shapes_block_a_tool_call() {
        assert_eq!(
            parse_answer(
                "pre_tool_call",
                r#"{"decision": "block", "reason": "no rm"}"#
            ),
            Answer::Block("no rm".into())
        );
        assert_eq!(
            parse_answer("pre_tool_call", r#" {"action":"block","message":"nope"} "#),
            Answer::Block("nope".into())
        );
        assert_eq!(
            parse_answer(
                "pre_tool_call",
                r#"{"action": "block", "reason": "fallback"}"#
            ),
            Answer::Block("fallback".into())
        );
        assert_eq!(
            parse_answer("pre_tool_call", r#"{"decision": "block"}"#),
            Answer::Block(DEFAULT_BLOCK_REASON.into())
        );
    }

    #[test]
    fn anything_else_means_nothing() {
        for stdout in [
            "",
            "   ",
            "block",
            "[\"block\"]",
            r#"{"decision": "allow"}"#,
            r#"{"action": "BLOCK"}"#,
            r#"{"context": "x"}"#,
            "{\"decision\": \"block\"",
        ] {
            assert_eq!(
                parse_answer("pre_tool_call", stdout),
                Answer::Nothing,
                "{stdout}"
            );
        }
        // A block from an event that cannot block is not a block.
        assert_eq!(
            parse_answer("post_tool_call", r#"{"decision": "block", "reason": "x"}"#),
            Answer::Nothing
        );
    }

    #[test]
    fn context_is_read_for_other_events() {
        assert_eq!(
            parse_answer("pre_llm_call", r#"{"context": "Today is Friday"}"#),
            Answer::Context("Today is Friday".into())
        );
        assert_eq!(
            parse_answer("pre_llm_call", r#"{"context": "  "}"#),
            Answer::Nothing
        );
        assert_eq!(
            parse_answer("pre_llm_call", r#"{"context": 3}"#),
            Answer::Nothing
        );
    }

    #[test]
    fn the_payload_has_hermes_fields() {
        let mut payload = Payload {
            tool_name: Some("terminal".into()),
            tool_input: Some(json!({"command": "ls"})),
            session_id: "s1".into(),
            cwd: "/w".into(),
            ..Payload::default()
        };
        payload.extra.insert("tool_call_id".into(), json!("c1"));
        let value: Value = serde_json::from_str(&payload.to_json("pre_tool_call")).unwrap();
        assert_eq!(
            value,
            json!({"hook_event_name": "pre_tool_call", "tool_name": "terminal",
                   "tool_input": {"command": "ls"}, "session_id": "s1", "cwd": "/w",
                   "extra": {"tool_call_id": "c1"}})
        );
        payload.tool_input = Some(json!("not an object"));
        let value: Value = serde_json::from_str(&payload.to_json("pre_tool_call")).unwrap();
        assert_eq!(value["tool_input"], Value::Null);
    }
}
