//! Types and policy of the gateway's durable journals: inbound events (`hermesd_inbound_events`)
//! and the Hermes delivery-obligation ledger (`delivery_obligations`, shared with Python).
//!
//! The constants, the obligation id and the owner stamp follow `gateway/delivery_ledger.py`
//! of Hermes 0.19.0 so both implementations can recover each other's rows.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Attempts after which an undelivered obligation is abandoned (Python `MAX_ATTEMPTS`).
pub const OBLIGATION_MAX_ATTEMPTS: i64 = 3;
/// Age (seconds since creation) after which an undelivered obligation is abandoned
/// (Python `STALE_AFTER_SECONDS`).
pub const OBLIGATION_STALE_AFTER_SECONDS: f64 = 86_400.0;
/// How long delivered/abandoned obligations are kept.
pub const OBLIGATION_RETENTION_SECONDS: f64 = 7.0 * 86_400.0;
/// The most finished (delivered or abandoned) obligation rows kept; the oldest go first.
/// Owed rows (pending, attempting) are never pruned, however many there are: they are
/// replies someone is still owed.
pub const OBLIGATION_MAX_ROWS: i64 = 500;
/// Owed replies past this count are reported (a warning and the `owed_replies` gauge), as a
/// long platform outage would pile them up; they are never deleted for it.
pub const OWED_REPLIES_WARN: u64 = 500;
/// Longest `last_error` stored (Python keeps `error[:500]`).
pub const MAX_ERROR_CHARS: usize = 500;

/// Prefix of a redelivered reply that the platform may already have. Only people read it
/// (Python Hermes adds its own wording and never parses ours), so the words are ours.
pub const RECOVERED_MARKER: &str =
    "♻️ Sent again after a restart; you may already have this reply:\n\n";

/// Whether [`Store::record_inbound`](super::Store::record_inbound) saw the event first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboundRecord {
    Recorded,
    /// The event was already journaled (a redelivery by the platform): do not process it.
    Duplicate,
}

/// An event the gateway journals itself (a `/background` task), as
/// [`Store::answer_and_spawn`](super::Store::answer_and_spawn) records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInbound {
    pub platform: String,
    pub event_id: String,
    pub session_key: String,
    pub payload_json: String,
}

/// Where an inbound event is in its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InboundState {
    Received,
    Processing,
    Answered,
    Ignored,
}

impl InboundState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Received => "received",
            Self::Processing => "processing",
            Self::Answered => "answered",
            Self::Ignored => "ignored",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "received" => Self::Received,
            "processing" => Self::Processing,
            "answered" => Self::Answered,
            "ignored" => Self::Ignored,
            _ => return None,
        })
    }
}

/// A journaled inbound event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InboundEvent {
    pub platform: String,
    pub event_id: String,
    pub session_key: String,
    pub state: InboundState,
    pub payload: Value,
    pub received_at: f64,
    pub updated_at: f64,
    /// The obligations created for this event's reply (stored comma-separated).
    pub reply_obligation_ids: Vec<String>,
}

/// The states of a `delivery_obligations` row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ObligationState {
    Pending,
    Attempting,
    Delivered,
    Failed,
    Abandoned,
}

impl ObligationState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Attempting => "attempting",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
            Self::Abandoned => "abandoned",
        }
    }

    /// Whether an undelivered row in this state may already have reached the platform
    /// (its send was under way or rejected when its owner died).
    pub fn is_ambiguous(self) -> bool {
        matches!(self, Self::Attempting | Self::Failed)
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "attempting" => Self::Attempting,
            "delivered" => Self::Delivered,
            "failed" => Self::Failed,
            "abandoned" => Self::Abandoned,
            _ => return None,
        })
    }
}

/// A reply owed to a platform, recorded before it is sent.
#[derive(Debug, Clone, Default)]
pub struct NewObligation {
    pub session_key: String,
    /// The triggering inbound message id; distinguishes turns within one session.
    pub message_ref: String,
    pub platform: String,
    pub chat_id: String,
    pub thread_id: Option<String>,
    pub content: String,
}

