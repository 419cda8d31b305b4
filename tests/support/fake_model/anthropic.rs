//! Anthropic Messages as Anthropic sends them: content blocks, and streamed
//! `message_start` / `content_block_*` / `message_delta` / `message_stop` events with pings.

use serde_json::{Value, json};

use super::chat::Frames;
use super::script::{FakeUsage, Reply, argument_pieces, frame, tokens};

fn stop_reason(reply: &Reply) -> String {
    reply.finish_reason.clone().unwrap_or_else(|| {
        if reply.tool_calls.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        }
        .to_owned()
    })
}

fn usage(usage: &FakeUsage) -> Value {
    json!({
        "input_tokens": usage.input,
        "output_tokens": usage.output,
        "cache_read_input_tokens": usage.cache_read,
        "cache_creation_input_tokens": usage.cache_write,
    })
}

fn message(model: &str, content: Vec<Value>, stop_reason: Option<&str>) -> Value {
    json!({
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
    })
}

pub fn json(reply: &Reply, model: &str) -> Value {
    let mut content = Vec::new();
    if let Some(reasoning) = &reply.reasoning {
        content.push(json!({"type": "thinking", "thinking": reasoning, "signature": "sig-fake"}));
    }
    if let Some(text) = &reply.text {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in &reply.tool_calls {
        let input: Value = serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}));
        content.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    let mut body = message(model, content, Some(&stop_reason(reply)));
    if let Some(counts) = &reply.usage {
        body["usage"] = usage(counts);
    }
    body
}

fn event(data: Value) -> String {
    let name = data["type"].as_str().unwrap_or("unknown").to_owned();
    frame(Some(&name), &data)
}

pub fn first_event(model: &str, counts: Option<&FakeUsage>) -> String {
    let mut start = message(model, Vec::new(), None);
    if let Some(counts) = counts {
        start["usage"] = usage(&FakeUsage {
            output: 1,
            ..*counts
        });
    }
    event(json!({"type": "message_start", "message": start}))
}

pub fn events(reply: &Reply, model: &str) -> Frames {
    let mut body = vec![
        first_event(model, reply.usage.as_ref()),
        event(json!({"type": "ping"})),
    ];
    let mut index = 0;
    let mut block = |body: &mut Vec<String>, start: Value, deltas: Vec<Value>| {
        body.push(event(
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        for delta in deltas {
            body.push(event(
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        body.push(event(json!({"type": "content_block_stop", "index": index})));
        index += 1;
    };
    if let Some(reasoning) = &reply.reasoning {
        let mut deltas: Vec<Value> = tokens(reasoning)
            .into_iter()
            .map(|token| json!({"type": "thinking_delta", "thinking": token}))
            .collect();
        deltas.push(json!({"type": "signature_delta", "signature": "sig-fake"}));
        block(
            &mut body,
            json!({"type": "thinking", "thinking": ""}),
            deltas,
        );
    }
    if let Some(text) = &reply.text {
        let deltas = tokens(text)
            .into_iter()
            .map(|token| json!({"type": "text_delta", "text": token}))
            .collect();
        block(&mut body, json!({"type": "text", "text": ""}), deltas);
    }
    for call in &reply.tool_calls {
        let deltas = argument_pieces(&call.arguments)
            .into_iter()
            .map(|piece| json!({"type": "input_json_delta", "partial_json": piece}))
            .collect();
        block(
            &mut body,
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
            deltas,
        );
    }
    let mut delta = json!({"type": "message_delta",
                           "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null}});
    if let Some(counts) = &reply.usage {
        delta["usage"] = json!({"output_tokens": counts.output});
    }
    let end = vec![event(delta), event(json!({"type": "message_stop"}))];
    Frames { body, end }
}

pub fn empty_json(model: &str) -> Value {
    let mut body = message(model, Vec::new(), Some("end_turn"));
    body["usage"] = usage(&FakeUsage::default());
    body
}

pub fn empty_events(model: &str) -> Vec<String> {
    vec![
        first_event(model, None),
        event(
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 0}}),
        ),
        event(json!({"type": "message_stop"})),
    ]
}

pub fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        429 => "rate_limit_error",
        401 => "authentication_error",
        403 => "permission_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

pub fn last_user_text(body: &Value) -> String {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .rev()
        .filter(|message| message.get("role").and_then(Value::as_str) == Some("user"))
        .find_map(|message| match message.get("content") {
            Some(Value::String(text)) => Some(text.clone()),
            Some(Value::Array(blocks)) => {
                let text: String = blocks
                    .iter()
                    .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|block| block.get("text").and_then(Value::as_str))
                    .collect();
                (!text.is_empty()).then_some(text)
            }
            _ => None,
        })
        .unwrap_or_default()
}
