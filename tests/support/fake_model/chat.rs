//! OpenAI chat completions as OpenAI sends them. Reasoning goes out as `reasoning` (OpenRouter)
//! in whole replies and as `reasoning_content` (DeepSeek, vLLM) in streams, so both spellings
//! are exercised.

use serde_json::{Value, json};

use super::script::{FakeUsage, Reply, argument_pieces, frame, tokens};

pub struct Frames {
    pub body: Vec<String>,
    pub end: Vec<String>,
}

fn finish_reason(reply: &Reply) -> String {
    reply.finish_reason.clone().unwrap_or_else(|| {
        if reply.tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
        .to_owned()
    })
}

fn usage(usage: &FakeUsage) -> Value {
    let prompt = usage.input + usage.cache_read + usage.cache_write;
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": usage.output,
        "total_tokens": prompt + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read, "cache_write_tokens": usage.cache_write},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning},
    })
}

pub fn json(reply: &Reply, model: &str) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.text});
    if let Some(reasoning) = &reply.reasoning {
        message["reasoning"] = json!(reasoning);
    }
    if !reply.tool_calls.is_empty() {
        message["tool_calls"] = reply
            .tool_calls
            .iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                })
            })
            .collect();
    }
    let mut body = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(reply)}],
    });
    if let Some(counts) = &reply.usage {
        body["usage"] = usage(counts);
    }
    body
}

fn chunk(model: &str, delta: Value, finish_reason: Option<&str>) -> String {
    frame(
        None,
        &json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }),
    )
}

pub fn first_event(model: &str) -> String {
    chunk(model, json!({"role": "assistant", "content": ""}), None)
}

/// Usage is sent only when the request asked for it (`stream_options.include_usage`), as
/// OpenAI does.
pub fn events(reply: &Reply, model: &str, include_usage: bool) -> Frames {
    let mut body = vec![first_event(model)];
    for token in reply.reasoning.as_deref().map(tokens).unwrap_or_default() {
        body.push(chunk(model, json!({"reasoning_content": token}), None));
    }
    for token in reply.text.as_deref().map(tokens).unwrap_or_default() {
        body.push(chunk(model, json!({"content": token}), None));
    }
    for (index, call) in reply.tool_calls.iter().enumerate() {
        body.push(chunk(
            model,
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                   "function": {"name": call.name, "arguments": ""}}]}),
            None,
        ));
        for piece in argument_pieces(&call.arguments) {
            body.push(chunk(
                model,
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    let mut end = vec![chunk(model, json!({}), Some(&finish_reason(reply)))];
    if let (true, Some(counts)) = (include_usage, &reply.usage) {
        end.push(frame(
            None,
            &json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
                    "choices": [], "usage": usage(counts)}),
        ));
    }
    end.push("data: [DONE]\n\n".to_owned());
    Frames { body, end }
}

pub fn empty_json(model: &str) -> Value {
    json!({"id": "chatcmpl-fake", "object": "chat.completion", "model": model, "choices": []})
}

pub fn empty_events(model: &str) -> Vec<String> {
    vec![
        frame(
            None,
            &json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model, "choices": []}),
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
}

pub fn error_body(status: u16, message: &str) -> Value {
    json!({"error": {"message": message, "type": "fake_error", "code": status}})
}

pub fn last_user_text(body: &Value) -> String {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .rev()
        .find(|message| message.get("role").and_then(Value::as_str) == Some("user"))
        .map(|message| content_text(message.get("content")))
        .unwrap_or_default()
}

fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}
