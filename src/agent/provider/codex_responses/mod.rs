//! `codex_responses`: OpenAI's Responses API. History becomes input items (`message`,
//! `function_call`, `function_call_output`); replies are output items (`message`,
//! `reasoning` with its summary, `function_call`).

mod reply;
mod stream;

use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

pub(crate) use reply::parse;
pub(crate) use stream::ResponsesStream;

use super::endpoint::Endpoint;
use super::prepared::Prepared;
use super::transport::secret_header;
use crate::agent::message::Role;

/// `Authorization: Bearer <key>`, shared with chat completions.
pub(crate) fn bearer_headers(endpoint: &Endpoint) -> Vec<(HeaderName, HeaderValue)> {
    endpoint
        .api_key
        .as_ref()
        .and_then(|key| secret_header(AUTHORIZATION, &format!("Bearer {}", key.expose())))
        .into_iter()
        .collect()
}

pub(crate) fn body(endpoint: &Endpoint, prepared: &Prepared) -> Value {
    let mut input: Vec<Value> = Vec::with_capacity(prepared.messages.len());
    for message in &prepared.messages {
        match message.role {
            Role::User | Role::System if !message.images.is_empty() => {
                input.push(json!({"role": "user", "content": input_parts(message)}));
            }
            Role::User | Role::System => {
                input.push(json!({"role": "user", "content": message.text()}));
            }
            Role::Assistant => {
                if !message.text().trim().is_empty() {
                    input.push(json!({"role": "assistant", "content": message.text()}));
                }
                for call in &message.tool_calls {
                    input.push(json!({
                        "type": "function_call",
                        "call_id": call_id(&call.id),
                        "name": call.name,
                        "arguments": call.arguments,
                    }));
                }
            }
            // A tool's images make `output` a list of input parts, which the Responses
            // API takes beside a plain string
            // (https://platform.openai.com/docs/api-reference/responses/create, input →
            // function_call_output → output).
            Role::Tool => input.push(json!({
                "type": "function_call_output",
                "call_id": call_id(message.tool_call_id.as_deref().unwrap_or_default()),
                "output": if message.images.is_empty() {
                    json!(message.text())
                } else {
                    input_parts(message)
                },
            })),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(endpoint.model));
    if let Some(system) = &prepared.system {
        body.insert("instructions".into(), json!(system));
    }
    body.insert("input".into(), Value::Array(input));
    let tools = tools(prepared.tools);
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
        body.insert("parallel_tool_calls".into(), json!(true));
    }
    if let Some(max_tokens) = prepared.max_tokens {
        body.insert("max_output_tokens".into(), json!(max_tokens));
    }
    if wants_reasoning_summary(endpoint) {
        body.insert("reasoning".into(), json!({"summary": "auto"}));
    }
    // Nothing is kept server-side: every request carries the whole history.
    body.insert("store".into(), json!(false));
    body.insert("stream".into(), json!(prepared.stream));
    Value::Object(body)
}

/// The message's text, then each image, as Responses input parts.
fn input_parts(message: &crate::agent::message::ChatMessage) -> Value {
    let mut parts = vec![json!({"type": "input_text", "text": message.text()})];
    parts.extend(message.images.iter().map(
        |image| json!({"type": "input_image", "image_url": image.data_url(), "detail": "auto"}),
    ));
    Value::Array(parts)
}

/// OpenAI's reasoning models return their reasoning only as a summary, and only when asked
/// (as Hermes asks). Other models reject the parameter with a 400, and xAI takes no summary
/// setting, so it is sent to OpenAI reasoning-model names only.
fn wants_reasoning_summary(endpoint: &Endpoint) -> bool {
    let is_xai = reqwest::Url::parse(&endpoint.base_url)
        .ok()
        .is_some_and(|url| url.host_str() == Some("api.x.ai"));
    let model = endpoint.model.to_ascii_lowercase();
    let model = model.rsplit('/').next().unwrap_or_default();
    !is_xai
        && ["gpt-5", "o1", "o3", "o4", "codex"]
            .iter()
            .any(|p| model.starts_with(p))
}

/// Hermes stores some Responses tool ids as `call_id|item_id`; the API wants the call id.
fn call_id(id: &str) -> &str {
    id.split('|').next().unwrap_or(id).trim()
}

/// OpenAI function definitions → Responses function tools (flat, not nested in `function`).
fn tools(tools: &[Value]) -> Vec<Value> {
    tools
        .iter()
        .filter_map(|tool| {
            let function = tool.get("function")?;
            let name = function.get("name")?.as_str()?;
            Some(json!({
                "type": "function",
                "name": name,
                "description": function.get("description").and_then(Value::as_str).unwrap_or_default(),
                "strict": false,
                "parameters": function
                    .get("parameters")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            }))
        })
        .collect()
}
