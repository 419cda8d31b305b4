//! A wire-level fake of the Telegram Bot API for tests and benchmarks.
//!
//! It is a real HTTP server on `127.0.0.1:0` speaking the Bot API protocol
//! (`/bot<token>/<method>` with case-insensitive methods, JSON, form and multipart bodies,
//! `{"ok":..}` envelopes, `/file/bot<token>/<path>` downloads). It keeps queued updates until a
//! `getUpdates` offset confirms them, as Telegram does, records every call, enforces
//! Telegram's text rules (MarkdownV2 well-formedness, 4096 UTF-16 units, reply and thread
//! targets) and injects faults on demand ([`Fault`]).
#![forbid(unsafe_code)]

pub mod audio_format;
mod flood;
mod markdown_v2;
mod media;
mod objects;
mod params;
mod rules;
mod server;
mod state;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

pub use flood::{FloodEvent, FloodOutcome};
pub use markdown_v2::visible_utf16_len;
pub use objects::{Attachment, Chat, MessageSpec, User, compute_entities};
pub use state::{Call, Fault, SentRecord, StoredMessage, UploadedFile};
use state::{Inner, Shared};

/// The token the fake accepts unless told otherwise.
pub const TOKEN: &str = "123456:TEST-fake-token-DO-NOT-LOG";
pub const BOT_ID: i64 = 777_000;
pub const BOT_USERNAME: &str = "hermes_test_bot";

/// A text message the bot sent (from the recorded `sendMessage` calls that succeeded).
#[derive(Debug, Clone, PartialEq)]
pub struct SentMessage {
    pub chat_id: i64,
    pub text: String,
    pub parse_mode: Option<String>,
    pub thread_id: Option<i64>,
    pub reply_to: Option<i64>,
    pub reply_markup: Option<Value>,
}

/// A running fake Bot API server; stops when dropped.
#[derive(Debug)]
pub struct FakeTelegram {
    shared: Arc<Shared>,
    addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
        self.server.abort();
    }
}

impl FakeTelegram {
    /// Starts a fake accepting [`TOKEN`], bot `@hermes_test_bot`.
    pub async fn start() -> Self {
        Self::start_with_token(TOKEN).await
    }

