//! Timeouts, connection errors and cancellation over real HTTP: a stalled stream and a server
//! that never answers are `timeout`s, a closed port is `connect`, and dropping the future
//! aborts the request and returns nothing.

mod support;

use std::time::Duration;

use hermesd::agent::provider::{ApiMode, HttpSettings, ModelClient, ProviderError, StreamDelta};
use support::fake_model::{FakeModel, Reply, Step};
use support::providers::{MODES, complete, endpoint, only_error, request, settings};

/// Bounds each wait; far above the timeouts under test.
const LIMIT: Duration = Duration::from_secs(30);

fn quick(fake: &FakeModel, mode: ApiMode, http: HttpSettings) -> ModelClient {
    ModelClient::with_endpoints(endpoint(fake, mode, "fake-model"), Vec::new(), http).unwrap()
}

#[tokio::test]
async fn a_stalled_stream_times_out_as_stalled() {
    for mode in MODES {
        let fake = FakeModel::start().await;
        fake.push(Step::Stall);
        let stall = Duration::from_millis(300);
        let client = quick(
            &fake,
            mode,
            HttpSettings {
                stall_timeout: stall,
                ..settings()
            },
        );
        let (result, _) = tokio::time::timeout(LIMIT, complete(&client, &request("hi", true)))
            .await
            .expect("the stall timeout fires");
        let error = result.expect_err("a stalled stream is no answer");
        assert!(
            matches!(only_error(&error), ProviderError::Timeout { stalled: true, after } if *after == stall),
            "{mode}: {error}"
        );
        assert_eq!(
            error.to_string(),
            "the model provider failed: fake (fake-model): timed out: the stream sent nothing for 0.3s"
        );
        fake.wait_for_disconnects(1, LIMIT).await;
    }
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    for mode in MODES {
        let fake = FakeModel::start().await;
        fake.push(Step::Stall);
        let limit = Duration::from_millis(400);
        let client = quick(
            &fake,
            mode,
            HttpSettings {
                request_timeout: limit,
                ..settings()
            },
        );
        let (result, _) = tokio::time::timeout(LIMIT, complete(&client, &request("hi", false)))
            .await
            .expect("the request timeout fires");
        let error = result.expect_err("no answer");
        assert!(
            matches!(only_error(&error), ProviderError::Timeout { stalled: false, after } if *after == limit),
            "{mode}: {error}"
        );
    }
}

#[tokio::test]
async fn a_slow_but_steady_stream_is_not_a_stall() {
    let fake = FakeModel::start().await;
    fake.push(Step::Slow {
        reply: Reply::text("one two three four five"),
        delay: Duration::from_millis(100),
    });
    let http = HttpSettings {
        stall_timeout: Duration::from_secs(5),
        ..settings()
    };
    let client = quick(&fake, ApiMode::AnthropicMessages, http);
    let (result, deltas) = complete(&client, &request("count", true)).await;
    assert_eq!(
        result.unwrap().content.as_deref(),
        Some("one two three four five")
    );
    assert_eq!(
        deltas
            .iter()
            .filter(|d| matches!(d, StreamDelta::Text(_)))
            .count(),
        5
    );
}

#[tokio::test]
async fn a_closed_port_is_a_connection_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let endpoint = hermesd::agent::provider::Endpoint::new(
        "local",
        format!("http://127.0.0.1:{port}/v1"),
        None,
        "m",
    );
    let client = ModelClient::with_endpoints(endpoint, Vec::new(), settings()).unwrap();
    let (result, _) = tokio::time::timeout(LIMIT, complete(&client, &request("hi", true)))
        .await
        .unwrap();
    let error = result.expect_err("nothing listens there");
    let only = only_error(&error);
    assert_eq!(only.kind(), "connect", "{error}");
    assert!(
        only.to_string()
            .starts_with("connection failed: cannot connect"),
        "{only}"
    );
    assert!(
        !error.to_string().contains("127.0.0.1"),
        "no URL in the message: {error}"
    );
}

#[tokio::test]
async fn dropping_the_future_aborts_the_request_and_returns_nothing() {
    for mode in MODES {
        let fake = FakeModel::start().await;
        fake.push(Step::Slow {
            reply: Reply::text("a b c d e f g h i j k l m n o p q r s t"),
            delay: Duration::from_millis(200),
        });
        let client = quick(&fake, mode, settings());
        let (first_delta, mut got_delta) = tokio::sync::mpsc::unbounded_channel();
        let mut on_delta = |delta: StreamDelta| {
            let _ = first_delta.send(delta);
        };
        let stream_request = request("talk slowly", true);
        let call = client.complete(&stream_request, &mut on_delta);
        // Cancel the way the agent loop does: stop polling once something else happens.
        tokio::select! {
            result = call => panic!("{mode}: the slow reply should not finish first: {result:?}"),
            delta = got_delta.recv() => assert!(matches!(delta, Some(StreamDelta::Text(_))), "{mode}"),
        }
        fake.wait_for_disconnects(1, LIMIT).await;
        // The client is still good for the next turn.
        let (result, _) = complete(&client, &request("again", false)).await;
        assert_eq!(
            result.unwrap().content.as_deref(),
            Some("echo: again"),
            "{mode}"
        );
    }
}
