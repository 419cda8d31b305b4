//! The alternation rules at the wire: a malformed history is repaired or rejected before the
//! call and never sent as it was; and a client built from the validated config reaches its
//! endpoints.

mod support;

use hermesd::agent::message::{ChatMessage, HistoryError, ToolCall};
use hermesd::agent::provider::{ApiMode, ModelClient, ModelRequest, ProviderError};
use hermesd::config::{Config, FallbackProvider, ProviderConfig, Secret};
use serde_json::json;
use support::fake_model::{FakeModel, Step};
use support::providers::{MODES, client, complete, request};

fn history(messages: Vec<ChatMessage>) -> ModelRequest {
    ModelRequest {
        messages,
        ..request("unused", false)
    }
}

#[tokio::test]
async fn a_history_that_cannot_be_repaired_is_never_sent() {
    for mode in MODES {
        let fake = FakeModel::start().await;
        let client = client(&fake, mode);
        let cases = [
            (
                vec![
                    ChatMessage::user("hi"),
                    ChatMessage::assistant("hello"),
                    ChatMessage::system("new instructions"),
                    ChatMessage::user("go on"),
                ],
                HistoryError::MisplacedSystem { index: 2 },
            ),
            (
                vec![ChatMessage::user("hi"), ChatMessage::assistant("hello")],
                HistoryError::EndsWithAssistant,
            ),
            (vec![], HistoryError::Empty),
        ];
        for (messages, expected) in cases {
            let (result, _) = complete(&client, &history(messages)).await;
            match result {
                Err(ProviderError::InvalidHistory(error)) => assert_eq!(error, expected, "{mode}"),
                other => panic!("{mode}: expected {expected:?}, got {other:?}"),
            }
        }
        assert!(
            fake.requests().is_empty(),
            "{mode}: nothing reached the provider"
        );
    }
}

#[tokio::test]
async fn a_repairable_history_is_sent_repaired() {
    let fake = FakeModel::start().await;
    let client = client(&fake, ApiMode::ChatCompletions);
    let messages = vec![
        ChatMessage::tool_result("ghost", "f", "orphan result"),
        ChatMessage::user("first try"),
        ChatMessage::user("second try"),
        ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new("a", "f", "{}"), ToolCall::new("b", "f", "{}")],
        ),
        ChatMessage::tool_result("b", "f", "B done"),
        ChatMessage::user("are you there?"),
    ];
    let (result, _) = complete(&client, &history(messages)).await;
    result.unwrap();
    let sent = &fake.requests()[0].body["messages"];
    assert_eq!(
        sent,
        &json!([
            {"role": "system", "content": "You are a test."},
            {"role": "user", "content": "first try\n\nsecond try"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            ]},
            {"role": "tool", "content": "B done", "tool_call_id": "b", "name": "f"},
            {"role": "tool", "content": "[tool result unavailable]", "tool_call_id": "a", "name": "f"},
            {"role": "assistant", "content": "[turn interrupted]"},
            {"role": "user", "content": "are you there?"},
        ])
    );
}

#[tokio::test]
async fn a_client_from_config_reaches_its_endpoints() {
    let primary = FakeModel::start().await;
    let fallback = FakeModel::start().await;
    primary.push(Step::error(503));
    let mut config = Config::default();
    config.model.provider = "custom".into();
    config.model.default = Some("local-model".into());
    config.model.base_url = Some(primary.base_url());
    config.providers.insert(
        "anthropic".into(),
        ProviderConfig {
            base_url: Some(fallback.base_url()),
            api_key: Some(Secret::new("sk-ant-from-config")),
        },
    );
    config.fallback_providers = vec![FallbackProvider {
        provider: "anthropic".into(),
        model: "claude-fallback".into(),
        api_mode: None,
        base_url: None,
        api_key: None,
    }];
    // No retries: the 503 moves straight to the fallback.
    let client =
        ModelClient::from_config_with_settings(&config, support::providers::settings()).unwrap();
    let modes: Vec<ApiMode> = client.endpoints().iter().map(|e| e.mode).collect();
    assert_eq!(
        modes,
        [ApiMode::ChatCompletions, ApiMode::AnthropicMessages]
    );
    let (result, _) = complete(&client, &request("hello", true)).await;
    let reply = result.unwrap();
    assert_eq!(
        (reply.provider.as_str(), reply.model.as_str()),
        ("anthropic", "claude-fallback")
    );
    assert_eq!(reply.content.as_deref(), Some("echo: hello"));
    assert_eq!(
        primary.requests()[0].header("authorization"),
        None,
        "no key for the custom server"
    );
    assert_eq!(
        fallback.requests()[0].header("x-api-key"),
        Some("sk-ant-from-config")
    );
}

#[test]
fn no_configured_model_is_one_clear_error() {
    let error = ModelClient::from_config(&Config::default()).unwrap_err();
    assert_eq!(error.kind(), "not_configured");
    assert!(
        error.to_string().starts_with(
            "no model provider configured: set model.provider and model.default in config.yaml"
        ),
        "{error}"
    );
}
