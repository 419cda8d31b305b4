//! The OpenAI Responses API as OpenAI sends it: output items (`reasoning` with a summary,
//! `message`, `function_call`) and typed stream events ending in `response.completed`.

use serde_json::{Value, json};

use super::chat::Frames;
use super::script::{FakeUsage, Reply, argument_pieces, frame, tokens};

fn usage(usage: &FakeUsage) -> Value {
    let input = usage.input + usage.cache_read;
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": usage.cache_read},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning},
        "total_tokens": input + usage.output,
    })
}

fn reasoning_item(text: &str) -> Value {
    json!({"type": "reasoning", "id": "rs_fake", "summary": [{"type": "summary_text", "text": text}]})
}

fn message_item(text: &str) -> Value {
    json!({"type": "message", "id": "msg_fake", "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

fn call_item(index: usize, call: &super::script::FakeCall, arguments: &str) -> Value {
    json!({"type": "function_call", "id": format!("fc_{index}"), "call_id": call.id,
           "name": call.name, "arguments": arguments, "status": "completed"})
}

fn response(model: &str, status: &str, output: Vec<Value>) -> Value {
    json!({"id": "resp_fake", "object": "response", "created_at": 1_700_000_000,
           "status": status, "model": model, "output": output, "error": null,
           "incomplete_details": null})
}

pub fn json(reply: &Reply, model: &str) -> Value {
    let mut output = Vec::new();
    if let Some(reasoning) = &reply.reasoning {
        output.push(reasoning_item(reasoning));
    }
    if let Some(text) = &reply.text {
        output.push(message_item(text));
    }
    for (index, call) in reply.tool_calls.iter().enumerate() {
        output.push(call_item(index, call, &call.arguments));
    }
    let mut body = response(model, "completed", output);
    match reply.finish_reason.as_deref() {
        None => {}
        Some("length") => incomplete(&mut body, "max_output_tokens"),
        Some("content_filter") => incomplete(&mut body, "content_filter"),
        Some(status) => body["status"] = json!(status),
    }
    if let Some(counts) = &reply.usage {
        body["usage"] = usage(counts);
    }
    body
}

fn incomplete(body: &mut Value, reason: &str) {
    body["status"] = json!("incomplete");
    body["incomplete_details"] = json!({"reason": reason});
}

fn event(data: Value) -> String {
    let name = data["type"].as_str().unwrap_or("unknown").to_owned();
    frame(Some(&name), &data)
}

pub fn first_event(model: &str) -> String {
    event(
        json!({"type": "response.created", "response": response(model, "in_progress", Vec::new())}),
    )
}

pub fn events(reply: &Reply, model: &str) -> Frames {
    let mut body = vec![first_event(model)];
    let mut index = 0;
    if let Some(reasoning) = &reply.reasoning {
        body.push(event(
            json!({"type": "response.output_item.added", "output_index": index,
                               "item": {"type": "reasoning", "id": "rs_fake", "summary": []}}),
        ));
        body.push(event(
            json!({"type": "response.reasoning_summary_part.added", "output_index": index,
                               "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
        ));
        for token in tokens(reasoning) {
            body.push(event(
                json!({"type": "response.reasoning_summary_text.delta",
                                   "output_index": index, "summary_index": 0, "delta": token}),
            ));
        }
        body.push(event(
            json!({"type": "response.output_item.done", "output_index": index,
                               "item": reasoning_item(reasoning)}),
        ));
        index += 1;
    }
    if let Some(text) = &reply.text {
        body.push(event(json!({"type": "response.output_item.added", "output_index": index,
                               "item": {"type": "message", "id": "msg_fake", "status": "in_progress",
                                        "role": "assistant", "content": []}})));
        for token in tokens(text) {
            body.push(event(
                json!({"type": "response.output_text.delta", "item_id": "msg_fake",
                                   "output_index": index, "content_index": 0, "delta": token}),
            ));
        }
        body.push(event(
            json!({"type": "response.output_text.done", "item_id": "msg_fake",
                               "output_index": index, "content_index": 0, "text": text}),
        ));
        body.push(event(
            json!({"type": "response.output_item.done", "output_index": index,
                               "item": message_item(text)}),
        ));
        index += 1;
    }
    for (position, call) in reply.tool_calls.iter().enumerate() {
        body.push(event(
            json!({"type": "response.output_item.added", "output_index": index,
                               "item": call_item(position, call, "")}),
        ));
        for piece in argument_pieces(&call.arguments) {
            body.push(event(
                json!({"type": "response.function_call_arguments.delta",
                                   "item_id": format!("fc_{position}"), "output_index": index,
                                   "delta": piece}),
            ));
        }
        body.push(event(
            json!({"type": "response.function_call_arguments.done",
                               "item_id": format!("fc_{position}"), "output_index": index,
                               "arguments": call.arguments}),
        ));
        body.push(event(
            json!({"type": "response.output_item.done", "output_index": index,
                               "item": call_item(position, call, &call.arguments)}),
        ));
        index += 1;
    }
    let last = json(reply, model);
    let kind = if last["status"] == "incomplete" {
        "response.incomplete"
    } else {
        "response.completed"
    };
    let end = vec![event(json!({"type": kind, "response": last}))];
    Frames { body, end }
}

pub fn empty_json(model: &str) -> Value {
    response(model, "completed", Vec::new())
}

pub fn empty_events(model: &str) -> Vec<String> {
    vec![
        first_event(model),
        event(json!({"type": "response.completed", "response": empty_json(model)})),
    ]
}

pub fn error_body(status: u16, message: &str) -> Value {
    json!({"error": {"message": message, "type": "fake_error", "code": format!("http_{status}")}})
}

pub fn last_user_text(body: &Value) -> String {
    match body.get("input") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .rev()
            .filter(|item| item.get("role").and_then(Value::as_str) == Some("user"))
            .find_map(|item| match item.get("content") {
                Some(Value::String(text)) => Some(text.clone()),
                Some(Value::Array(parts)) => Some(
                    parts
                        .iter()
                        .filter_map(|part| part.get("text").and_then(Value::as_str))
                        .collect(),
                ),
                _ => None,
            })
            .unwrap_or_default(),
        _ => String::new(),
    }
}
