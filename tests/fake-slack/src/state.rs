//! The fake's shared state: recorded calls and frames, queued faults, live sockets.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::FakeTokens;
use crate::records::{Ack, Records, SocketEvent};

/// A fault served instead of the normal answer on the next call of a method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// HTTP 429 with `Retry-After: secs`.
    RateLimited { retry_after_secs: u64 },
    /// HTTP 200 `{"ok":false,"error":...}`.
    Error(String),
    /// A bare HTTP status (5xx). Also for `file.download`.
    Status(u16),
    /// Holds the request for this long before answering normally (timeouts). Also for
    /// `file.download` and `file.upload` (the file bytes' own URLs).
    Delay(Duration),
}

/// What the fake tells one socket task to do.
#[derive(Debug)]
pub(crate) enum ConnCommand {
    Send(String),
    GoSilent,
    Drop,
}

#[derive(Debug)]
pub(crate) struct LiveConnection {
    pub id: u64,
    pub commands: mpsc::UnboundedSender<ConnCommand>,
    pub hello_sent: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct SentEnvelope {
    pub kind: String,
    pub payload: Value,
    pub retry_attempt: u64,
    pub acked: bool,
    /// The first envelope of this delivery: Slack's own retries of it share it, and once
    /// any of them is acked the delivery is done.
    pub origin: String,
    /// Slack already retried this copy (it is not retried twice).
    pub retried: bool,
    /// For a retry: the connection the missed copy was written to. The retry goes to
    /// another open connection when there is one (that connection may be the reason the
    /// ack never came).
    pub avoid: Option<u64>,
}

/// How long Slack waits for an envelope's ack before it retries the delivery
/// (<https://api.slack.com/apis/socket-mode#acknowledge>: acknowledge every envelope
/// within 3 seconds).
pub const ACK_DEADLINE: Duration = Duration::from_secs(3);
/// How many times Slack retries an unacknowledged delivery
/// (<https://api.slack.com/apis/events-api#retries>: up to 3 retries).
pub const MAX_RETRIES: u64 = 3;
/// The `retry_reason` Slack gives a retry after a missed deadline
/// (<https://api.slack.com/apis/events-api#retries>).
pub const TIMEOUT_REASON: &str = "http_timeout";

#[derive(Debug)]
pub(crate) struct Inner {
    pub records: Records,
    pub faults: HashMap<String, VecDeque<Fault>>,
    pub socket_url_override: Option<String>,
    pub refuse_connections: Option<String>,
    /// How many of the next sockets are closed right after their hello.
    pub close_after_hello: usize,
    pub stored_files: HashMap<String, (String, Vec<u8>)>,
    /// Full file objects by id, for `files.info`.
    pub file_objects: HashMap<String, Value>,
    /// Messages by `channel:ts` (pushed events and bot posts), for `conversations.replies`.
    pub messages: HashMap<String, Value>,
    /// Display names `users.info` reports, by user id.
    pub user_names: HashMap<String, String>,
    pub live: Vec<LiveConnection>,
    pub envelopes: HashMap<String, SentEnvelope>,
    /// Envelope ids in send order (redelivery keeps that order).
    pub envelope_order: Vec<String>,
    /// Frames waiting for a socket to say hello.
    pub queued: VecDeque<(String, String)>,
    /// Envelopes written to a socket and not acked yet, in the order written: what Slack
    /// retries once the ack deadline passes.
    pub awaiting_ack: VecDeque<String>,
    /// Deliveries (by their first envelope id) that some copy's ack completed.
    pub acked_origins: HashSet<String>,
    /// The connection each envelope was written to.
    pub written_on: HashMap<String, u64>,
    /// Turns envelopes over the open connections (see [`Inner::flush_queue`]).
    rotation: usize,
    /// The connection the next envelope goes to, if ready (a test's pick of Slack's choice).
    pub next_on: Option<u64>,
    counter: u64,
    ts_counter: u64,
}

impl Inner {
    pub fn next_id(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    pub fn next_ts(&mut self) -> String {
        self.ts_counter += 1;
        let n = self.ts_counter;
        format!("{}.{:06}", 1_700_000_000 + n / 1_000_000, n % 1_000_000)
    }

    /// Builds an envelope and sends it (or queues it until a socket is ready).
    pub fn send_envelope(
        &mut self,
        kind: &str,
        payload: Value,
        retry_attempt: u64,
        retry_reason: &str,
    ) -> String {
        self.send_copy(kind, payload, retry_attempt, retry_reason, None, None)
    }

    /// As [`Self::send_envelope`], as a retry of the delivery that began with `origin`.
    fn send_copy(
        &mut self,
        kind: &str,
        payload: Value,
        retry_attempt: u64,
        retry_reason: &str,
        origin: Option<String>,
        avoid: Option<u64>,
    ) -> String {
        let envelope_id = format!("env-{:08}", self.next_id());
        let frame = json!({
            "envelope_id": envelope_id, "type": kind, "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": retry_attempt, "retry_reason": retry_reason,
        });
        self.envelopes.insert(
            envelope_id.clone(),
            SentEnvelope {
                kind: kind.to_owned(),
                payload,
                retry_attempt,
                acked: false,
                origin: origin.unwrap_or_else(|| envelope_id.clone()),
                retried: false,
                avoid,
            },
        );
        self.envelope_order.push(envelope_id.clone());
        self.queued
            .push_back((envelope_id.clone(), frame.to_string()));
        self.flush_queue();
        envelope_id
    }

    /// Sends queued frames over the sockets that said hello, each to the next one in turn:
    /// with several connections open, Slack hands each envelope to one of them, not to all
    /// (<https://api.slack.com/apis/connections/socket-implement#connections>: up to 10
    /// connections, events spread among them). A retry skips the connection its missed copy
    /// went to when another is open. Frames stay queued while no socket is ready.
    pub fn flush_queue(&mut self) {
        while let Some((envelope_id, frame)) = self.queued.pop_front() {
            let avoid = self.envelopes.get(&envelope_id).and_then(|e| e.avoid);
            let ready: Vec<(u64, mpsc::UnboundedSender<ConnCommand>)> = self
                .live
                .iter()
                .filter(|c| c.hello_sent)
                .map(|c| (c.id, c.commands.clone()))
                .collect();
            let preferred: Vec<&(u64, _)> =
                ready.iter().filter(|(id, _)| Some(*id) != avoid).collect();
            let picked: Vec<&(u64, _)> = match self.next_on.take() {
                Some(pick) => ready.iter().filter(|(id, _)| *id == pick).collect(),
                None => Vec::new(),
            };
            let choices = if !picked.is_empty() {
                picked
            } else if preferred.is_empty() {
                ready.iter().collect()
            } else {
                preferred
            };
            let Some((id, commands)) = choices.get(self.rotation % choices.len().max(1)).copied()
            else {
                self.queued.push_front((envelope_id, frame));
                return;
            };
            self.rotation = self.rotation.wrapping_add(1);
            // Stamped before the socket task can possibly write it.
            let sent_at = Instant::now();
            if commands.send(ConnCommand::Send(frame.clone())).is_err() {
                // The socket task just ended: keep the frame for the next ready socket.
                let id = *id;
                self.live.retain(|c| c.id != id);
                self.queued.push_front((envelope_id, frame));
                continue;
            }
            self.records.sent_at.insert(envelope_id.clone(), sent_at);
            self.written_on.insert(envelope_id.clone(), *id);
            self.awaiting_ack.push_back(envelope_id.clone());
            self.records.timeline.push(SocketEvent::EnvelopeSent {
                connection: *id,
                envelope_id,
            });
        }
    }

    /// Sends `envelope_id`'s payload again (acked or not) with `retry_attempt` + 1.
    pub fn redeliver(&mut self, envelope_id: &str, reason: &str) -> Option<String> {
        let envelope = self.envelopes.get(envelope_id)?.clone();
        Some(self.send_envelope(
            &envelope.kind,
            envelope.payload,
            envelope.retry_attempt + 1,
            reason,
        ))
    }

    pub fn redeliver_unacked(&mut self, reason: &str) -> usize {
        let mut pending = Vec::new();
        for id in &self.envelope_order {
            if let Some(envelope) = self.envelopes.get_mut(id)
                && !envelope.acked
            {
                // The retried copy supersedes this one: acking the old id later changes
                // nothing, as with Slack.
                envelope.acked = true;
                pending.push(envelope.clone());
            }
        }
        for envelope in &pending {
            self.send_envelope(
                &envelope.kind,
                envelope.payload.clone(),
                envelope.retry_attempt + 1,
                reason,
            );
        }
        pending.len()
    }

    /// Like [`Self::redeliver_unacked`], but only envelopes written to a socket at least
    /// `age` ago (Slack retries an envelope whose ack is overdue, not one just sent).
    pub fn redeliver_unacked_older_than(&mut self, age: Duration, reason: &str) -> usize {
        let now = Instant::now();
        let mut pending = Vec::new();
        for id in &self.envelope_order {
            let overdue = self
                .records
                .sent_at
                .get(id)
                .is_some_and(|at| now.duration_since(*at) >= age);
            if let Some(envelope) = self.envelopes.get_mut(id)
                && !envelope.acked
                && overdue
            {
                envelope.acked = true;
                pending.push(envelope.clone());
            }
        }
        for envelope in &pending {
            self.send_envelope(
                &envelope.kind,
                envelope.payload.clone(),
                envelope.retry_attempt + 1,
                reason,
            );
        }
        pending.len()
    }

    /// Sends a copy of a known envelope again (acked or not) under a new envelope id with
    /// `retry_attempt` + 1: the duplicate delivery Slack makes when an ack arrived late. It
    /// goes to another open connection than the first copy when there is one (Slack may
    /// pick any), so an app with several connections must dedupe across them.
    pub fn redeliver_envelope(&mut self, envelope_id: &str, reason: &str) -> Option<String> {
        let envelope = self.envelopes.get(envelope_id)?.clone();
        let avoid = self.written_on.get(envelope_id).copied();
        Some(self.send_copy(
            &envelope.kind,
            envelope.payload,
            envelope.retry_attempt + 1,
            reason,
            None,
            avoid,
        ))
    }

    /// Drops from `awaiting_ack` what Slack would no longer retry: acked or retried
    /// copies, copies out of retries, copies of a delivery another copy completed.
    fn prune_awaiting(&mut self) {
        let (envelopes, acked_origins) = (&self.envelopes, &self.acked_origins);
        self.awaiting_ack.retain(|id| {
            envelopes.get(id).is_some_and(|e| {
                !e.acked
                    && !e.retried
                    && e.retry_attempt < MAX_RETRIES
                    && !acked_origins.contains(&e.origin)
            })
        });
    }

    /// When the next automatic retry falls due, if any is pending (envelopes are written in
    /// order, so the oldest one waiting falls due first).
    pub fn next_retry_at(&mut self) -> Option<Instant> {
        self.prune_awaiting();
        let first = self.awaiting_ack.front()?;
        Some(*self.records.sent_at.get(first)? + ACK_DEADLINE)
    }

    /// Retries every delivery whose ack is overdue, as Slack does on its own: the same
    /// payload in a new envelope with `retry_attempt` + 1 and `retry_reason`. Returns how
    /// many were retried.
    pub fn retry_overdue(&mut self, now: Instant) -> usize {
        self.prune_awaiting();
        let mut overdue = Vec::new();
        while let Some(id) = self.awaiting_ack.front() {
            let due = self
                .records
                .sent_at
                .get(id)
                .is_none_or(|sent| *sent + ACK_DEADLINE <= now);
            if !due {
                break;
            }
            overdue.extend(self.awaiting_ack.pop_front());
        }
        for id in &overdue {
            let Some(envelope) = self.envelopes.get_mut(id) else {
                continue;
            };
            envelope.retried = true;
            let envelope = envelope.clone();
            let avoid = self.written_on.get(id).copied();
            let retry = self.send_copy(
                &envelope.kind,
                envelope.payload,
                envelope.retry_attempt + 1,
                TIMEOUT_REASON,
                Some(envelope.origin),
                avoid,
            );
            self.records.auto_retries.push((id.clone(), retry));
        }
        overdue.len()
    }

    /// Envelopes written to a socket whose delivery no ack completed yet.
    pub fn unacked_deliveries(&self) -> usize {
        self.records
            .sent_at
            .keys()
            .filter_map(|id| self.envelopes.get(id))
            .filter(|e| !e.acked && !self.acked_origins.contains(&e.origin))
            .count()
    }

    pub fn command_newest(&mut self, command: ConnCommand) {
        if let Some(conn) = self.live.last() {
            let _ = conn.commands.send(command);
        }
    }

    pub fn record_ack(&mut self, connection: u64, frame: Value) {
        let Some(envelope_id) = frame.get("envelope_id").and_then(Value::as_str) else {
            return;
        };
        if let Some(envelope) = self.envelopes.get_mut(envelope_id) {
            envelope.acked = true;
            self.acked_origins.insert(envelope.origin.clone());
        }
        self.records.acks.push(Ack {
            connection,
            envelope_id: envelope_id.to_owned(),
            frame: frame.clone(),
            at: Instant::now(),
        });
    }
}

/// State shared by the HTTP handlers, the socket tasks and the test handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub tokens: FakeTokens,
    pub addr: SocketAddr,
    /// Cancelled when the fake is dropped: socket tasks end with it.
    pub stop: CancellationToken,
    inner: Mutex<Inner>,
    pub changes: watch::Sender<u64>,
}

/// A lock guard that tells waiters about the change when it is released.
pub(crate) struct Changed<'a> {
    guard: Option<MutexGuard<'a, Inner>>,
    changes: &'a watch::Sender<u64>,
}

