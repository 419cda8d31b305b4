//! The real `hermesd run` binary serving the OpenAI-compatible HTTP API, answering through
//! the fake model server: first run, auth, JSON and SSE completions, session continuity
//! across requests and restarts, clear 4xx errors, refusing to start without a key.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::daemon::{API_KEY, Daemon, api_env, base_env};
use support::fake_model::FakeModel;

const TIMEOUT: Duration = Duration::from_secs(60);

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(TIMEOUT).build().unwrap()
}

async fn chat(daemon: &Daemon, body: Value, session: Option<&str>) -> reqwest::Response {
    let mut request = client()
        .post(format!("{}/v1/chat/completions", daemon.api_url()))
        .bearer_auth(API_KEY)
        .json(&body);
    if let Some(id) = session {
        request = request.header("X-Hermes-Session-Id", id);
    }
    request.send().await.unwrap()
}

/// Sends a chat completion's head announcing `length` bytes and only the first of them, then
/// reads the whole answer: its status and JSON body.
async fn oversized_request(daemon: &Daemon, length: usize) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = daemon.api_url().trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {API_KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n{{\"messages\""
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), socket.read_to_end(&mut answer))
        .await
        .expect("the daemon answers an oversized request without waiting for its body")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = match (answer.find('{'), answer.rfind('}')) {
        (Some(start), Some(end)) if start < end => &answer[start..=end],
        _ => "null",
    };
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn user(text: &str) -> Value {
    json!({"model": "hermes-agent", "messages": [{"role": "user", "content": text}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_run_serves_the_api_with_a_generated_key_and_explains_the_missing_provider() {
    let home = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(home.path(), &base_env(home.path()));
    let logs = daemon.logs().join("\n");
    assert!(logs.contains("first run"), "{logs}");
    let dotenv = std::fs::read_to_string(home.path().join(".env")).unwrap();
    let key = dotenv
        .lines()
        .find_map(|l| l.strip_prefix("API_SERVER_KEY="))
        .expect("generated key")
        .to_owned();
    assert!(key.len() >= 16);
    assert!(!logs.contains(&key), "the key must never be printed");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.path().join(".env"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let response = client()
        .post(format!("{}/v1/chat/completions", daemon.api_url()))
        .bearer_auth(&key)
        .json(&user("hello"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let text = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(text.contains("no model provider is configured"), "{text}");
    assert!(text.contains("OPENAI_API_KEY"), "{text}");
    let (status, _) = daemon.terminate();
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_keep_a_session_across_requests_and_restarts() {
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let env = api_env(home.path(), &model.base_url());
    let daemon = Daemon::start(home.path(), &env);

    let first = chat(&daemon, user("remember the word apricot"), None).await;
    assert_eq!(first.status(), 200);
    let session = first
        .headers()
        .get("X-Hermes-Session-Id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(session.starts_with("api-"), "{session}");
    let body: Value = first.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "echo: remember the word apricot"
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop");

    let (status, _) = daemon.terminate();
    assert_eq!(status.code(), Some(0));
    let daemon = Daemon::start(home.path(), &env);
    let second = chat(&daemon, user("what was the word?"), Some(&session)).await;
    assert_eq!(second.status(), 200);
    assert_eq!(
        second.headers().get("X-Hermes-Session-Id").unwrap(),
        session.as_str()
    );
    let requests = model.requests();
    let last = &requests.last().unwrap().body;
    let sent = last["messages"].to_string();
    assert!(
        sent.contains("apricot"),
        "history reached the model: {sent}"
    );
    assert!(sent.contains("echo: remember the word apricot"), "{sent}");
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_sends_chunks_then_done() {
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(home.path(), &api_env(home.path(), &model.base_url()));
    let mut body = user("stream this please");
    body["stream"] = json!(true);
    let response = chat(&daemon, body, None).await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert!(response.headers().contains_key("X-Hermes-Session-Id"));
    let text = response.text().await.unwrap();
    let events: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(events.last(), Some(&"[DONE]"), "{text}");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "echo: stream this please");
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_json_errors_and_leave_no_session() {
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(home.path(), &api_env(home.path(), &model.base_url()));
    let url = format!("{}/v1/chat/completions", daemon.api_url());

    let health = client()
        .get(format!("{}/health", daemon.api_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let unauthorized = client().post(&url).json(&user("x")).send().await.unwrap();
    assert_eq!(unauthorized.status(), 401);
    let body: Value = unauthorized.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_api_key");
    let wrong = client()
        .get(format!("{}/v1/models", daemon.api_url()))
        .bearer_auth("wrong-key-wrong-key-wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let models: Value = client()
        .get(format!("{}/v1/models", daemon.api_url()))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "hermes-agent");

    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("invalid json", b"{not json".to_vec(), 400, "Invalid JSON"),
        ("no messages", br#"{"model":"x"}"#.to_vec(), 400, "messages"),
        (
            "no user message",
            br#"{"messages":[{"role":"assistant","content":"hi"}]}"#.to_vec(),
            400,
            "No user message",
        ),
        (
            "bad content",
            br#"{"messages":[{"role":"user","content":{"a":1}}]}"#.to_vec(),
            400,
            "content",
        ),
    ];
    for (name, body, status, needle) in cases {
        let response = client()
            .post(&url)
            .bearer_auth(API_KEY)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), status, "{name}");
        let error: Value = response.json().await.unwrap();
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{name}: {error}");
    }
    // A body announced over the limit is refused from its head alone. Sent by hand: a client
    // still writing 10 MB when the 413 arrives may see its write fail before it reads the
    // answer (the server does not read what it refused), which would make the test racy.
    let (status, error) = oversized_request(&daemon, 10_100_000).await;
    assert_eq!(status, 413, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("too large"),
        "{error}"
    );
    let traversal = chat(&daemon, user("x"), Some("../etc/passwd")).await;
    assert_eq!(traversal.status(), 400);
    assert!(
        model.requests().is_empty(),
        "no bad request reached the model"
    );
    daemon.terminate();
    let store = hermesd::state::Store::open(&home.path().join("state.db")).unwrap();
    let sessions = store.recent_sessions(None, 10).await.unwrap();
    assert!(sessions.is_empty(), "bad requests created {sessions:?}");
    store.close().await;
}

#[test]
fn refuses_to_start_without_a_usable_key_or_any_platform() {
    let cases: [(&str, &[(&str, &str)]); 3] = [
        ("enabled without a key", &[("API_SERVER_ENABLED", "true")]),
        (
            "short key",
            &[("API_SERVER_ENABLED", "true"), ("API_SERVER_KEY", "short")],
        ),
        ("nothing enabled", &[("API_SERVER_ENABLED", "false")]),
    ];
    for (name, extra) in cases {
        let home = tempfile::tempdir().unwrap();
        let mut env = base_env(home.path());
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut daemon = Daemon::spawn(home.path(), &env, false);
        let status = daemon.wait(Duration::from_secs(60));
        assert_eq!(status.code(), Some(78), "{name}: {:#?}", daemon.logs());
        let logs = daemon.logs().join("\n");
        assert!(
            logs.contains("API_SERVER_KEY") || logs.contains("no platform is enabled"),
            "{name}: {logs}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_python_client_works_unchanged() {
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(home.path(), &api_env(home.path(), &model.base_url()));
    let script = r#"
import json, sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1] + "/v1", api_key=sys.argv[2])
models = [m.id for m in client.models.list()]
plain = client.chat.completions.create(
    model="hermes-agent", messages=[{"role": "user", "content": "hi from python"}])
raw = client.chat.completions.with_raw_response.create(
    model="hermes-agent", messages=[{"role": "user", "content": "again"}])
session = raw.headers.get("x-hermes-session-id")
streamed = "".join(
    (chunk.choices[0].delta.content or "")
    for chunk in client.chat.completions.create(
        model="hermes-agent", stream=True,
        messages=[{"role": "user", "content": "stream from python"}])
    if chunk.choices)
try:
    OpenAI(base_url=sys.argv[1] + "/v1", api_key="wrong-key-wrong-key").models.list()
    denied = None
except Exception as e:
    denied = type(e).__name__
print(json.dumps({"models": models, "plain": plain.choices[0].message.content,
                  "session": session, "streamed": streamed, "denied": denied}))
"#;
    let api = daemon.api_url();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(support::python::python())
            .arg("-c")
            .arg(script)
            .arg(api)
            .arg(API_KEY)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["models"], json!(["hermes-agent"]));
    assert_eq!(result["plain"], "echo: hi from python");
    assert!(result["session"].as_str().unwrap().starts_with("api-"));
    assert_eq!(result["streamed"], "echo: stream from python");
    assert_eq!(result["denied"], "AuthenticationError");
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_endpoint_serves_health_readiness_metrics_and_the_log_level() {
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(home.path(), &api_env(home.path(), &model.base_url()));
    let admin = daemon.admin_url();
    let http = client();
    let ready = http.get(format!("{admin}/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let body: Value = ready.json().await.unwrap();
    assert_eq!(body["adapters"]["api_server"]["state"], "live");
    chat(&daemon, user("count me"), None).await;
    let metrics = http
        .get(format!("{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("hermesd_turns_completed_total 1"),
        "{metrics}"
    );
    let filter = || async {
        let level: Value = http
            .get(format!("{admin}/log-level"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        level["filter"].clone()
    };
    let set = |directives: &'static str| {
        http.put(format!("{admin}/log-level"))
            .bearer_auth(API_KEY)
            .body(directives)
            .send()
    };
    assert_eq!(filter().await, "info");
    assert_eq!(set("debug").await.unwrap().status(), 200);
    assert_eq!(filter().await, "debug");
    assert_eq!(set("hermesd=loud").await.unwrap().status(), 400);
    assert_eq!(filter().await, "debug", "a refused filter changes nothing");
    daemon.terminate();
}

#[test]
fn two_homes_cannot_drive_one_bot_token() {
    let locks = tempfile::tempdir().unwrap();
    let token = "123456:TEST-shared-token-never-printed";
    let env_for = |home: &std::path::Path| {
        let mut env = base_env(home);
        env.extend(
            [
                ("TELEGRAM_BOT_TOKEN", token),
                ("API_SERVER_ENABLED", "false"),
                ("HERMES_GATEWAY_LOCK_DIR", locks.path().to_str().unwrap()),
                // Nothing answers here: the adapter keeps retrying; the lock is what matters.
                ("HERMES__TELEGRAM__EXTRA__BASE_URL", "http://127.0.0.1:9"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        env
    };
    let first_home = tempfile::tempdir().unwrap();
    let first = Daemon::start(first_home.path(), &env_for(first_home.path()));
    let second_home = tempfile::tempdir().unwrap();
    let mut second = Daemon::spawn(second_home.path(), &env_for(second_home.path()), false);
    let status = second.wait(Duration::from_secs(60));
    assert_eq!(status.code(), Some(1));
    let logs = second.logs().join("\n");
    assert!(logs.contains("telegram-bot-token"), "{logs}");
    assert!(
        logs.contains(&first.pid().to_string()),
        "names the holder: {logs}"
    );
    assert!(!logs.contains(token), "the token is never printed: {logs}");
    let (status, _) = first.terminate();
    assert_eq!(status.code(), Some(0));
}
