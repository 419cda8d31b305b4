//! Model-client helpers for the provider tests: endpoints on a fake model, short timeouts,
//! and a way to collect what was streamed.

use std::time::Duration;

use hermesd::agent::message::ChatMessage;
use hermesd::agent::provider::{
    ApiMode, Endpoint, HttpSettings, ModelClient, ModelReply, ModelRequest, ProviderError,
    StreamDelta,
};
use hermesd::config::Secret;

use super::fake_model::FakeModel;

/// The key every fake endpoint is configured with; it must never show up in an error.
pub const KEY: &str = "sk-test-3f9a7c1e5b2d-never-print-me";

pub const MODES: [ApiMode; 3] = [
    ApiMode::ChatCompletions,
    ApiMode::AnthropicMessages,
    ApiMode::CodexResponses,
];

/// Generous timeouts (the tests that need a timeout set their own) and no retries, so each
/// scripted step answers exactly one call.
pub fn settings() -> HttpSettings {
    HttpSettings {
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(20),
        stall_timeout: Duration::from_secs(20),
        max_retry_after: Duration::from_secs(5),
        retries: 0,
        retry_backoff: Duration::from_millis(10),
    }
}

pub fn endpoint(fake: &FakeModel, mode: ApiMode, model: &str) -> Endpoint {
    Endpoint::new("fake", fake.base_url(), Some(Secret::new(KEY)), model).with_mode(mode)
}

pub fn client(fake: &FakeModel, mode: ApiMode) -> ModelClient {
    ModelClient::with_endpoints(endpoint(fake, mode, "fake-model"), Vec::new(), settings())
        .expect("model client")
}

pub fn request(text: &str, stream: bool) -> ModelRequest {
    ModelRequest {
        system: Some("You are a test.".into()),
        messages: vec![ChatMessage::user(text)],
        tools: Default::default(),
        max_tokens: None,
        stream,
    }
}

/// Runs one completion, returning its result and every delta streamed on the way.
pub async fn complete(
    client: &ModelClient,
    request: &ModelRequest,
) -> (Result<ModelReply, ProviderError>, Vec<StreamDelta>) {
    let mut deltas = Vec::new();
    let mut on_delta = |delta: StreamDelta| deltas.push(delta);
    let result = client.complete(request, &mut on_delta).await;
    (result, deltas)
}

/// The streamed text and reasoning, each concatenated.
pub fn streamed(deltas: &[StreamDelta]) -> (String, String) {
    let mut text = String::new();
    let mut reasoning = String::new();
    for delta in deltas {
        match delta {
            StreamDelta::Text(piece) => text.push_str(piece),
            StreamDelta::Reasoning(piece) => reasoning.push_str(piece),
            StreamDelta::Restart => {
                text.clear();
                reasoning.clear();
            }
        }
    }
    (text, reasoning)
}

/// The error of the only endpoint of a one-endpoint chain.
pub fn only_error(error: &ProviderError) -> &ProviderError {
    match error.attempts() {
        [attempt] => &attempt.error,
        other => panic!("expected one failed attempt, got {} ({error})", other.len()),
    }
}