impl NewObligation {
    /// The stable id Hermes computes: same turn and same content re-record idempotently.
    pub fn obligation_id(&self) -> String {
        compute_obligation_id(&self.session_key, &self.message_ref, &self.content)
    }
}

/// `sha256("{session_key}|{message_ref}|{content}")`, first 24 hex digits (as Python).
pub fn compute_obligation_id(session_key: &str, message_ref: &str, content: &str) -> String {
    let digest = Sha256::digest(format!("{session_key}|{message_ref}|{content}").as_bytes());
    let mut id = hex::encode(digest);
    id.truncate(24);
    id
}

/// A `delivery_obligations` row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Obligation {
    pub obligation_id: String,
    pub session_key: String,
    pub platform: String,
    pub chat_id: String,
    pub thread_id: Option<String>,
    pub content: String,
    pub state: ObligationState,
    pub attempts: i64,
    pub created_at: f64,
    pub updated_at: f64,
    pub owner_pid: Option<i64>,
    pub owner_started_at: Option<i64>,
    pub last_error: Option<String>,
    /// The send may already have reached the platform (the row was `attempting` or `failed`
    /// when its owner died): resend only with [`RECOVERED_MARKER`] (Python's `needs_marker`).
    pub ambiguous: bool,
}

impl Obligation {
    /// The text to send on redelivery: prefixed with the marker when ambiguous.
    pub fn text_to_send(&self) -> String {
        if self.ambiguous {
            format!("{RECOVERED_MARKER}{}", self.content)
        } else {
            self.content.clone()
        }
    }
}

/// Which process owns an obligation: pid plus its start time, so a recycled pid is never
/// mistaken for the owner (field 22 of `/proc/<pid>/stat`, as Hermes records it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerStamp {
    pub pid: i64,
    pub started_at: Option<i64>,
}

impl OwnerStamp {
    /// This process.
    pub fn current() -> Self {
        let pid = i64::from(std::process::id());
        Self {
            pid,
            started_at: process_start_time(pid),
        }
    }

    /// Whether this owner is still running (Hermes's `_owner_alive`).
    pub fn is_alive(&self) -> bool {
        owner_alive(Some(self.pid), self.started_at)
    }
}

/// The start time of `pid` in clock ticks since boot, where `/proc` exists.
pub fn process_start_time(pid: i64) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; the fields after it do not.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// True when the recorded owner still exists: same pid and, when both are known, same start.
pub fn owner_alive(pid: Option<i64>, started_at: Option<i64>) -> bool {
    let Some(pid) = pid.filter(|p| *p > 0) else {
        return false;
    };
    match (process_start_time(pid), started_at) {
        (Some(current), Some(recorded)) => current == recorded,
        (Some(_), None) => true,
        (None, _) => pid_exists(pid),
    }
}

fn pid_exists(pid: i64) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    let Some(pid) = rustix::process::Pid::from_raw(raw) else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    }
}

/// A reply to send and the replies to the same chat recorded before it that are still owed
/// elsewhere ([`Store::obligation_in_chat_order`](crate::state::Store::obligation_in_chat_order)).
#[derive(Debug, Clone, Default)]
pub struct ObligationInOrder {
    pub obligation: Option<Obligation>,
    /// Oldest first; empty on SQLite, where one process's lane orders a chat's replies.
    pub owed_before: Vec<OwedBefore>,
}

/// A reply to the same chat, recorded earlier (the database's insertion order, not a clock)
/// by another instance or an earlier run of this one, not yet delivered.
#[derive(Debug, Clone)]
pub struct OwedBefore {
    pub obligation: Obligation,
    /// Its owner still holds the lease it claimed the row under: the row is theirs to send.
    pub owner_alive: bool,
}
