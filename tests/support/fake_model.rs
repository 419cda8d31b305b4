//! A fake model server speaking the three wire formats hermesd uses: OpenAI chat completions
//! (`POST /v1/chat/completions`), the Responses API (`POST /v1/responses`) and Anthropic
//! Messages (`POST /v1/messages`), streamed (SSE in each format's real event shapes) or not;
//! and the models listing (`GET /v1/models`, OpenAI's or Anthropic's shape; 404 until a test
//! sets one with [`FakeModel::set_models`]).
//!
//! Each request takes the next [`Step`] of the script; with an empty script the server
//! echoes (`"echo: <last user text>"`), so end-to-end runs and load tests need no script.
//! Every request is recorded (path, headers, body) for assertions.
//!
//! Self-contained on purpose (axum, tokio, serde_json, futures-util only; nothing from
//! hermesd), so a benchmark can include it with `#[path]` and it never mirrors the client's
//! own parsing bugs.
#![allow(dead_code)]

#[path = "fake_model/anthropic.rs"]
mod anthropic;
#[path = "fake_model/chat.rs"]
mod chat;
#[path = "fake_model/models.rs"]
mod models;
#[path = "fake_model/responses.rs"]
mod responses;
#[path = "fake_model/script.rs"]
mod script;
#[path = "fake_model/serve.rs"]
mod serve;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::watch;

#[allow(unused_imports)]
pub use script::{FakeCall, FakeUsage, Reply, Step};

/// How hermesd's session-title request (Hermes `_TITLE_PROMPT`) begins. Such requests are
/// answered out of band: they take no scripted step and are not in [`FakeModel::requests`]
/// (see [`FakeModel::title_requests`]) and by default get an empty answer (no title; see
/// [`FakeModel::set_title_reply`]), so the background title call after a first exchange
/// never races a test's script or titles its sessions.
pub const TITLE_PROMPT_START: &str = "Name the conversation that opens with the exchange below.";

/// A running fake model server. Dropping it stops the server.
#[derive(Debug)]
pub struct FakeModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    lifetime: serve::Lifetime,
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub path: String,
    /// Lowercase names.
    pub headers: BTreeMap<String, String>,
    /// `Value::Null` when the body was not JSON (see `body_text`).
    pub body: Value,
    pub body_text: String,
    pub received_at: Instant,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    pub fn model(&self) -> Option<&str> {
        self.body.get("model").and_then(Value::as_str)
    }

    pub fn is_stream(&self) -> bool {
        self.body
            .get("stream")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The text of the last chat-completions message (the turn's newest user message).
    pub fn last_message_text(&self) -> String {
        self.body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned()
    }
}

/// Answers a request from its body (the request's JSON) when the script is empty: for tests
/// whose concurrent conversations each need their own answer, which one shared queue of
/// steps cannot give.
pub type Responder = Arc<dyn Fn(&Value) -> Step + Send + Sync>;

struct ResponderSlot(Option<Responder>);

impl std::fmt::Debug for ResponderSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "responder"
        } else {
            "none"
        })
    }
}