impl std::ops::Deref for Changed<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        self.guard.as_ref().expect("guard held")
    }
}

impl std::ops::DerefMut for Changed<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        self.guard.as_mut().expect("guard held")
    }
}

impl Drop for Changed<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.changes.send_modify(|v| *v += 1);
    }
}

impl Shared {
    pub fn new(tokens: FakeTokens, addr: SocketAddr, stop: CancellationToken) -> Self {
        Self {
            tokens,
            addr,
            stop,
            inner: Mutex::new(Inner {
                records: Records::default(),
                faults: HashMap::new(),
                socket_url_override: None,
                refuse_connections: None,
                close_after_hello: 0,
                stored_files: HashMap::new(),
                file_objects: HashMap::new(),
                user_names: HashMap::new(),
                messages: HashMap::new(),
                live: Vec::new(),
                envelopes: HashMap::new(),
                envelope_order: Vec::new(),
                queued: VecDeque::new(),
                awaiting_ack: VecDeque::new(),
                acked_origins: HashSet::new(),
                written_on: HashMap::new(),
                rotation: 0,
                next_on: None,
                counter: 0,
                ts_counter: 0,
            }),
            changes: watch::channel(0).0,
        }
    }

    /// Locks the state for reading only: waiters are not woken.
    pub fn peek(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the state; waiters re-check when the guard drops.
    pub fn lock(&self) -> Changed<'_> {
        Changed {
            guard: Some(self.inner.lock().unwrap_or_else(|e| e.into_inner())),
            changes: &self.changes,
        }
    }
}
