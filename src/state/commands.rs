//! The closed set of writes, the same for every backend: the SQLite writer applies each in
//! its transaction (`sqlite::apply`), the PostgreSQL backend in one of its own.

use super::ledger::{InboundState, NewObligation, OwnerStamp};
use super::model::{NewMessage, NewSession, UsageDelta};
pub use super::outcome::Outcome;

/// One write, sent to the writer thread.
#[derive(Debug, Clone)]
pub enum WriteCommand {
    CreateSession(NewSession),
    EndSession {
        id: String,
        reason: String,
    },
    ReopenSession {
        id: String,
    },
    AppendMessage(Box<NewMessage>),
    /// Appends a turn's user message and marks its inbound event `processing` in one
    /// savepoint, so a restart knows exactly whether the turn had started.
    StartTurn {
        message: Box<NewMessage>,
        platform: String,
        event_id: String,
    },
    SetTitle {
        id: String,
        title: Option<String>,
    },
    /// Sets a generated title only while the session has none (a manual `/title` set while
    /// the title was being generated wins); changes 1 row when it was set.
    SetTitleIfEmpty {
        id: String,
        title: String,
    },
    RecordUsage(UsageDelta),
    ClearMessages {
        id: String,
    },
    /// Deletes a session's messages from `from_id` on (`/undo`, `/retry`).
    TruncateMessages {
        id: String,
        from_id: i64,
    },
    /// Deletes sessions and their messages; their children are orphaned, not deleted.
    DeleteSessions {
        ids: Vec<String>,
    },
    // ---- gateway (tables created by `EnsureGatewaySchema`) ----------------------------------
    EnsureGatewaySchema,
    /// A journaled turn's tool call is about to run (`hermesd_tool_starts`): a turn resumed
    /// after a crash or a takeover runs a recorded call without a result only when it never
    /// started. Also drops the session's marks older than a day.
    MarkToolStarted {
        session_id: String,
        call_id: String,
    },
    RecordInbound {
        platform: String,
        event_id: String,
        session_key: String,
        payload_json: String,
    },
    MarkInbound {
        platform: String,
        event_id: String,
        state: InboundState,
    },
    /// Joins received events into one: `keep` takes `payload_json`, and the `absorbed` are
    /// answered (their turn is `keep`'s). `Changed(0)` and no write unless every one of them
    /// is still received.
    FoldInbound {
        platform: String,
        keep: String,
        payload_json: String,
        absorbed: Vec<String>,
    },
    /// Keeps an inbound item an adapter could not decode (`hermesd_dead_letters`).
    RecordDeadLetter {
        platform: String,
        item_id: String,
        chat_id: Option<String>,
        raw: String,
        error: String,
    },
    /// Claims a scheduled run (`hermesd_cron_runs`); `Changed(0)` when already claimed.
    ClaimCronRun {
        job_id: String,
        scheduled_at: i64,
        session_id: String,
        owner: OwnerStamp,
    },
    /// Ends a running claim and records its reply obligations in one savepoint.
    FinishCronRun {
        end: Box<super::cron_runs::CronRunEnd>,
        owner: OwnerStamp,
    },
    MarkCronRunRecorded {
        job_id: String,
        scheduled_at: i64,
    },
    /// Deletes finished inbound events last updated before `before` (epoch seconds).
    PruneInbound {
        before: f64,
    },
    /// Prunes the delivery ledger's finished rows (never an owed one); see
    /// `gateway_commands::prune_ledger`.
    PruneLedger {
        now: f64,
    },
    /// Atomically records a turn's reply obligations and marks its event answered.
    AnswerInbound {
        platform: String,
        event_id: String,
        replies: Vec<NewObligation>,
        owner: OwnerStamp,
    },
    /// `AnswerInbound` that also journals `spawn`, a new `received` event (a `/background`
    /// task), in the same transaction: the acknowledgement and the task exist together or
    /// not at all. `Changed(0)` and nothing written when `spawn` was journaled already.
    AnswerAndSpawn {
        platform: String,
        event_id: String,
        replies: Vec<NewObligation>,
        owner: OwnerStamp,
        spawn: Box<super::ledger::NewInbound>,
    },
    CreateObligation {
        obligation: Box<NewObligation>,
        owner: OwnerStamp,
    },
    /// As `AnswerInbound` with one reply, delivered by editing `message_id`.
    AnswerInboundByEdit {
        platform: String,
        event_id: String,
        reply: Box<NewObligation>,
        message_id: String,
        owner: OwnerStamp,
    },
    MarkAttempting {
        id: String,
        owner: OwnerStamp,
    },
    MarkDelivered {
        id: String,
    },
    MarkFailed {
        id: String,
        error: String,
    },
    /// Only a send `owner` holds (or whose holder is gone) is deferred.
    MarkDeferred {
        id: String,
        error: String,
        owner: OwnerStamp,
    },
    AbandonStale {
        now: f64,
    },
    SaveRouting {
        scope: String,
        session_key: String,
        entry_json: String,
    },
    DeleteRouting {
        scope: String,
        session_keys: Vec<String>,
    },
    /// Replaces the whole routing index of `scope` (key, entry JSON).
    ReplaceRouting {
        scope: String,
        entries: Vec<(String, String)>,
    },
}
