//! The fallback chain over real HTTP: 429 (with `retry-after` honoured up to the cap), 5xx,
//! 401/403 move to the next endpoint; a bad request stops at once; when every endpoint fails
//! the user gets one line that names each attempt and never the key.

mod support;

use std::time::Duration;

use hermesd::agent::provider::{
    ApiMode, Endpoint, HttpSettings, ModelClient, ProviderError, StreamDelta,
};
use hermesd::config::Secret;
use support::fake_model::{FakeModel, Reply, Step};
use support::providers::{KEY, complete, endpoint, request, settings, streamed};

/// Bounds every test: a policy bug that waits for an hour fails instead of hanging.
const LIMIT: Duration = Duration::from_secs(30);

fn chain(primary: Endpoint, fallbacks: Vec<Endpoint>, http: HttpSettings) -> ModelClient {
    ModelClient::with_endpoints(primary, fallbacks, http).expect("model client")
}

/// Three endpoints on one fake, told apart by their model names.
fn three_models(fake: &FakeModel, http: HttpSettings) -> ModelClient {
    chain(
        endpoint(fake, ApiMode::ChatCompletions, "primary"),
        vec![
            endpoint(fake, ApiMode::AnthropicMessages, "second"),
            endpoint(fake, ApiMode::CodexResponses, "third"),
        ],
        http,
    )
}

fn models_called(fake: &FakeModel) -> Vec<String> {
    fake.requests()
        .iter()
        .map(|request| request.model().unwrap_or_default().to_owned())
        .collect()
}

async fn run(
    client: &ModelClient,
    stream: bool,
) -> (
    Result<hermesd::agent::provider::ModelReply, ProviderError>,
    Vec<StreamDelta>,
) {
    tokio::time::timeout(LIMIT, complete(client, &request("hi", stream)))
        .await
        .expect("the chain should finish well within its limit")
}

#[tokio::test]
async fn a_short_retry_after_is_waited_out_on_the_same_endpoint() {
    let fake = FakeModel::start().await;
    fake.push(Step::rate_limited(Some("1")));
    fake.push(Step::text("after the wait"));
    let client = three_models(
        &fake,
        HttpSettings {
            retries: 1,
            ..settings()
        },
    );
    let (result, _) = run(&client, false).await;
    let reply = result.unwrap();
    assert_eq!(reply.content.as_deref(), Some("after the wait"));
    assert_eq!(reply.model, "primary");
    assert_eq!(reply.usage.api_calls, 2);
    let requests = fake.requests();
    assert_eq!(models_called(&fake), ["primary", "primary"]);
    let waited = requests[1].received_at - requests[0].received_at;
    assert!(
        waited >= Duration::from_secs(1),
        "retried after {waited:?}, before retry-after"
    );
}

#[tokio::test]
async fn openai_retry_after_ms_is_understood() {
    let fake = FakeModel::start().await;
    fake.push(Step::rate_limited(None).with_header("retry-after-ms", "300"));
    let client = three_models(
        &fake,
        HttpSettings {
            retries: 1,
            ..settings()
        },
    );
    let (result, _) = run(&client, true).await;
    assert_eq!(result.unwrap().content.as_deref(), Some("echo: hi"));
    let requests = fake.requests();
    assert!(requests[1].received_at - requests[0].received_at >= Duration::from_millis(300));
}

#[tokio::test]
async fn a_long_or_missing_retry_after_moves_to_the_next_provider() {
    let fake = FakeModel::start().await;
    fake.push(Step::rate_limited(Some("3600")));
    fake.push(Step::rate_limited(None));
    fake.push(Step::text("third time lucky"));
    let client = three_models(
        &fake,
        HttpSettings {
            retries: 3,
            ..settings()
        },
    );
    let (result, _) = run(&client, false).await;
    let reply = result.unwrap();
    assert_eq!(
        (reply.content.as_deref(), reply.model.as_str()),
        (Some("third time lucky"), "third")
    );
    assert_eq!(reply.usage.api_calls, 3);
    assert_eq!(models_called(&fake), ["primary", "second", "third"]);
}

