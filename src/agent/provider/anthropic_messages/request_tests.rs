//! History and tools → Messages request.

use serde_json::json;

use super::*;
use crate::agent::message::ToolCall;
use crate::agent::provider::types::ModelRequest;
use crate::config::Secret;

fn endpoint() -> Endpoint {
    Endpoint::new(
        "anthropic",
        "https://api.anthropic.com",
        Some(Secret::new("sk-ant")),
        "claude",
    )
}

fn request_body(request: &ModelRequest) -> Value {
    body(&endpoint(), &Prepared::new(request).unwrap())
}

#[test]
fn tool_turns_become_blocks_and_results_share_a_user_message() {
    let request = ModelRequest {
        system: Some("sys".into()),
        messages: vec![
            ChatMessage::user("one"),
            ChatMessage::user("two"),
            ChatMessage::assistant("a1"),
            ChatMessage::user("q"),
            ChatMessage::assistant_tool_calls(
                Some("checking".into()),
                vec![
                    ToolCall::new("call:1", "f", r#"{"x":1}"#),
                    ToolCall::new("call_2", "g", "not json"),
                ],
            ),
            ChatMessage::tool_result("call_2", "g", ""),
            ChatMessage::tool_result("call:1", "f", "ok"),
        ],
        tools: std::sync::Arc::new(vec![
            json!({"type": "function", "function": {"name": "f", "description": "F", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}),
            json!({"type": "function", "function": {"name": "f", "description": "dup"}}),
            json!({"type": "function", "function": {"name": "g"}}),
        ]),
        max_tokens: None,
        stream: false,
    };
    let body = request_body(&request);
    let cache = json!({"type": "ephemeral"});
    assert_eq!(body["max_tokens"], json!(DEFAULT_MAX_TOKENS));
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "sys", "cache_control": cache}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "one\n\ntwo"},
            {"role": "assistant", "content": [{"type": "text", "text": "a1"}]},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "checking"},
                {"type": "tool_use", "id": "call_1", "name": "f", "input": {"x": 1}},
                {"type": "tool_use", "id": "call_2", "name": "g", "input": {}, "cache_control": cache},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_2", "content": "(no output)", "cache_control": cache},
                {"type": "tool_result", "tool_use_id": "call_1", "content": "ok", "cache_control": cache},
            ]},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([
            {"name": "f", "description": "F", "input_schema": {"type": "object", "properties": {"x": {"type": "integer"}}}},
            {"name": "g", "description": "", "input_schema": {"type": "object", "properties": {}}},
        ])
    );
}

#[test]
fn without_a_system_prompt_the_last_four_messages_are_marked() {
    let request = ModelRequest {
        messages: vec![
            ChatMessage::user("1"),
            ChatMessage::assistant("2"),
            ChatMessage::user("3"),
            ChatMessage::assistant("4"),
            ChatMessage::user("5"),
        ],
        ..ModelRequest::default()
    };
    let body = request_body(&request);
    assert!(body.get("system").is_none());
    let marked: Vec<bool> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.to_string().contains("cache_control"))
        .collect();
    assert_eq!(marked, [false, true, true, true, true]);
}

#[test]
fn headers_carry_the_key_and_version() {
    let headers = headers(&endpoint());
    let names: Vec<&str> = headers.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["anthropic-version", "x-api-key"]);
    assert!(headers[1].1.is_sensitive());
}

#[test]
fn images_become_base64_blocks_before_the_text_and_survive_a_merge() {
    let mut first = ChatMessage::user("look");
    first.images = vec![crate::agent::message::ImagePart::new("image/png", "AAAA")];
    let mut second = ChatMessage::user("and this");
    second.images = vec![crate::agent::message::ImagePart::new("image/jpeg", "BBBB")];
    let request = ModelRequest {
        messages: vec![first, second],
        ..ModelRequest::default()
    };
    let body = request_body(&request);
    // The two user messages merge (alternation rules); both images stay.
    assert_eq!(
        body["messages"][0]["content"],
        json!([
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "BBBB"}},
            {"type": "text", "text": "look\n\nand this", "cache_control": {"type": "ephemeral"}},
        ])
    );
}