#[derive(Debug)]
struct Shared {
    script: Mutex<VecDeque<Step>>,
    responder: Mutex<ResponderSlot>,
    requests: Mutex<Vec<RecordedRequest>>,
    strict: Mutex<bool>,
    request_count: watch::Sender<usize>,
    /// Streams the client dropped before they ended.
    disconnects: watch::Sender<usize>,
    title_reply: Mutex<Option<String>>,
    title_requests: Mutex<Vec<Value>>,
    models: Mutex<Option<Vec<String>>>,
    models_requests: Mutex<Vec<RecordedRequest>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A test that panicked while holding the lock must not hide its own failure behind ours.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl FakeModel {
    /// Starts on the current tokio runtime, on `127.0.0.1:0`.
    pub async fn start() -> FakeModel {
        let shared = Shared::new();
        let (addr, lifetime) = serve::on_current_runtime(shared.clone()).await;
        FakeModel {
            addr,
            shared,
            lifetime,
        }
    }

    /// Starts on a thread of its own with its own runtime: for plain `#[test]`s, end-to-end
    /// tests of the binary and benchmarks. Keep it (e.g. in a `static OnceLock`) to serve
    /// for the whole process.
    pub fn start_in_background() -> FakeModel {
        let shared = Shared::new();
        let (addr, lifetime) = serve::on_own_thread(shared.clone());
        FakeModel {
            addr,
            shared,
            lifetime,
        }
    }

    /// The base URL to configure: `http://127.0.0.1:PORT/v1` (Anthropic clients append
    /// `/messages`, OpenAI clients `/chat/completions` or `/responses`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues the answer to a future request.
    pub fn push(&self, step: Step) {
        lock(&self.shared.script).push_back(step);
    }

    pub fn push_all(&self, steps: impl IntoIterator<Item = Step>) {
        lock(&self.shared.script).extend(steps);
    }

    /// Answers every request that finds the script empty with `responder(body)` instead of
    /// an echo.
    pub fn set_responder(&self, responder: Responder) {
        lock(&self.shared.responder).0 = Some(responder);
    }

    /// Steps not consumed yet.
    pub fn pending_steps(&self) -> usize {
        lock(&self.shared.script).len()
    }

    /// With `strict`, a request that finds the script empty gets a 500 instead of an echo.
    pub fn set_strict(&self, strict: bool) {
        *lock(&self.shared.strict) = strict;
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Waits until `count` requests have arrived (or `timeout` passed; then panics).
    pub async fn wait_for_requests(&self, count: usize, timeout: Duration) {
        wait_for(&self.shared.request_count, count, timeout, "requests").await;
    }

    /// Waits until `count` streams were dropped by the client before their end.
    pub async fn wait_for_disconnects(&self, count: usize, timeout: Duration) {
        wait_for(
            &self.shared.disconnects,
            count,
            timeout,
            "client disconnects",
        )
        .await;
    }

    pub fn disconnects(&self) -> usize {
        *self.shared.disconnects.borrow()
    }

    /// The raw answer to title requests. By default it is empty, which gives no title, so
    /// sessions stay untitled unless a test asks for one.
    pub fn set_title_reply(&self, title: Option<&str>) {
        *lock(&self.shared.title_reply) = title.map(str::to_owned);
    }

    /// The bodies of the title requests answered so far.
    pub fn title_requests(&self) -> Vec<Value> {
        lock(&self.shared.title_requests).clone()
    }

    /// What `GET /v1/models` lists (`None`: it answers 404, the default).
    pub fn set_models(&self, models: Option<&[&str]>) {
        *lock(&self.shared.models) =
            models.map(|models| models.iter().map(|m| (*m).to_owned()).collect());
    }

    /// The models listing requests so far (`path` includes the query); they are not in
    /// [`FakeModel::requests`].
    pub fn models_requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.models_requests).clone()
    }
}

async fn wait_for(counter: &watch::Sender<usize>, count: usize, timeout: Duration, what: &str) {
    let mut receiver = counter.subscribe();
    let reached = tokio::time::timeout(timeout, receiver.wait_for(|n| *n >= count)).await;
    assert!(
        matches!(reached, Ok(Ok(_))),
        "fake model: expected {count} {what} within {timeout:?}, saw {}",
        *counter.borrow()
    );
}

impl Shared {
    fn new() -> Arc<Shared> {
        Arc::new(Shared {
            script: Mutex::new(VecDeque::new()),
            responder: Mutex::new(ResponderSlot(None)),
            requests: Mutex::new(Vec::new()),
            strict: Mutex::new(false),
            request_count: watch::Sender::new(0),
            disconnects: watch::Sender::new(0),
            title_reply: Mutex::new(None),
            title_requests: Mutex::new(Vec::new()),
            models: Mutex::new(None),
            models_requests: Mutex::new(Vec::new()),
        })
    }

    /// Records a title request and returns its answer.
    fn title_reply(&self, body: &Value) -> String {
        lock(&self.title_requests).push(body.clone());
        lock(&self.title_reply).clone().unwrap_or_default()
    }

    fn record(&self, request: RecordedRequest) {
        lock(&self.requests).push(request);
        self.request_count.send_modify(|n| *n += 1);
    }

    /// The step for the next request: the script's next, or an echo of the request.
    fn next_step(&self, format: Format, body: &Value) -> Option<Step> {
        if let Some(step) = lock(&self.script).pop_front() {
            return Some(step);
        }
        if let Some(responder) = lock(&self.responder).0.clone() {
            return Some(responder(body));
        }
        if *lock(&self.strict) {
            return None;
        }
        let last_user = match format {
            Format::Chat => chat::last_user_text(body),
            Format::Responses => responses::last_user_text(body),
            Format::Anthropic => anthropic::last_user_text(body),
        };
        Some(Step::Reply(Reply::text(format!("echo: {last_user}"))))
    }
}

/// The wire format of a request, from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Chat,
    Responses,
    Anthropic,
}
