//! Who gets a run slot of the HTTP API, through the real binary: only a request that is
//! authenticated, arrived whole within `body_timeout_seconds` and fits `max_messages` /
//! `max_request_chars`. Slow senders (slowloris), unauthenticated callers and oversized
//! requests are answered 408 / 401 / 413 without ever holding one of the
//! `max_concurrent_runs` slots, and an oversized request leaves nothing in state.db. The
//! admin listener answers only requests naming it in `Host` and changes state only for a
//! Bearer token.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::conditions::wait_until;
use support::daemon::{API_KEY, Daemon, api_env};
use support::fake_model::{FakeModel, Reply, Step};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PATIENCE: Duration = Duration::from_secs(60);
/// The body deadline the tests configure: short, so a test waits seconds, not the default.
const BODY_TIMEOUT_SECS: u64 = 3;

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

fn chat(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

/// A socket that sends a chat completion's head announcing a 1 MB body, then one byte of
/// it, and nothing more: the slowloris of the issue.
async fn slow_sender(daemon: &Daemon, authorised: bool) -> TcpStream {
    let address = daemon.api_url().trim_start_matches("http://").to_owned();
    let mut socket = TcpStream::connect(&address).await.unwrap();
    let auth = if authorised {
        format!("Authorization: Bearer {API_KEY}\r\n")
    } else {
        String::new()
    };
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {address}\r\n{auth}\
         Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{{"
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    socket
}

/// The status line and body the server wrote before it closed (or `PATIENCE` passed).
async fn answer(socket: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let read_all = async {
        loop {
            match socket.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    received.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&received);
                    // One response is enough: head and a complete JSON body.
                    if text.contains("\r\n\r\n") && text.trim_end().ends_with('}') {
                        break;
                    }
                }
            }
        }
    };
    let _ = tokio::time::timeout(PATIENCE, read_all).await;
    String::from_utf8_lossy(&received).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_unauthenticated_senders_hold_no_run_slot() {
    let model = FakeModel::start().await;
    let timeout = BODY_TIMEOUT_SECS.to_string();
    let (_home, daemon) = daemon_with(
        &model,
        &[
            ("HERMES__PLATFORMS__API_SERVER__MAX_CONCURRENT_RUNS", "1"),
            (
                "HERMES__PLATFORMS__API_SERVER__BODY_TIMEOUT_SECONDS",
                &timeout,
            ),
            ("HERMES__AUXILIARY__TITLE_GENERATION__ENABLED", "false"),
            // The request trace says when each slow request has reached the server's handler.
            ("RUST_LOG", "info,tower_http=debug"),
        ],
    )
    .await;

    // Three callers without the key: refused at once, whatever their body is doing.
    for _ in 0..3 {
        let mut socket = slow_sender(&daemon, false).await;
        let reply = answer(&mut socket).await;
        assert!(reply.starts_with("HTTP/1.1 401"), "{reply:?}");
        assert!(reply.contains("invalid_api_key"), "{reply}");
    }

    // Three paying callers that never finish their body, all inside the server.
    let started = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..3 {
        slow.push(slow_sender(&daemon, true).await);
    }
    wait_until("the slow requests reached the server", PATIENCE, || {
        daemon
            .logs()
            .iter()
            .filter(|line| line.contains("started processing request"))
            .count()
            >= 6
    })
    .await;

    // While they hang, a paying client with a whole body is served.
    let http = reqwest::Client::new();
    let served = http
        .post(format!("{}/v1/chat/completions", daemon.api_url()))
        .bearer_auth(API_KEY)
        .json(&chat("I pay and I send my whole body"))
        .send()
        .await
        .unwrap();
    assert!(served.status().is_success(), "{}", served.status());
    assert!(
        started.elapsed() < Duration::from_secs(BODY_TIMEOUT_SECS),
        "the paying client was served only after the slow senders were dropped"
    );

    // And the slow ones are told why, once their time is up.
    for socket in &mut slow {
        let reply = answer(socket).await;
        assert!(reply.starts_with("HTTP/1.1 408"), "{reply:?}");
        assert!(reply.contains("body_timeout_seconds"), "{reply}");
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(BODY_TIMEOUT_SECS) && waited < PATIENCE,
        "408 after {waited:?}"
    );
    // The log line may land a moment after the 408 (stderr is read by another thread).
    wait_until("the operator is told", PATIENCE, || {
        daemon
            .logs()
            .iter()
            .any(|line| line.contains("refused a chat completion") && line.contains("body_timeout"))
    })
    .await;
    tokio::task::block_in_place(|| daemon.terminate());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthenticated_request_is_refused_401_even_when_every_slot_is_taken() {
    let model = FakeModel::start().await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    model.push(Step::Gated {
        reply: Reply::text("released"),
        gate: gate.clone(),
    });
    let (_home, daemon) = daemon_with(
        &model,
        &[
            ("HERMES__PLATFORMS__API_SERVER__MAX_CONCURRENT_RUNS", "1"),
            ("HERMES__AUXILIARY__TITLE_GENERATION__ENABLED", "false"),
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", daemon.api_url());
    let running = tokio::spawn(
        http.post(&url)
            .bearer_auth(API_KEY)
            .json(&chat("a long turn"))
            .send(),
    );
    wait_until("the turn reached the model", PATIENCE, || {
        !model.requests().is_empty()
    })
    .await;

    // The key is checked before the slot: a stranger learns nothing about the load.
    let stranger = http
        .post(&url)
        .json(&chat("let me in"))
        .send()
        .await
        .unwrap();
    assert_eq!(stranger.status(), reqwest::StatusCode::UNAUTHORIZED);
    let body: Value = stranger.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_api_key", "{body}");
    // A paying client is the one told to wait.
    let busy = http
        .post(&url)
        .bearer_auth(API_KEY)
        .json(&chat("me too"))
        .send()
        .await
        .unwrap();
    assert_eq!(busy.status(), reqwest::StatusCode::TOO_MANY_REQUESTS);

    gate.add_permits(1);
    let finished = running.await.unwrap().unwrap();
    assert!(finished.status().is_success(), "{}", finished.status());
    tokio::task::block_in_place(|| daemon.terminate());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_request_gets_413_naming_the_limit_and_leaves_no_row() {
    let model = FakeModel::start().await;
    let (home, daemon) = daemon_with(
        &model,
        &[
            ("HERMES__PLATFORMS__API_SERVER__MAX_MESSAGES", "50"),
            ("HERMES__PLATFORMS__API_SERVER__MAX_REQUEST_CHARS", "10000"),
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", daemon.api_url());

    // The flood, scaled to the limit: many small messages.
    let many: Vec<Value> = (0..51)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("message {i}")})
        })
        .collect();
    let long = "x".repeat(6000);
    let cases = [
        (
            json!({"messages": many}),
            "platforms.api_server.max_messages",
            "too_many_messages",
        ),
        (
            json!({"messages": [
                {"role": "user", "content": long},
                {"role": "assistant", "content": "noted"},
                {"role": "user", "content": long},
            ]}),
            "platforms.api_server.max_request_chars",
            "request_too_long",
        ),
    ];
    for (body, key, code) in cases {
        let response = http
            .post(&url)
            .bearer_auth(API_KEY)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::PAYLOAD_TOO_LARGE);
        let error: Value = response.json().await.unwrap();
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(key), "{error}");
        assert_eq!(error["error"]["code"], code, "{error}");
    }
    assert!(
        model.requests().is_empty(),
        "a refused request reached the model"
    );

    // Within the limits the same conversation is served.
    let fits = http
        .post(&url)
        .bearer_auth(API_KEY)
        .json(&chat("short and sweet"))
        .send()
        .await
        .unwrap();
    assert!(fits.status().is_success(), "{}", fits.status());
    tokio::task::block_in_place(|| daemon.terminate());

    let store = hermesd::state::Store::open(&home.path().join("state.db")).unwrap();
    let sessions = store.recent_sessions(None, 10).await.unwrap();
    assert_eq!(sessions.len(), 1, "only the request that fit: {sessions:?}");
    let messages = store.get_messages(&sessions[0].session.id).await.unwrap();
    assert!(
        messages
            .iter()
            .all(|m| !format!("{:?}", m.content).contains("message 1")),
        "a refused request's messages were stored"
    );
    store.close().await;
}

/// A raw request to the admin listener with a chosen `Host`, as a DNS-rebinding page's
/// browser would send it; the status code.
async fn admin_status(daemon: &Daemon, method: &str, host: &str, auth: Option<&str>) -> u16 {
    let address = daemon.admin_url().trim_start_matches("http://").to_owned();
    let mut socket = TcpStream::connect(&address).await.unwrap();
    let auth = auth
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    let body = "debug";
    let request = format!(
        "{method} /log-level HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut reply = String::new();
    tokio::time::timeout(PATIENCE, socket.read_to_string(&mut reply))
        .await
        .expect("the admin listener answered")
        .unwrap();
    reply
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {reply:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_listener_answers_only_its_own_host_and_changes_only_with_a_token() {
    let model = FakeModel::start().await;
    let admin_token = "admin-token-for-the-test-0123";
    let (_home, daemon) = daemon_with(&model, &[("HERMES__ADMIN__TOKEN", admin_token)]).await;
    let port = daemon.admin_url().rsplit(':').next().unwrap().to_owned();
    let own = format!("127.0.0.1:{port}");

    // DNS rebinding: the page's own name resolves to 127.0.0.1, the browser sends it as Host.
    let rebound = format!("attacker.example:{port}");
    assert_eq!(
        admin_status(&daemon, "PUT", &rebound, Some(API_KEY)).await,
        421
    );
    assert_eq!(admin_status(&daemon, "GET", &rebound, None).await, 421);
    // The right host without a token: reads pass, changes do not.
    assert_eq!(admin_status(&daemon, "GET", &own, None).await, 200);
    assert_eq!(admin_status(&daemon, "PUT", &own, None).await, 401);
    assert_eq!(
        admin_status(&daemon, "PUT", &own, Some("not-the-token-at-all")).await,
        401
    );
    for host in [
        own.clone(),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        assert_eq!(
            admin_status(&daemon, "PUT", &host, Some(admin_token)).await,
            200
        );
    }
    assert_eq!(admin_status(&daemon, "PUT", &own, Some(API_KEY)).await, 200);

    let http = reqwest::Client::new();
    for path in ["/health", "/ready", "/metrics"] {
        let open = http
            .get(format!("{}{path}", daemon.admin_url()))
            .send()
            .await
            .unwrap();
        assert!(open.status().is_success(), "{path}: {}", open.status());
    }
    assert!(
        daemon
            .logs()
            .iter()
            .any(|line| line.contains("admin API refused") && line.contains("attacker.example")),
        "the operator was not told"
    );
    assert!(
        !daemon.logs().iter().any(|line| line.contains(admin_token)),
        "the admin token reached the log"
    );
    tokio::task::block_in_place(|| daemon.terminate());
}
