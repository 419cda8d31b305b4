//! What the fake recorded for tests to read: Web API calls, socket acks and lifecycle, posted
//! messages, uploads and Slack's own retries.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// One recorded Web API call.
#[derive(Debug, Clone)]
pub struct ApiCall {
    pub method: String,
    /// `Some(token)` from `Authorization: Bearer`.
    pub token: Option<String>,
    /// The JSON body, or the form/query fields as a JSON object of strings.
    pub body: Value,
    /// The content type the client sent.
    pub content_type: String,
    /// When the fake received it.
    pub at: Instant,
}

impl ApiCall {
    /// A string field of the body.
    pub fn str(&self, field: &str) -> Option<&str> {
        self.body.get(field).and_then(Value::as_str)
    }
}

/// An acknowledgement the client sent on a socket.
#[derive(Debug, Clone)]
pub struct Ack {
    pub connection: u64,
    pub envelope_id: String,
    /// Everything the ack frame carried (payload for slash commands, if any).
    pub frame: Value,
    /// When the fake read it (benchmarks measure envelope-to-ack latency with it).
    pub at: Instant,
}

/// Socket lifecycle, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketEvent {
    Opened {
        connection: u64,
    },
    Hello {
        connection: u64,
    },
    EnvelopeSent {
        connection: u64,
        envelope_id: String,
    },
    /// The client closed the socket (close frame or EOF).
    ClosedByClient {
        connection: u64,
    },
    /// The fake dropped the socket on purpose.
    Dropped {
        connection: u64,
    },
    Silenced {
        connection: u64,
    },
    Ping {
        connection: u64,
    },
}

/// A message `chat.postMessage` accepted (faulted calls are not here), as Slack stored it.
#[derive(Debug, Clone, PartialEq)]
pub struct Posted {
    pub channel: String,
    pub text: String,
    pub thread_ts: Option<String>,
    /// The ts Slack gave the message.
    pub ts: String,
    /// Block Kit blocks, when the message had any (prompts with buttons).
    pub blocks: Option<Value>,
    pub at: Instant,
}

/// Everything the fake recorded.
#[derive(Debug, Clone, Default)]
pub struct Records {
    pub calls: Vec<ApiCall>,
    /// Indexes into `calls` of the calls answered with an injected failure (429, `ok:false`,
    /// 5xx), so a reader can tell what the fake actually accepted.
    pub faulted: Vec<usize>,
    /// Calls of unknown methods or paths: a strict fake fails tests on them.
    pub unexpected: Vec<String>,
    pub acks: Vec<Ack>,
    pub timeline: Vec<SocketEvent>,
    /// Bytes uploaded through `files.getUploadURLExternal` URLs, by file id.
    pub uploads: HashMap<String, Vec<u8>>,
    /// Bodies posted to interaction `response_url`s.
    pub responses: Vec<Value>,
    /// When each envelope was written to a socket.
    pub sent_at: HashMap<String, Instant>,
    /// Messages `chat.postMessage` accepted, in order.
    pub posted: Vec<Posted>,
    /// Retries the fake made on its own because an ack was overdue: (missed envelope id,
    /// retry envelope id).
    pub auto_retries: Vec<(String, String)>,
}

impl Records {
    pub fn hellos(&self) -> usize {
        self.timeline
            .iter()
            .filter(|e| matches!(e, SocketEvent::Hello { .. }))
            .count()
    }

    /// The position of an event in the timeline.
    pub fn position(&self, event: &SocketEvent) -> Option<usize> {
        self.timeline.iter().position(|e| e == event)
    }

    /// Whether the delivery `envelope_id` carried is acked: that envelope, or one of the
    /// retries Slack made of it on its own after a missed ack (which may go to another
    /// connection when several are open).
    pub fn delivery_acked(&self, envelope_id: &str) -> bool {
        let mut id = envelope_id;
        loop {
            if self.acks.iter().any(|a| a.envelope_id == id) {
                return true;
            }
            match self.auto_retries.iter().find(|(missed, _)| missed == id) {
                Some((_, retry)) => id = retry,
                None => return false,
            }
        }
    }

    /// How long the first ack of `envelope_id` took after the envelope was written to a
    /// socket; `None` when it is not acked (or was never sent).
    pub fn ack_latency(&self, envelope_id: &str) -> Option<Duration> {
        let sent = self.sent_at.get(envelope_id)?;
        let acked = self.acks.iter().find(|a| a.envelope_id == envelope_id)?;
        Some(acked.at.saturating_duration_since(*sent))
    }

    pub(crate) fn summary(&self) -> Value {
        json!({
            "calls": self.calls.iter().map(|c| c.method.clone()).collect::<Vec<_>>(),
            "unexpected": self.unexpected,
            "acks": self.acks.iter().map(|a| a.envelope_id.clone()).collect::<Vec<_>>(),
            "timeline": format!("{:?}", self.timeline),
        })
    }
}
