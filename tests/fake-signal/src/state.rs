//! What the fake daemon remembers: open event streams, sent messages, stored attachments
//! and armed faults.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

/// One message the bot sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    /// The timestamp the daemon answered with (Signal's id of the message).
    pub timestamp: i64,
    /// `recipient[0]` or `group:<groupId>`.
    pub chat: String,
    pub message: String,
    /// `textStyle` entries as sent.
    pub styles: Vec<String>,
    /// `quoteTimestamp`, when the message quotes another.
    pub quote: Option<i64>,
    /// Decoded attachments: (data URI's mime type, filename, bytes).
    pub attachments: Vec<(String, String, Vec<u8>)>,
    /// When the daemon took the call (benchmarks measure to it).
    pub at: std::time::Instant,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub account: String,
    pub streams: Mutex<Vec<mpsc::UnboundedSender<Bytes>>>,
    pub listeners: watch::Sender<usize>,
    pub sent: Mutex<Vec<Sent>>,
    pub sent_count: watch::Sender<usize>,
    pub typing: Mutex<usize>,
    pub attachments: Mutex<HashMap<String, Vec<u8>>>,
    pub rate_limit: Mutex<Option<u64>>,
    pub unexpected: Mutex<Vec<String>>,
    /// `--receive-mode=on-connection`: messages wait on the server while no stream is open.
    pub on_connection: AtomicBool,
    /// Those waiting messages' frames, oldest first.
    pub waiting: Mutex<Vec<Bytes>>,
    clock: AtomicI64,
}

impl Shared {
    pub fn new(account: &str) -> Self {
        Self {
            account: account.to_owned(),
            streams: Mutex::default(),
            listeners: watch::channel(0).0,
            sent: Mutex::default(),
            sent_count: watch::channel(0).0,
            typing: Mutex::default(),
            attachments: Mutex::default(),
            rate_limit: Mutex::default(),
            unexpected: Mutex::default(),
            on_connection: AtomicBool::new(false),
            waiting: Mutex::default(),
            clock: AtomicI64::new(1_700_000_000_000),
        }
    }

    /// A fresh, strictly increasing millisecond timestamp (Signal ids messages by them).
    pub fn clock(&self) -> i64 {
        self.clock.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Writes one `receive` event to every open stream, framed as ServerSentEventSender
    /// does: `event:receive`, one `data:` line, a blank line.
    pub fn push(&self, data: &str) {
        let frame = Bytes::from(format!("event:receive\ndata:{data}\n\n"));
        let mut streams = self.streams.lock().unwrap();
        streams.retain(|s| !s.is_closed());
        if streams.is_empty() && self.on_connection.load(Ordering::SeqCst) {
            self.waiting.lock().unwrap().push(frame);
        } else {
            streams.retain(|s| s.send(frame.clone()).is_ok());
        }
        self.listeners.send_replace(streams.len());
    }

    /// Registers a newly opened stream; in on-connection mode the messages that waited on
    /// the server are its first events.
    pub fn open_stream(&self, stream: mpsc::UnboundedSender<Bytes>) {
        let mut streams = self.streams.lock().unwrap();
        for frame in self.waiting.lock().unwrap().drain(..) {
            let _ = stream.send(frame);
        }
        streams.push(stream);
        self.listeners.send_replace(streams.len());
    }

    pub fn drop_streams(&self) {
        self.streams.lock().unwrap().clear();
        self.listeners.send_replace(0);
    }

    pub fn attachment_size(&self, id: &str) -> usize {
        self.attachments.lock().unwrap().get(id).map_or(0, Vec::len)
    }

    pub fn record_sent(&self, sent: Sent) {
        let mut all = self.sent.lock().unwrap();
        all.push(sent);
        self.sent_count.send_replace(all.len());
    }

    pub fn unexpected(&self, what: String) {
        self.unexpected.lock().unwrap().push(what);
    }
}

/// A string param, or the first of an array param (signal-cli takes either,
/// jsonrpc(5) "Commands").
pub(crate) fn first(params: &Value, key: &str) -> Option<String> {
    match params.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => items.first()?.as_str().map(str::to_owned),
        _ => None,
    }
}

/// A list param, single value or array.
pub(crate) fn list(params: &Value, key: &str) -> Vec<String> {
    match params.get(key) {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}
