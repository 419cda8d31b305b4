//! What each API mode puts on the wire, read back from the fake model's recordings: auth
//! headers, the system prompt, tool definitions, tool-call turns and their results, cache
//! markers, token limits.

mod support;

use hermesd::agent::message::ChatMessage;
use hermesd::agent::provider::{
    ANTHROPIC_DEFAULT_MAX_TOKENS, ApiMode, Endpoint, ModelClient, ModelRequest,
};
use serde_json::{Value, json};
use support::fake_model::{FakeModel, Reply, Step};
use support::providers::{KEY, MODES, client, complete, settings};

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }})
}

/// A two-step tool turn: the model asks for two tools, gets both results, answers. Returns
/// the second request as the server saw it.
async fn tool_round_trip(mode: ApiMode, stream: bool) -> Value {
    let fake = FakeModel::start().await;
    fake.push(Step::Reply(
        Reply::default()
            .with_reasoning("need data")
            .with_tool_call("get_weather", json!({"city": "Oslo"}))
            .with_tool_call("get_weather", json!({"city": "Rome"})),
    ));
    fake.push(Step::text("Oslo is cold, Rome is warm."));
    let client = client(&fake, mode);
    let mut request = ModelRequest {
        system: Some("Be brief.".into()),
        messages: vec![ChatMessage::user("Weather in Oslo and Rome?")],
        tools: std::sync::Arc::new(vec![weather_tool()]),
        max_tokens: Some(512),
        stream,
    };
    let (first, _) = complete(&client, &request).await;
    let first = first.expect("first call");
    request.messages.push(first.to_message());
    for (call, result) in first.tool_calls.iter().zip(["-5C", "20C"]) {
        request
            .messages
            .push(ChatMessage::tool_result(&call.id, &call.name, result));
    }
    let (second, _) = complete(&client, &request).await;
    assert_eq!(
        second.unwrap().content.as_deref(),
        Some("Oslo is cold, Rome is warm.")
    );
    fake.requests()[1].body.clone()
}

#[tokio::test]
async fn chat_completions_sends_the_openai_shape() {
    let body = tool_round_trip(ApiMode::ChatCompletions, true).await;
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["max_tokens"], 512);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["tools"], json!([weather_tool()]));
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Oslo and Rome?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}},
            ]},
            {"role": "tool", "content": "-5C", "tool_call_id": "call_1", "name": "get_weather"},
            {"role": "tool", "content": "20C", "tool_call_id": "call_2", "name": "get_weather"},
        ]),
        "reasoning is kept in our history but never sent back"
    );
}

#[tokio::test]
async fn anthropic_messages_sends_blocks_with_cache_markers() {
    let body = tool_round_trip(ApiMode::AnthropicMessages, false).await;
    let cache = json!({"type": "ephemeral"});
    assert_eq!(body["max_tokens"], 512);
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "Be brief.", "cache_control": cache}])
    );
    assert_eq!(
        body["tools"],
        json!([{"name": "get_weather", "description": "Weather for a city",
                "input_schema": weather_tool()["function"]["parameters"]}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "Weather in Oslo and Rome?"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Rome"}, "cache_control": cache},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "-5C", "cache_control": cache},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "20C", "cache_control": cache},
            ]},
        ]),
        "system + the last three history messages (two of them tool results) carry the four cache breakpoints"
    );
}

#[tokio::test]
async fn codex_responses_sends_input_items() {
    let body = tool_round_trip(ApiMode::CodexResponses, true).await;
    assert_eq!(body["instructions"], "Be brief.");
    assert_eq!(body["max_output_tokens"], 512);
    assert_eq!(body["store"], false);
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "name": "get_weather", "description": "Weather for a city",
                "strict": false, "parameters": weather_tool()["function"]["parameters"]}])
    );
    assert_eq!(
        body["input"],
        json!([
            {"role": "user", "content": "Weather in Oslo and Rome?"},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
            {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "{\"city\":\"Rome\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "-5C"},
            {"type": "function_call_output", "call_id": "call_2", "output": "20C"},
        ])
    );
}

#[tokio::test]
async fn each_mode_authenticates_its_own_way() {
    for mode in MODES {
        let fake = FakeModel::start().await;
        let (result, _) = complete(
            &client(&fake, mode),
            &support::providers::request("hi", false),
        )
        .await;
        result.unwrap();
        let sent = &fake.requests()[0];
        match mode {
            ApiMode::AnthropicMessages => {
                assert_eq!(sent.header("x-api-key"), Some(KEY));
                assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
                assert_eq!(sent.header("authorization"), None);
                assert_eq!(sent.body["max_tokens"], ANTHROPIC_DEFAULT_MAX_TOKENS);
            }
            _ => {
                assert_eq!(
                    sent.header("authorization"),
                    Some(format!("Bearer {KEY}").as_str())
                );
                assert_eq!(sent.header("x-api-key"), None);
            }
        }
        assert!(
            sent.header("user-agent")
                .is_some_and(|agent| agent.starts_with("hermesd/"))
        );
        assert_eq!(sent.header("content-type"), Some("application/json"));
    }
}

#[tokio::test]
async fn a_keyless_local_server_gets_no_auth_header() {
    let fake = FakeModel::start().await;
    let endpoint = Endpoint::new("ollama", fake.base_url(), None, "qwen3");
    assert_eq!(endpoint.mode, ApiMode::ChatCompletions);
    let client = ModelClient::with_endpoints(endpoint, Vec::new(), settings()).unwrap();
    let (result, _) = complete(&client, &support::providers::request("hi", true)).await;
    assert_eq!(result.unwrap().content.as_deref(), Some("echo: hi"));
    assert_eq!(fake.requests()[0].header("authorization"), None);
    assert_eq!(fake.requests()[0].model(), Some("qwen3"));
}

#[tokio::test]
async fn responses_ask_reasoning_models_for_a_summary_only() {
    let fake = FakeModel::start().await;
    for model in ["gpt-5-mini", "openai/o3", "fake-model"] {
        let client = ModelClient::with_endpoints(
            support::providers::endpoint(&fake, ApiMode::CodexResponses, model),
            Vec::new(),
            settings(),
        )
        .unwrap();
        let (result, _) = complete(&client, &support::providers::request("hi", false)).await;
        result.unwrap();
    }
    let reasoning: Vec<Value> = fake
        .requests()
        .iter()
        .map(|r| r.body["reasoning"].clone())
        .collect();
    let summary = json!({"summary": "auto"});
    assert_eq!(reasoning, [summary.clone(), summary, Value::Null]);
}
