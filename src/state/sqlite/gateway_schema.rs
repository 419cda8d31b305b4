//! The gateway's tables, created only when the gateway starts ([`Store::ensure_gateway_schema`]
//! (crate::state::Store::ensure_gateway_schema)), so a database made by `hermesd sessions` keeps
//! exactly the seed's tables.
//!
//! `gateway_routing` and `delivery_obligations` are Hermes 0.19's own tables with its exact
//! DDL (`hermes_state.py`, `gateway/delivery_ledger.py`): Python and hermesd share them.
//! `hermesd_inbound_events`, `hermesd_dead_letters` and `hermesd_cron_runs` are ours; the `hermesd_` prefix keeps it clear of any Hermes name.
//! Every statement is `IF NOT EXISTS`: an existing table (possibly created by Python) is never
//! altered.

use rusqlite::Connection;

use crate::state::error::StoreResult;

/// The cron-run claims (`state::cron_runs`), created with the rest of the gateway schema.
pub const CRON_RUNS_SQL: &str = "CREATE TABLE IF NOT EXISTS hermesd_cron_runs (
    job_id TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    state TEXT NOT NULL,
    session_id TEXT,
    owner_pid INTEGER,
    owner_started_at INTEGER,
    claimed_at REAL NOT NULL,
    finished_at REAL,
    status TEXT,
    error TEXT,
    obligation_ids TEXT,
    job_recorded INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, scheduled_at)
)";

/// Hermes 0.19's routing index table (`hermes_state.py` SCHEMA_SQL), verbatim.
pub const GATEWAY_ROUTING_SQL: &str = "CREATE TABLE IF NOT EXISTS gateway_routing (
    scope TEXT NOT NULL DEFAULT '',
    session_key TEXT NOT NULL,
    entry_json TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (scope, session_key)
)";

/// Hermes 0.19's delivery ledger table (`gateway/delivery_ledger.py::_connect`), verbatim.
pub const DELIVERY_OBLIGATIONS_SQL: &str = "CREATE TABLE IF NOT EXISTS delivery_obligations (
            obligation_id TEXT PRIMARY KEY,
            session_key TEXT NOT NULL,
            platform TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            thread_id TEXT,
            content TEXT NOT NULL,
            state TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            owner_pid INTEGER,
            owner_started_at INTEGER,
            last_error TEXT
        )";

/// hermesd's inbound journal: one row per platform event, written before it is acknowledged.
pub const INBOUND_EVENTS_SQL: &str = "CREATE TABLE IF NOT EXISTS hermesd_inbound_events (
    platform TEXT NOT NULL,
    event_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    state TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    received_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    reply_obligation_id TEXT,
    PRIMARY KEY (platform, event_id)
)";

/// hermesd's note that an obligation is delivered by editing a message already in the chat
/// (a streamed preview) rather than by sending a new one. Kept beside Hermes's ledger, whose
/// DDL is shared with Python and never altered; an edit is idempotent, so a recovered row is
/// edited again rather than resent with the recovered marker.
pub const REPLY_EDITS_SQL: &str = "CREATE TABLE IF NOT EXISTS hermesd_reply_edits (
    obligation_id TEXT PRIMARY KEY,
    message_id TEXT NOT NULL,
    created_at REAL NOT NULL
)";

/// hermesd's marks of the tool calls of journaled turns that started running, so a resumed
/// turn can tell a recorded call that never ran (run it) from one that may have (never run
/// twice).
pub const TOOL_STARTS_SQL: &str = "CREATE TABLE IF NOT EXISTS hermesd_tool_starts (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    started_at REAL NOT NULL,
    PRIMARY KEY (session_id, call_id)
)";

/// How long a tool-start mark is kept: a resumed turn only asks about the calls of its
/// session's last round.
pub const TOOL_START_KEPT_SECONDS: f64 = 86_400.0;

/// The states [`unfinished`](crate::state::Store::unfinished_inbound) looks for, as SQL.
pub const UNFINISHED_STATES: &str = "('received', 'processing')";

/// A partial index holding only the unfinished events, so the startup scan stays small however
/// long the journal is.
pub fn inbound_unfinished_index_sql() -> String {
    format!(
        "CREATE INDEX IF NOT EXISTS hermesd_idx_inbound_unfinished \
         ON hermesd_inbound_events(received_at) WHERE state IN {UNFINISHED_STATES}"
    )
}

/// The gateway's table names (ours and the two shared with Hermes).
pub const GATEWAY_TABLES: [&str; 7] = [
    "gateway_routing",
    "delivery_obligations",
    "hermesd_inbound_events",
    "hermesd_reply_edits",
    "hermesd_dead_letters",
    "hermesd_cron_runs",
    "hermesd_tool_starts",
];

/// Creates whatever is missing. Idempotent; runs as one writer command.
pub fn ensure(conn: &Connection) -> StoreResult<()> {
    conn.execute_batch(GATEWAY_ROUTING_SQL)?;
    conn.execute_batch(DELIVERY_OBLIGATIONS_SQL)?;
    conn.execute_batch(INBOUND_EVENTS_SQL)?;
    conn.execute_batch(REPLY_EDITS_SQL)?;
    conn.execute_batch(&inbound_unfinished_index_sql())?;
    conn.execute_batch(crate::state::dead_letters::DEAD_LETTERS_SQL)?;
    conn.execute_batch(CRON_RUNS_SQL)?;
    conn.execute_batch(TOOL_STARTS_SQL)?;
    Ok(())
}