#[tokio::test]
async fn server_errors_retry_then_fall_back() {
    let fake = FakeModel::start().await;
    fake.push_all([500, 503, 502, 529].map(Step::error));
    let client = three_models(
        &fake,
        HttpSettings {
            retries: 1,
            ..settings()
        },
    );
    let (result, _) = run(&client, false).await;
    assert_eq!(result.unwrap().model, "third");
    assert_eq!(
        models_called(&fake),
        ["primary", "primary", "second", "second", "third"],
        "one retry per endpoint, then the next one"
    );
}

#[tokio::test]
async fn auth_failures_move_on_at_once_with_each_endpoint_its_own_key() {
    let primary_server = FakeModel::start().await;
    let fallback_server = FakeModel::start().await;
    primary_server.push(Step::error(401));
    fallback_server.push(Step::error(403));
    let mut primary = endpoint(&primary_server, ApiMode::ChatCompletions, "primary");
    primary.api_key = Some(Secret::new("sk-primary-key"));
    let forbidden = endpoint(&fallback_server, ApiMode::AnthropicMessages, "forbidden");
    let working = endpoint(&fallback_server, ApiMode::ChatCompletions, "working");
    let client = chain(
        primary,
        vec![forbidden, working],
        HttpSettings {
            retries: 2,
            ..settings()
        },
    );
    let (result, _) = run(&client, true).await;
    assert_eq!(result.unwrap().model, "working");
    assert_eq!(primary_server.requests().len(), 1, "401 is not retried");
    assert_eq!(
        primary_server.requests()[0].header("authorization"),
        Some("Bearer sk-primary-key")
    );
    let fallback_requests = fallback_server.requests();
    assert_eq!(fallback_requests[0].header("x-api-key"), Some(KEY));
    assert_eq!(
        fallback_requests[1].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[tokio::test]
async fn when_every_provider_fails_the_user_gets_one_line_without_the_key() {
    let fake = FakeModel::start().await;
    fake.push(Step::rate_limited(None).with_message(&format!("key {KEY} is over quota")));
    fake.push(Step::error(500));
    fake.push(Step::error(401).with_message(&format!("invalid x-api-key {KEY}")));
    let client = three_models(&fake, settings());
    let (result, _) = run(&client, false).await;
    let error = result.expect_err("everything failed");
    let kinds: Vec<&str> = error.attempts().iter().map(|a| a.error.kind()).collect();
    assert_eq!(kinds, ["rate_limited", "server", "auth"]);
    let line = error.to_string();
    assert_eq!(
        line,
        "all 3 model providers failed: fake (primary): rate limited (HTTP 429); \
         fake (second): server error (HTTP 500); \
         fake (third): authentication failed (HTTP 401); check the API key"
    );
    assert!(!line.contains('\n'));
    assert!(!format!("{error:?}").contains(KEY), "not even in Debug");
}

#[tokio::test]
async fn a_provider_message_echoing_the_key_is_scrubbed() {
    let fake = FakeModel::start().await;
    fake.push(Step::error(404).with_message(&format!("model not found for key {KEY}")));
    let client = three_models(&fake, settings());
    let (result, _) = run(&client, false).await;
    assert_eq!(result.unwrap().model, "second", "404 moves on");
    fake.push(Step::error(400).with_message(&format!("bad request from {KEY}")));
    let (result, _) = run(&client, false).await;
    let error = result.expect_err("400 stops the chain");
    assert_eq!(error.kind(), "rejected");
    assert_eq!(
        error.to_string(),
        "request refused (HTTP 400): bad request from ***"
    );
    assert_eq!(
        models_called(&fake),
        ["primary", "second", "primary"],
        "no fallback after a 400"
    );
}

#[tokio::test]
async fn a_stream_failing_half_way_restarts_on_the_next_provider() {
    let fake = FakeModel::start().await;
    fake.push(Step::Truncated(Reply::text("this answer is cut")));
    fake.push(Step::text("complete answer"));
    let client = three_models(&fake, settings());
    let (result, deltas) = run(&client, true).await;
    assert_eq!(result.unwrap().content.as_deref(), Some("complete answer"));
    let restart = deltas.iter().position(|d| *d == StreamDelta::Restart);
    let restart = restart.expect("the caller is told to drop the partial text");
    assert!(restart > 0, "partial text came first: {deltas:?}");
    assert_eq!(
        deltas
            .iter()
            .filter(|d| **d == StreamDelta::Restart)
            .count(),
        1
    );
    assert_eq!(streamed(&deltas).0, "complete answer");
}
