//! The fake's mutable world: queued updates, stored messages and files, recorded calls and
//! armed faults. One mutex guards it; waiters are woken through `Notify`.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Mutex;

use serde_json::{Map, Value};
use tokio::sync::{Notify, watch};

/// A fault the fake injects into the next calls of one method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// 429 `Too Many Requests: retry after N` with `parameters.retry_after`.
    TooManyRequests { retry_after: u64 },
    /// 500 `Internal Server Error`.
    ServerError,
    /// 502 `Bad Gateway`, with no JSON body (as a broken proxy answers).
    BadGateway,
    /// 400 `can't parse entities`.
    CantParseEntities,
    /// 403 `Forbidden: bot was blocked by the user`.
    Forbidden,
    /// 409 `Conflict: terminated by other getUpdates request`.
    Conflict,
    /// 401 `Unauthorized`.
    Unauthorized,
    /// The connection is closed after the request is read, with no response.
    DropConnection,
    /// The request is never answered (until the fake shuts down).
    Stall,
    /// getUpdates only: every returned update appears twice in the answer.
    DuplicateUpdates,
    /// 400 with the given description.
    BadRequest(String),
}

/// An uploaded file part of a multipart request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadedFile {
    pub field: String,
    pub file_name: Option<String>,
    pub bytes: usize,
    /// The part's media type as sent.
    pub content_type: Option<String>,
    /// What the bytes are, for the voice rule: `ogg_opus`, `mp3`, `m4a` or `other`.
    pub audio_format: &'static str,
}

/// One recorded API call (faulted calls included).
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The method name, lowercased (`sendmessage`).
    pub method: String,
    /// Parameters from the query string and the JSON, form or multipart body.
    pub params: Map<String, Value>,
    pub files: Vec<UploadedFile>,
    /// The fault injected into this call, if any.
    pub fault: Option<Fault>,
    /// The HTTP status answered (`None` while unanswered, or for a dropped/stalled call).
    pub status: Option<u16>,
}

impl Call {
    pub fn str(&self, key: &str) -> Option<String> {
        match self.params.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        }
    }

    pub fn i64(&self, key: &str) -> Option<i64> {
        param_i64(self.params.get(key)?)
    }

    /// A parameter that is a JSON object, sent either as JSON or as a JSON string (forms).
    pub fn json(&self, key: &str) -> Option<Value> {
        param_json(self.params.get(key)?)
    }
}

pub(crate) fn param_i64(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

pub(crate) fn param_json(value: &Value) -> Option<Value> {
    match value {
        Value::String(s) => serde_json::from_str(s).ok(),
        Value::Null => None,
        other => Some(other.clone()),
    }
}

/// A message the fake knows about (pushed by a user or sent by the bot).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    pub chat_id: i64,
    pub message_id: i64,
    pub text: String,
    pub reply_markup: Option<Value>,
    pub from_bot: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Inner {
    pub queue: VecDeque<Value>,
    /// Every update ever pushed, by id, so one can be redelivered.
    pub history: HashMap<i64, Value>,
    pub next_update_id: i64,
    pub confirmed_offset: i64,
    pub calls: Vec<Call>,
    pub faults: HashMap<String, VecDeque<Fault>>,
    pub messages: HashMap<(i64, i64), StoredMessage>,
    pub next_message_id: i64,
    pub closed_threads: BTreeSet<(i64, i64)>,
    /// file_id → (file_path, bytes).
    pub files: HashMap<String, (String, Vec<u8>)>,
    pub commands: Vec<Value>,
    /// Chat objects seen in pushed updates, by id, echoed back in sent messages.
    pub chats: HashMap<i64, Value>,
    pub webhook_url: String,
    pub webhook_secret: Option<String>,
    /// Every accepted `sendMessage`, with its arrival time (cheap to read under load).
    pub sent_log: Vec<SentRecord>,
    /// Flood control on `sendMessage` (off unless switched on).
    pub flood: crate::flood::FloodControl,
    /// Groups upgraded to supergroups: old chat id → the supergroup's id.
    pub migrated: HashMap<i64, i64>,
    /// Set in local mode: getFile answers absolute paths of copies under this directory.
    pub local_dir: Option<std::path::PathBuf>,
    /// Arrival times of every getUpdates call (for pacing checks and the flood limit).
    pub get_updates_at: Vec<std::time::Instant>,
    /// At most this many getUpdates calls per rolling second; more are answered 429.
    pub get_updates_limit: Option<usize>,
    /// Whether getMe says privacy mode is off.
    pub can_read_all_group_messages: bool,
    /// Counts getUpdates requests; a waiting request whose number is no longer the latest
    /// was overtaken by another caller and is answered 409.
    pub poll_generation: u64,
}

/// One accepted `sendMessage`: when it arrived, where it went, the id the fake gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct SentRecord {
    pub at: std::time::Instant,
    pub chat_id: i64,
    pub message_id: i64,
    pub thread_id: Option<i64>,
    pub text: String,
}

impl Inner {
    pub fn take_fault(&mut self, method: &str) -> Option<Fault> {
        let queue = self.faults.get_mut(method)?;
        let fault = queue.pop_front();
        if queue.is_empty() {
            self.faults.remove(method);
        }
        fault
    }

    pub fn next_message_id(&mut self) -> i64 {
        self.next_message_id += 1;
        self.next_message_id
    }
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub token: String,
    pub bot_id: i64,
    pub bot_username: String,
    pub inner: Mutex<Inner>,
    /// Woken when an update is queued.
    pub updates_changed: Notify,
    /// Counts recorded calls, so tests can wait for them.
    pub calls_seen: watch::Sender<usize>,
    pub shutdown: watch::Sender<bool>,
    /// False while file downloads are held (a slow transfer the test ends).
    pub downloads_open: watch::Sender<bool>,
}

impl Shared {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a call; returns its index for `answered`.
    pub fn record(&self, call: Call) -> usize {
        let count = {
            let mut inner = self.lock();
            inner.calls.push(call);
            inner.calls.len()
        };
        self.calls_seen.send_replace(count);
        count - 1
    }

    pub fn answered(&self, index: usize, status: u16) {
        if let Some(call) = self.lock().calls.get_mut(index) {
            call.status = Some(status);
        }
        // Watchers re-check: a call's answer is news too (e.g. `sent_messages`).
        self.calls_seen.send_modify(|_| {});
    }

    pub async fn until_shutdown(&self) {
        let mut rx = self.shutdown.subscribe();
        let _ = rx.wait_for(|stopped| *stopped).await;
    }
}
