//! `ModelClient::listed_models` against the wire-level fake model's `GET /v1/models`: the
//! OpenAI shape with a bearer key, Anthropic's pages followed with `after_id` and its own
//! headers, one fetch per ten minutes per server and key, and a missing listing as a clear
//! error that never carries the key.

mod support;

use hermesd::agent::provider::{ApiMode, ListingError, ModelClient};
use support::fake_model::FakeModel;
use support::providers::{KEY, endpoint, settings};

#[tokio::test]
async fn an_openai_listing_is_fetched_once_and_then_cached() {
    let fake = FakeModel::start().await;
    fake.set_models(Some(&["fake-model", "gpt-4o-mini", "fake-model"]));
    let primary = endpoint(&fake, ApiMode::ChatCompletions, "fake-model");
    let client = ModelClient::with_endpoints(primary.clone(), Vec::new(), settings()).unwrap();
    let listed = client.listed_models(&primary).await.unwrap();
    assert_eq!(
        &listed[..],
        ["fake-model", "gpt-4o-mini"],
        "repeats dropped"
    );
    let again = client.listed_models(&primary).await.unwrap();
    assert_eq!(listed, again);
    let asked = fake.models_requests();
    assert_eq!(asked.len(), 1, "the second answer came from the cache");
    assert_eq!(asked[0].path, "/v1/models");
    assert_eq!(
        asked[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    // A clone (a session's client with another primary) shares the cache.
    let clone = client.overridden(None, Some("gpt-4o-mini")).unwrap();
    clone.listed_models(&primary).await.unwrap();
    assert_eq!(fake.models_requests().len(), 1);
}

#[tokio::test]
async fn anthropic_pages_are_followed_with_its_headers() {
    let fake = FakeModel::start().await;
    let names: Vec<String> = (0..2500).map(|i| format!("claude-{i:04}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    fake.set_models(Some(&refs));
    let primary = endpoint(&fake, ApiMode::AnthropicMessages, "claude-0000");
    let client = ModelClient::with_endpoints(primary.clone(), Vec::new(), settings()).unwrap();
    let listed = client.listed_models(&primary).await.unwrap();
    assert_eq!(listed.len(), 2500);
    assert_eq!(listed[2499], "claude-2499");
    let paths: Vec<String> = fake
        .models_requests()
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(
        paths,
        [
            "/v1/models?limit=1000",
            "/v1/models?limit=1000&after_id=claude-0999",
            "/v1/models?limit=1000&after_id=claude-1999",
        ]
    );
    for request in fake.models_requests() {
        assert_eq!(request.header("x-api-key"), Some(KEY));
        assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(request.header("authorization"), None);
    }
}

#[tokio::test]
async fn a_server_without_a_listing_is_a_clear_error_and_is_asked_again_next_time() {
    let fake = FakeModel::start().await;
    let primary = endpoint(&fake, ApiMode::ChatCompletions, "fake-model");
    let client = ModelClient::with_endpoints(primary.clone(), Vec::new(), settings()).unwrap();
    let error = client.listed_models(&primary).await.unwrap_err();
    assert_eq!(error, ListingError::Status(404));
    assert_eq!(error.to_string(), "the server answered HTTP 404");
    client.listed_models(&primary).await.unwrap_err();
    assert_eq!(fake.models_requests().len(), 2, "a failure is not cached");
    // Once the server lists, the next ask succeeds.
    fake.set_models(Some(&["fake-model"]));
    assert_eq!(
        &client.listed_models(&primary).await.unwrap()[..],
        ["fake-model"]
    );

    // A closed port: a connect error, with neither key nor address in it.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let mut gone = primary.clone();
    gone.base_url = format!("http://{closed}/v1");
    let error = client.listed_models(&gone).await.unwrap_err();
    assert!(matches!(error, ListingError::Connect(_)), "{error:?}");
    let text = error.to_string();
    assert!(
        !text.contains(KEY) && !text.contains(&closed.to_string()),
        "{text}"
    );
}
