//! A wire-level fake Slack for tests and benchmarks: the Web API methods hermesd's Slack
//! adapter calls and a Socket Mode WebSocket, both real servers on `127.0.0.1:0`.
//!
//! Why a fake at the wire level: the adapter's hardest behaviour (ack only after the core
//! recorded an event, reconnect-before-close, silent-socket replacement, error mapping) lives
//! in how it reacts to real frames and real HTTP responses, so the fake speaks exactly that
//! and records every call and frame. Fault switches reproduce what Slack does in production:
//! unacked envelopes redelivered with `retry_attempt`/`retry_reason`, `disconnect` frames,
//! sockets that stop answering, 429 with `Retry-After`, `ok:false` errors, bad tokens.
//! Like Slack, the fake retries on its own every envelope not acked within 3 seconds (up to
//! 3 times) and records how long each ack took ([`Records::ack_latency`]).
//!
//! Everything is driven through [`FakeSlack`]; waiting is done on recorded state
//! ([`FakeSlack::wait_for`]) with a generous bound, never by sleeping.
#![forbid(unsafe_code)]

pub mod events;
mod http;
mod records;
mod socket;
mod state;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use records::{Ack, ApiCall, Posted, Records, SocketEvent};
pub use state::Fault;

use state::{ConnCommand, Shared};

/// How long [`FakeSlack::wait_for`] waits before failing the test.
pub const WAIT_BOUND: Duration = Duration::from_secs(30);

/// The bot user the fake's `auth.test` reports.
pub const BOT_USER_ID: &str = "UBOT";
/// The bot id (for `bot_message` events) of our own bot.
pub const BOT_ID: &str = "BBOT";
/// The workspace id used in every payload.
pub const TEAM_ID: &str = "T0001";

/// The tokens the fake accepts.
#[derive(Clone)]
pub struct FakeTokens {
    pub bot: String,
    pub app: String,
}

impl std::fmt::Debug for FakeTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FakeTokens(***)")
    }
}

impl Default for FakeTokens {
    fn default() -> Self {
        Self {
            bot: "xoxb-fake-bot-token".into(),
            app: "xapp-fake-app-token".into(),
        }
    }
}

/// What a push returned: the ids a test asserts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    pub envelope_id: String,
    /// Slack's `event_id` (events_api) or `trigger_id` (interactive).
    pub event_id: String,
}

/// A running fake Slack. Dropping it stops the servers.
#[derive(Debug)]
pub struct FakeSlack {
    shared: Arc<Shared>,
    addr: SocketAddr,
    stop: CancellationToken,
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Slack's own retry of unacknowledged envelopes: an envelope not acked within
/// [`state::ACK_DEADLINE`] of being written to a socket is delivered again in a new
/// envelope, up to [`state::MAX_RETRIES`] times
/// (<https://api.slack.com/apis/socket-mode#acknowledge>,
/// <https://api.slack.com/apis/events-api#retries>). Runs until the fake stops.
async fn retry_overdue_envelopes(shared: Arc<Shared>) {
    let mut changes = shared.changes.subscribe();
    loop {
        changes.borrow_and_update();
        // A read-only look first: locking for writing would wake this loop again.
        let next = {
            let mut inner = shared.peek();
            inner.next_retry_at()
        };
        let due = async {
            match next {
                Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shared.stop.cancelled() => return,
            _ = due => {
                shared.lock().retry_overdue(std::time::Instant::now());
            }
            changed = changes.changed() => if changed.is_err() { return },
        }
    }
}

impl FakeSlack {
    /// Starts the fake with the default tokens.
    pub async fn start() -> Self {
        Self::start_with(FakeTokens::default()).await
    }

    pub async fn start_with(tokens: FakeTokens) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake slack");
        let addr = listener.local_addr().expect("fake slack address");
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared::new(tokens, addr, stop.clone()));
        http::spawn_server(listener, shared.clone(), stop.clone());
        tokio::spawn(retry_overdue_envelopes(shared.clone()));
        Self { shared, addr, stop }
    }

    /// The Web API base to configure as `slack.extra.api_base_url`.
    pub fn api_base_url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    pub fn tokens(&self) -> FakeTokens {
        self.shared.tokens.clone()
    }

    /// Makes `apps.connections.open` return this URL instead of the fake's own socket.
    pub fn set_socket_url(&self, url: Option<String>) {
        self.shared.lock().socket_url_override = url;
    }

    /// Queues a fault for the next call of `method` (e.g. `chat.postMessage`).
    pub fn fail_next(&self, method: &str, fault: Fault) {
        self.shared
            .lock()
            .faults
            .entry(method.to_owned())
            .or_default()
            .push_back(fault);
    }