    pub async fn start_with_token(token: &str) -> Self {
        let shared = Arc::new(Shared {
            token: token.to_owned(),
            bot_id: BOT_ID,
            bot_username: BOT_USERNAME.to_owned(),
            inner: std::sync::Mutex::new(Inner {
                next_update_id: 1000,
                next_message_id: 100,
                ..Inner::default()
            }),
            updates_changed: Notify::new(),
            calls_seen: watch::channel(0).0,
            shutdown: watch::channel(false).0,
            downloads_open: watch::channel(true).0,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let app = server::router(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            shared,
            addr,
            server,
        }
    }

    /// The base URL (`http://127.0.0.1:PORT`), to pass as the adapter's `base_url`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn token(&self) -> &str {
        &self.shared.token
    }

    // --- pushing updates -------------------------------------------------------------

    /// Queues a text message from `user` in `chat`; returns its update id.
    pub fn push_text(&self, chat: Chat, user: User, text: &str) -> i64 {
        self.push_message(MessageSpec::text(chat, user, text)).0
    }

    /// Queues a message; returns (update id, message id).
    pub fn push_message(&self, spec: MessageSpec) -> (i64, i64) {
        let mut inner = self.shared.lock();
        let message_id = inner.next_message_id();
        let message = self.message_json(&mut inner, &spec, message_id);
        inner.messages.insert(
            (spec.chat.id, message_id),
            StoredMessage {
                chat_id: spec.chat.id,
                message_id,
                text: spec.text.clone(),
                reply_markup: None,
                from_bot: spec.from.is_bot,
            },
        );
        inner.chats.insert(spec.chat.id, spec.chat.to_json());
        drop(inner);
        (self.push_update(json!({"message": message})), message_id)
    }

    /// Queues a callback query (a button click) on `message_id`; returns its update id.
    pub fn push_callback(&self, chat: Chat, user: User, message_id: i64, data: &str) -> i64 {
        let query_id = format!("cq{}", self.shared.lock().next_update_id + 1);
        let message = json!({"message_id": message_id, "date": 1_700_000_000, "chat": chat.to_json(),
            "from": {"id": BOT_ID, "is_bot": true, "first_name": "Hermes", "username": BOT_USERNAME},
            "text": "prompt"});
        self.push_update(
            json!({"callback_query": {"id": query_id, "from": user.to_json(),
            "chat_instance": "ci1", "message": message, "data": data}}),
        )
    }

    /// Queues a raw update (its `update_id` is assigned); returns the id.
    pub fn push_update(&self, mut update: Value) -> i64 {
        let id = {
            let mut inner = self.shared.lock();
            inner.next_update_id += 1;
            let id = inner.next_update_id;
            update["update_id"] = json!(id);
            inner.history.insert(id, update.clone());
            inner.queue.push_back(update);
            id
        };
        self.shared.updates_changed.notify_waiters();
        id
    }

    /// Queues an already confirmed update again (Telegram sometimes redelivers).
    pub fn redeliver(&self, update_id: i64) {
        {
            let mut inner = self.shared.lock();
            let update = inner
                .history
                .get(&update_id)
                .cloned()
                .expect("known update id");
            inner.queue.push_back(update);
            inner.confirmed_offset = inner.confirmed_offset.min(update_id);
        }
        self.shared.updates_changed.notify_waiters();
    }

    /// Stores a downloadable file; returns its file id.
    pub fn add_file(&self, path: &str, bytes: Vec<u8>) -> String {
        let mut inner = self.shared.lock();
        let file_id = format!("file{}", inner.files.len() + 1);
        inner
            .files
            .insert(file_id.clone(), (path.to_owned(), bytes));
        file_id
    }

    /// Upgrades group `chat_id` to the supergroup `new_chat_id`: every send to the old id is
    /// refused with `migrate_to_chat_id` (https://core.telegram.org/bots/api#responseparameters).
    pub fn migrate_chat(&self, chat_id: i64, new_chat_id: i64) {
        let mut inner = self.shared.lock();
        inner.migrated.insert(chat_id, new_chat_id);
        let chat = json!({"id": new_chat_id, "type": "supergroup", "title": "migrated"});
        inner.chats.insert(new_chat_id, chat);
    }

    /// Behaves as a local Bot API server started with `--local`: getFile answers absolute
    /// paths of files written under `dir`, and uploads may reach 2000 MB.
    pub fn enable_local_mode(&self, dir: &std::path::Path) {
        self.shared.lock().local_dir = Some(dir.to_path_buf());
    }

    /// File downloads are held (their requests recorded as `(download)` calls, their bodies
    /// not sent) until [`release_downloads`](Self::release_downloads): a transfer that takes
    /// as long as the test needs.
    pub fn hold_downloads(&self) {
        self.shared.downloads_open.send_replace(false);
    }

    pub fn release_downloads(&self) {
        self.shared.downloads_open.send_replace(true);
    }

    /// Arms flood control on getUpdates: more than `per_second` calls within one rolling
    /// second are answered 429 with `retry_after`.
    pub fn limit_get_updates(&self, per_second: usize) {
        self.shared.lock().get_updates_limit = Some(per_second);
    }

    /// Arrival times of every getUpdates call so far (flood-refused ones included).
    pub fn get_updates_times(&self) -> Vec<std::time::Instant> {
        self.shared.lock().get_updates_at.clone()
    }

    /// What getMe answers for `can_read_all_group_messages` (false: privacy mode on).
    pub fn set_privacy_mode(&self, on: bool) {
        self.shared.lock().can_read_all_group_messages = !on;
    }

    /// Makes `sendMessage` into this forum topic fail with "message thread not found".
    pub fn close_thread(&self, chat_id: i64, thread_id: i64) {
        self.shared
            .lock()
            .closed_threads
            .insert((chat_id, thread_id));
    }

    // --- faults ----------------------------------------------------------------------

    /// Injects `fault` into the next `n` calls of `method` (case-insensitive).
    pub fn fail_next(&self, method: &str, fault: Fault, n: usize) {
        let mut inner = self.shared.lock();
        let queue = inner.faults.entry(method.to_ascii_lowercase()).or_default();
        queue.extend(std::iter::repeat_n(fault, n));
    }

    /// Flood control: answers a `share` of `sendMessage` calls (chosen by a generator seeded
    /// with `seed`) with 429 and a `retry_after` in `retry_after` seconds; a chat that sends
    /// again before its wait is over is refused again (see `flood.rs`).
    pub fn flood_randomly(
        &self,
        seed: u64,
        share: f64,
        retry_after: std::ops::RangeInclusive<u64>,
    ) {
        self.shared
            .lock()
            .flood
            .set_random(seed, share, retry_after);
    }

    /// Flood control on one chat: its next `sends` `sendMessage` calls get 429 with
    /// `retry_after` seconds (group flood control can ask for minutes).
    pub fn flood_chat(&self, chat_id: i64, retry_after: u64, sends: usize) {
        self.shared.lock().flood.hold(chat_id, retry_after, sends);
    }

    /// Ends flood control on `chat_id`, as if its wait had passed.
    pub fn end_flood(&self, chat_id: i64) {
        self.shared.lock().flood.release(chat_id);
    }

    /// Every 429 given by flood control, and every later send to a chat once limited.
    pub fn flood_log(&self) -> Vec<FloodEvent> {
        self.shared.lock().flood.log.clone()
    }

    /// Disarms the faults still queued for `method` (e.g. ends an open-ended stall).
    pub fn clear_faults(&self, method: &str) {
        self.shared
            .lock()
            .faults
            .remove(&method.to_ascii_lowercase());
    }

    // --- reading what happened --------------------------------------------------------

    /// Accepted `sendMessage` calls with their arrival times, from index `from` on.
    pub fn sent_log_from(&self, from: usize) -> Vec<SentRecord> {
        let inner = self.shared.lock();
        inner.sent_log.get(from..).unwrap_or_default().to_vec()
    }

    /// How many `sendMessage` calls were accepted so far.
    pub fn sent_count(&self) -> usize {
        self.shared.lock().sent_log.len()
    }

    /// Waits until at least `n` `sendMessage` calls were answered 200 (as
    /// [`FakeTelegram::sent_messages`] lists them; the send log leads the answer by a moment,
    /// so waiting on it could return before `sent_messages` shows the message); false on
    /// timeout.
    pub async fn wait_sent_count(&self, n: usize, timeout: Duration) -> bool {
        let mut seen = self.shared.calls_seen.subscribe();
        let wait = async {
            while self.sent_messages().len() < n {
                if seen.changed().await.is_err() {
                    break;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok() && self.sent_messages().len() >= n
    }

    /// The bot's messages still present in `chat` (sent and not deleted), oldest first.
    pub fn bot_messages(&self, chat_id: i64) -> Vec<StoredMessage> {
        let mut messages: Vec<StoredMessage> = self
            .shared
            .lock()
            .messages
            .values()
            .filter(|m| m.chat_id == chat_id && m.from_bot)
            .cloned()
            .collect();
        messages.sort_by_key(|m| m.message_id);
        messages
    }

    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    /// How many getUpdates requests were ended with 409 because another caller polled
    /// while they waited (two pollers of one bot).
    pub fn get_updates_conflicts(&self) -> usize {
        self.calls_of("getUpdates")
            .iter()
            .filter(|call| call.status == Some(409))
            .count()
    }

    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        let method = method.to_ascii_lowercase();
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .collect()
    }

    /// Resolves when a call is recorded or answered after this call (not after the first
    /// poll), or to false when `timeout` passes first.
    pub fn next_change(&self, timeout: Duration) -> impl Future<Output = bool> + use<> {
        let mut seen = self.shared.calls_seen.subscribe();
        seen.mark_unchanged();
        async move { tokio::time::timeout(timeout, seen.changed()).await.is_ok() }
    }

    /// Waits until `method` has been called at least `n` times; returns those calls.
    pub async fn wait_for_calls(
        &self,
        method: &str,
        n: usize,
        timeout: Duration,
    ) -> Result<Vec<Call>, String> {
        let mut seen = self.shared.calls_seen.subscribe();
        let wait = async {
            loop {
                let calls = self.calls_of(method);
                if calls.len() >= n {
                    return calls;
                }
                if seen.changed().await.is_err() {
                    return calls;
                }
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(calls) if calls.len() >= n => Ok(calls),
            _ => Err(format!(
                "{method} called {} times, wanted {n}",
                self.calls_of(method).len()
            )),
        }
    }

    /// Text messages the fake accepted (answered 200), in order.
    pub fn sent_messages(&self) -> Vec<SentMessage> {
        self.calls_of("sendMessage")
            .into_iter()
            .filter(|c| c.status == Some(200))
            .map(|c| SentMessage {
                chat_id: c.i64("chat_id").unwrap_or(0),
                text: c.str("text").unwrap_or_default(),
                parse_mode: c.str("parse_mode"),
                thread_id: c.i64("message_thread_id"),
                reply_to: c
                    .json("reply_parameters")
                    .and_then(|r| r["message_id"].as_i64()),
                reply_markup: c.json("reply_markup"),
            })
            .collect()
    }

    pub fn message(&self, chat_id: i64, message_id: i64) -> Option<StoredMessage> {
        self.shared
            .lock()
            .messages
            .get(&(chat_id, message_id))
            .cloned()
    }

    /// Updates still queued (not yet confirmed by an offset).
    pub fn pending_updates(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// The highest offset a `getUpdates` call has confirmed.
    pub fn confirmed_offset(&self) -> i64 {
        self.shared.lock().confirmed_offset
    }

    pub fn commands(&self) -> Vec<Value> {
        self.shared.lock().commands.clone()
    }

    /// The webhook URL and secret last set by `setWebhook`.
    pub fn webhook(&self) -> (String, Option<String>) {
        let inner = self.shared.lock();
        (inner.webhook_url.clone(), inner.webhook_secret.clone())
    }

    fn message_json(&self, inner: &mut Inner, spec: &MessageSpec, message_id: i64) -> Value {
        let mut message = json!({"message_id": message_id, "date": 1_700_000_000 + message_id,
            "chat": spec.chat.to_json(), "from": spec.from.to_json()});
        let text_key = if spec.attachment.is_some() {
            "caption"
        } else {
            "text"
        };
        let entities_key = if spec.attachment.is_some() {
            "caption_entities"
        } else {
            "entities"
        };
        if !spec.text.is_empty() {
            message[text_key] = json!(spec.text);
            let entities = spec
                .entities
                .clone()
                .unwrap_or_else(|| json!(compute_entities(&spec.text)));
            if entities.as_array().is_some_and(|e| !e.is_empty()) {
                message[entities_key] = entities;
            }
        }
        if let Some(thread_id) = spec.thread_id {
            message["message_thread_id"] = json!(thread_id);
        }
        if spec.is_topic_message {
            message["is_topic_message"] = json!(true);
        }
        if let Some((reply_id, author)) = &spec.reply_to {
            let text = inner
                .messages
                .get(&(spec.chat.id, *reply_id))
                .map(|m| m.text.clone())
                .unwrap_or_default();
            message["reply_to_message"] = json!({"message_id": reply_id, "date": 1_700_000_000,
                "chat": spec.chat.to_json(), "from": author.to_json(), "text": text});
        }
        if let Some(group) = &spec.media_group_id {
            message["media_group_id"] = json!(group);
        }
        if let Some(attachment) = &spec.attachment {
            let n = inner.files.len() + 1;
            let mut store = |path: String, bytes: Vec<u8>| {
                let file_id = format!("file{}", inner.files.len() + 1);
                let size = spec.declared_size.unwrap_or(bytes.len() as u64);
                inner.files.insert(file_id.clone(), (path, bytes));
                (file_id, size)
            };
            match attachment {
                Attachment::Photo { bytes } => {
                    let (small_id, small_size) =
                        store(format!("photos/file_{n}_s.jpg"), vec![0u8; 8]);
                    let (big_id, big_size) = store(format!("photos/file_{n}.jpg"), bytes.clone());
                    message["photo"] = json!([
                        {"file_id": small_id, "file_unique_id": format!("u{small_id}"), "width": 90, "height": 90, "file_size": small_size.min(8)},
                        {"file_id": big_id, "file_unique_id": format!("u{big_id}"), "width": 1280, "height": 960, "file_size": big_size},
                    ]);
                }
                Attachment::Document {
                    bytes,
                    file_name,
                    mime_type,
                } => {
                    let (id, size) = store(format!("documents/file_{n}"), bytes.clone());
                    message["document"] = json!({"file_id": id, "file_unique_id": format!("u{id}"),
                        "file_name": file_name, "mime_type": mime_type, "file_size": size});
                }
                Attachment::Voice { bytes } => {
                    let (id, size) = store(format!("voice/file_{n}.oga"), bytes.clone());
                    message["voice"] = json!({"file_id": id, "file_unique_id": format!("u{id}"),
                        "duration": 3, "mime_type": "audio/ogg", "file_size": size});
                }
                Attachment::Audio { bytes, mime_type } => {
                    let (id, size) = store(format!("music/file_{n}.mp3"), bytes.clone());
                    message["audio"] = json!({"file_id": id, "file_unique_id": format!("u{id}"),
                        "duration": 3, "mime_type": mime_type, "file_size": size});
                }
            }
        }
        message
    }
}
