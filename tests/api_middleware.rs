//! The HTTP API's middleware through the real binary: CORS for the configured origins
//! (browser-style preflight from an allowed and a refused origin, credentials never
//! allowed), load shedding when `max_concurrent_runs` turns are in flight (429 with
//! `Retry-After`, not a queue), and the request id on the response and in the request's log
//! lines.

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::daemon::{API_KEY, Daemon, api_env};
use support::fake_model::{FakeModel, Reply, Step};

const PATIENCE: Duration = Duration::from_secs(60);

async fn daemon_with(model: &FakeModel, extra: &[(&str, &str)]) -> (tempfile::TempDir, Daemon) {
    let home = tempfile::tempdir().unwrap();
    let mut env = api_env(home.path(), &model.base_url());
    env.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let path = home.path().to_path_buf();
    let daemon = tokio::task::spawn_blocking(move || Daemon::start(&path, &env))
        .await
        .unwrap();
    (home, daemon)
}

fn chat(text: &str) -> serde_json::Value {
    serde_json::json!({"messages": [{"role": "user", "content": text}]})
}

/// An authorised chat completion request (each distinct text is its own session).
fn post(http: &reqwest::Client, url: &str, text: &str) -> reqwest::RequestBuilder {
    http.post(url).bearer_auth(API_KEY).json(&chat(text))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_is_answered_for_an_allowed_origin_and_refused_for_another() {
    let model = FakeModel::start().await;
    let (_home, daemon) = daemon_with(
        &model,
        &[(
            "API_SERVER_CORS_ORIGINS",
            "https://app.example, https://admin.example",
        )],
    )
    .await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", daemon.api_url());
    let preflight = |origin: &'static str| {
        http.request(reqwest::Method::OPTIONS, &url)
            .header("Origin", origin)
            .header("Access-Control-Request-Method", "POST")
            .header(
                "Access-Control-Request-Headers",
                "authorization,content-type",
            )
            .send()
    };

    let allowed = preflight("https://app.example").await.unwrap();
    assert!(allowed.status().is_success(), "{}", allowed.status());
    let headers = allowed.headers();
    assert_eq!(
        headers["access-control-allow-origin"],
        "https://app.example"
    );
    let methods = headers["access-control-allow-methods"].to_str().unwrap();
    assert!(methods.contains("POST"), "{methods}");
    let allowed_headers = headers["access-control-allow-headers"].to_str().unwrap();
    assert!(
        allowed_headers.contains("authorization"),
        "{allowed_headers}"
    );
    assert!(
        headers.get("access-control-allow-credentials").is_none(),
        "credentials must stay off"
    );

    let refused = preflight("https://evil.example").await.unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::FORBIDDEN);
    assert!(
        refused
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );

    // An actual browser call from the allowed origin carries the CORS headers; from the
    // refused one it is turned away before it reaches the agent.
    let call = post(&http, &url, "hello from a browser")
        .header("Origin", "https://admin.example")
        .send()
        .await
        .unwrap();
    assert!(call.status().is_success(), "{}", call.status());
    assert_eq!(
        call.headers()["access-control-allow-origin"],
        "https://admin.example"
    );
    let before = model.requests().len();
    let foreign = post(&http, &url, "hello from elsewhere")
        .header("Origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), reqwest::StatusCode::FORBIDDEN);
    assert_eq!(
        model.requests().len(),
        before,
        "a refused origin reached the model"
    );
    tokio::task::block_in_place(|| daemon.terminate());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_api_refuses_with_429_and_retry_after_then_recovers() {
    let model = FakeModel::start().await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    for _ in 0..2 {
        model.push(Step::Gated {
            reply: Reply::text("released"),
            gate: gate.clone(),
        });
    }
    let (_home, daemon) = daemon_with(
        &model,
        &[
            ("HERMES__PLATFORMS__API_SERVER__MAX_CONCURRENT_RUNS", "2"),
            ("HERMES__AUXILIARY__TITLE_GENERATION__ENABLED", "false"),
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", daemon.api_url());
    let running: Vec<_> = (0..2)
        .map(|i| tokio::spawn(post(&http, &url, &format!("long turn {i}")).send()))
        .collect();
    // Both turns are provably in flight: the model holds both requests.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while model.requests().len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turns never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let refused = post(&http, &url, "one too many").send().await.unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    assert_eq!(
        model.requests().len(),
        2,
        "the refused request reached the model"
    );
    // Health and the model list are not agent runs: they answer while saturated.
    let health = http
        .get(format!("{}/health", daemon.api_url()))
        .send()
        .await
        .unwrap();
    assert!(health.status().is_success());

    gate.add_permits(2);
    for handle in running {
        let response = handle.await.unwrap().unwrap();
        assert!(response.status().is_success(), "{}", response.status());
    }
    let after = post(&http, &url, "room again").send().await.unwrap();
    assert!(after.status().is_success(), "{}", after.status());
    tokio::task::block_in_place(|| daemon.terminate());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_id_is_echoed_and_names_the_requests_log_lines() {
    let model = FakeModel::start().await;
    let (_home, daemon) = daemon_with(&model, &[]).await;
    let http = reqwest::Client::new();
    let response = http
        .post(format!("{}/v1/chat/completions", daemon.api_url()))
        .bearer_auth("not-the-key-at-all-0123")
        .header("x-request-id", "req-trace-4711")
        .json(&chat("hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::UNAUTHORIZED);
    assert_eq!(response.headers()["x-request-id"], "req-trace-4711");
    let line = tokio::task::block_in_place(|| {
        daemon.wait_for_line("missing or invalid API key", PATIENCE)
    })
    .expect("the refusal was logged");
    assert!(line.contains("req-trace-4711"), "{line}");

    // Without one, the server makes an id up and returns it.
    let generated = http
        .get(format!("{}/health", daemon.api_url()))
        .send()
        .await
        .unwrap();
    let id = generated.headers()["x-request-id"].to_str().unwrap();
    assert_eq!(id.len(), 36, "a UUID: {id}");
    tokio::task::block_in_place(|| daemon.terminate());
}