    /// Makes `apps.connections.open` answer `ok:false` with this error until cleared.
    pub fn refuse_connections(&self, error: Option<&str>) {
        self.shared.lock().refuse_connections = error.map(str::to_owned);
    }

    /// Closes each of the next `count` sockets right after its `hello` (before any
    /// envelope), as Slack may when it cannot keep a connection.
    pub fn close_after_hello(&self, count: usize) {
        self.shared.lock().close_after_hello = count;
    }

    /// Sets the display name `users.info` reports for `user` (default: none, so the
    /// `real_name` "User <id>" is used).
    pub fn set_display_name(&self, user: &str, name: &str) {
        self.shared
            .lock()
            .user_names
            .insert(user.to_owned(), name.to_owned());
    }

    /// Registers a file users can share; returns the Slack file object to put in `files`.
    pub fn add_file(&self, name: &str, mimetype: &str, bytes: Vec<u8>) -> Value {
        let mut inner = self.shared.lock();
        let id = format!("F{:04}", inner.next_id());
        let url = format!("http://{}/files/{id}/{name}", self.addr);
        let size = bytes.len();
        inner
            .stored_files
            .insert(id.clone(), (mimetype.to_owned(), bytes));
        let file = json!({
            "id": id, "name": name, "title": name, "mimetype": mimetype, "size": size,
            "url_private": url, "url_private_download": format!("{url}?download=1"),
        });
        inner.file_objects.insert(id, file.clone());
        file
    }

    /// The stub Slack Connect channels send instead of a file object: only the id, with
    /// `file_access: check_file_info` (the client must call `files.info`).
    pub fn connect_stub(file: &Value) -> Value {
        json!({"id": file["id"], "file_access": "check_file_info"})
    }

    /// Stores a message as already in the workspace (e.g. posted while the adapter was
    /// down) without delivering it: `conversations.replies` returns it.
    pub fn store_message(&self, message: Value) {
        let channel = message["channel"].as_str().unwrap_or("").to_owned();
        let ts = message["ts"].as_str().unwrap_or("").to_owned();
        self.shared
            .lock()
            .messages
            .insert(format!("{channel}:{ts}"), message);
    }

    /// The message at `channel`/`ts` as the workspace now shows it (after edits), if any.
    pub fn message(&self, channel: &str, ts: &str) -> Option<Value> {
        let key = format!("{channel}:{ts}");
        self.shared.peek().messages.get(&key).cloned()
    }

    /// A fresh message timestamp (`1700000000.000123`), increasing.
    pub fn next_ts(&self) -> String {
        self.shared.lock().next_ts()
    }

    /// Sends an `events_api` envelope carrying `event` (see [`events`]) to the newest open
    /// socket, or queues it until a socket says hello.
    pub fn push_event(&self, event: Value) -> Pushed {
        let mut inner = self.shared.lock();
        if let (Some(channel), Some(ts)) = (
            event.get("channel").and_then(Value::as_str),
            event.get("ts").and_then(Value::as_str),
        ) && event.get("subtype").is_none_or(|s| s == "bot_message")
        {
            inner
                .messages
                .insert(format!("{channel}:{ts}"), event.clone());
        }
        let event_id = format!("Ev{:08}", inner.next_id());
        let payload = json!({
            "token": "verification-token", "team_id": TEAM_ID, "api_app_id": "A0001",
            "event": event, "type": "event_callback", "event_id": event_id,
            "event_time": 1_700_000_000u64,
            "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": true}],
        });
        let envelope_id = inner.send_envelope("events_api", payload, 0, "");
        Pushed {
            envelope_id,
            event_id,
        }
    }

    /// Makes the next envelope go to `connection` (if it is open and said hello). Slack
    /// picks one of the open connections for each envelope and documents no order
    /// (<https://api.slack.com/apis/connections/socket-implement#connections>), so any pick
    /// is one Slack may make; a test uses it to reach the connection it is about to cut.
    pub fn send_next_on(&self, connection: u64) {
        self.shared.lock().next_on = Some(connection);
    }

    /// The newest open connection that said hello, if any.
    pub fn newest_connection(&self) -> Option<u64> {
        self.shared
            .peek()
            .live
            .iter()
            .rev()
            .find(|c| c.hello_sent)
            .map(|c| c.id)
    }

    /// Fault injection: sends an envelope of `kind` with `payload` as given, however
    /// malformed (the envelope shape is
    /// <https://api.slack.com/apis/socket-mode#events>). Returns the envelope id.
    pub fn push_raw_envelope(&self, kind: &str, payload: Value) -> String {
        self.shared.lock().send_envelope(kind, payload, 0, "")
    }

    /// Sends an `interactive` `block_actions` envelope: `user` clicked the button
    /// `action_id`/`value` on the prompt message `message_ts` in `channel`.
    pub fn push_block_actions(&self, click: events::Click<'_>) -> Pushed {
        let mut inner = self.shared.lock();
        let trigger_id = format!("{}.trigger", inner.next_id());
        let payload = events::block_actions(
            &click,
            &trigger_id,
            &format!("http://{}/response/{trigger_id}", self.addr),
        );
        let envelope_id = inner.send_envelope("interactive", payload, 0, "");
        Pushed {
            envelope_id,
            event_id: trigger_id,
        }
    }

    /// Sends a `slash_commands` envelope (`/new args` typed in `channel`).
    pub fn push_slash_command(
        &self,
        channel: &str,
        user: &str,
        command: &str,
        text: &str,
    ) -> Pushed {
        let mut inner = self.shared.lock();
        let trigger_id = format!("{}.slash", inner.next_id());
        let payload = json!({
            "token": "verification-token", "team_id": TEAM_ID, "channel_id": channel,
            "user_id": user, "user_name": user, "command": command, "text": text,
            "trigger_id": trigger_id, "response_url": format!("http://{}/response/{trigger_id}", self.addr),
        });
        let envelope_id = inner.send_envelope("slash_commands", payload, 0, "");
        Pushed {
            envelope_id,
            event_id: trigger_id,
        }
    }

    /// Delivers `envelope_id`'s payload again under a new envelope id, with the next
    /// `retry_attempt` and `retry_reason`, whether or not it was acked (Slack retries an
    /// event whose ack it did not see in time, and sometimes simply delivers twice). `None`
    /// for an unknown id.
    pub fn redeliver(&self, envelope_id: &str, reason: &str) -> Option<Pushed> {
        let mut inner = self.shared.lock();
        let event_id = inner
            .envelopes
            .get(envelope_id)?
            .payload
            .get("event_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let envelope_id = inner.redeliver(envelope_id, reason)?;
        Some(Pushed {
            envelope_id,
            event_id,
        })
    }

    /// The texts of the app's messages in `channel` as they stand now (edits applied,
    /// deleted ones gone), oldest first.
    pub fn bot_messages_in(&self, channel: &str) -> Vec<String> {
        bot_texts(&self.shared.peek(), channel)
    }

    /// Waits until the app's messages in `channel` read `expected` (see
    /// [`FakeSlack::bot_messages_in`]); panics after `bound`.
    pub async fn wait_for_bot_messages(&self, bound: Duration, channel: &str, expected: &[&str]) {
        let held = self
            .wait_on(bound, |inner| {
                (bot_texts(inner, channel) == expected).then_some(())
            })
            .await;
        if held.is_none() {
            panic!(
                "timed out waiting for {channel} to hold {expected:#?}; it holds {:#?}",
                self.bot_messages_in(channel)
            );
        }
    }

    /// Waits (up to `bound`) until `check` finds something in the fake's state; `None`
    /// when it never did.
    async fn wait_on<T>(
        &self,
        bound: Duration,
        mut check: impl FnMut(&state::Inner) -> Option<T>,
    ) -> Option<T> {
        let mut changes = self.shared.changes.subscribe();
        tokio::time::timeout(bound, async {
            loop {
                changes.borrow_and_update();
                if let Some(found) = check(&self.shared.peek()) {
                    return found;
                }
                if changes.changed().await.is_err() {
                    panic!("fake slack stopped while a test waited on it");
                }
            }
        })
        .await
        .ok()
    }

    /// The messages `chat.postMessage` accepted so far, in order.
    pub fn posted(&self) -> Vec<Posted> {
        self.shared.peek().records.posted.clone()
    }

    /// Redelivers every envelope not acked yet, as Slack does, with `retry_attempt` + 1 and
    /// `retry_reason`, under a new envelope id. Returns how many were redelivered.
    pub fn redeliver_unacked(&self, reason: &str) -> usize {
        self.shared.lock().redeliver_unacked(reason)
    }

    /// Redelivers only the envelopes not acked within `age` of being written to a socket
    /// (as Slack retries overdue envelopes, e.g. after the client died); returns how many.
    pub fn redeliver_unacked_older_than(&self, age: Duration, reason: &str) -> usize {
        self.shared.lock().redeliver_unacked_older_than(age, reason)
    }

    /// Delivers `envelope_id`'s payload once more, acked or not (a duplicate delivery);
    /// returns the new envelope id, `None` for an unknown envelope.
    pub fn redeliver_envelope(&self, envelope_id: &str, reason: &str) -> Option<String> {
        self.shared.lock().redeliver_envelope(envelope_id, reason)
    }

    /// Sends a `disconnect` frame (`warning`, `refresh_requested`, …) on the newest socket.
    /// The fake keeps that socket open until the client closes it.
    pub fn send_disconnect(&self, reason: &str) {
        let frame = json!({"type": "disconnect", "reason": reason,
            "debug_info": {"host": "fake-slack"}});
        self.shared
            .lock()
            .command_newest(ConnCommand::Send(frame.to_string()));
    }

    /// Makes the newest socket silent: it stops reading (so pings go unanswered) and stops
    /// sending, while the TCP connection stays open.
    pub fn go_silent(&self) {
        self.shared.lock().command_newest(ConnCommand::GoSilent);
    }

    /// Closes the newest socket abruptly (no close frame).
    pub fn drop_socket(&self) {
        self.shared.lock().command_newest(ConnCommand::Drop);
    }

    /// A copy of everything recorded so far.
    pub fn records(&self) -> Records {
        self.shared.peek().records.clone()
    }

    /// When an envelope was written to a socket.
    pub fn sent_at(&self, envelope_id: &str) -> Option<std::time::Instant> {
        self.shared.peek().records.sent_at.get(envelope_id).copied()
    }

    /// The recorded calls of one Web API method.
    pub fn calls(&self, method: &str) -> Vec<ApiCall> {
        self.shared
            .peek()
            .records
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// Waits until `check` returns `Some` on the records (re-checked on every change), or
    /// panics naming `what` after [`WAIT_BOUND`].
    pub async fn wait_for<T>(&self, what: &str, check: impl FnMut(&Records) -> Option<T>) -> T {
        self.wait_within(WAIT_BOUND, what, check).await
    }

    /// As [`FakeSlack::wait_for`] with another bound (end-to-end tests through a debug
    /// binary on a loaded machine wait longer).
    pub async fn wait_within<T>(
        &self,
        bound: Duration,
        what: &str,
        mut check: impl FnMut(&Records) -> Option<T>,
    ) -> T {
        match self.wait_on(bound, |inner| check(&inner.records)).await {
            Some(found) => found,
            None => panic!(
                "timed out waiting for {what}; records: {:#?}",
                self.shared.peek().records.summary()
            ),
        }
    }

    /// Waits until no delivery is waiting for its ack: every envelope written to a socket
    /// was acked, or another copy of its delivery was. Panics after [`WAIT_BOUND`].
    pub async fn wait_until_all_acked(&self) {
        let acked = self
            .wait_on(WAIT_BOUND, |inner| {
                (inner.unacked_deliveries() == 0).then_some(())
            })
            .await;
        if acked.is_none() {
            panic!(
                "timed out waiting for every envelope to be acked; records: {:#?}",
                self.shared.peek().records.summary()
            );
        }
    }

    /// Waits until `count` sockets have received `hello`.
    pub async fn wait_for_hellos(&self, count: usize) {
        self.wait_for(&format!("{count} socket hello(s)"), |r| {
            (r.hellos() >= count).then_some(())
        })
        .await;
    }

    /// Waits for the ack of `envelope_id` and returns it.
    pub async fn wait_for_ack(&self, envelope_id: &str) -> Ack {
        self.wait_for(&format!("ack of {envelope_id}"), |r| {
            r.acks
                .iter()
                .find(|a| a.envelope_id == envelope_id)
                .cloned()
        })
        .await
    }

    /// Waits until `method` was called at least `count` times; returns those calls.
    pub async fn wait_for_calls(&self, method: &str, count: usize) -> Vec<ApiCall> {
        self.wait_for(&format!("{count} call(s) of {method}"), |r| {
            let calls: Vec<ApiCall> = r
                .calls
                .iter()
                .filter(|c| c.method == method)
                .cloned()
                .collect();
            (calls.len() >= count).then_some(calls)
        })
        .await
    }
}

/// The app's messages in `channel`, oldest first (ts order), by their current text.
fn bot_texts(inner: &state::Inner, channel: &str) -> Vec<String> {
    let mut found: Vec<(&String, String)> = inner
        .messages
        .iter()
        .filter(|(key, message)| {
            key.split_once(':').is_some_and(|(c, _)| c == channel)
                && message.get("bot_id").and_then(Value::as_str) == Some(BOT_ID)
        })
        .map(|(key, message)| (key, message["text"].as_str().unwrap_or("").to_owned()))
        .collect();
    found.sort();
    found.into_iter().map(|(_, text)| text).collect()
}
