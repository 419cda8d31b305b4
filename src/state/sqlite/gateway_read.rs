//! Reads of the gateway's tables, on pooled read-only connections. No writes happen here.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;

use crate::state::error::StoreResult;
use crate::state::ledger::{
    InboundEvent, InboundState, OBLIGATION_MAX_ATTEMPTS, OBLIGATION_STALE_AFTER_SECONDS,
    Obligation, ObligationState, owner_alive,
};
use crate::state::sqlite::gateway_schema::UNFINISHED_STATES;

fn bad_state(table: &str, state: &str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        0,
        rusqlite::types::Type::Text,
        format!("unknown {table} state {state:?}").into(),
    )
}

fn inbound_from_row(r: &Row<'_>) -> rusqlite::Result<InboundEvent> {
    inbound_event(
        (r.get(0)?, r.get(1)?, r.get(2)?),
        r.get(3)?,
        r.get(4)?,
        (r.get(5)?, r.get(6)?),
        r.get(7)?,
    )
    .map_err(|UnknownState(state)| bad_state("inbound", &state))
}

/// A `state` column value no version of the journal writes.
#[derive(Debug)]
pub(crate) struct UnknownState(pub String);

/// An inbound event from its columns (either backend).
pub(crate) fn inbound_event(
    (platform, event_id, session_key): (String, String, String),
    state: String,
    payload: String,
    (received_at, updated_at): (f64, f64),
    replies: Option<String>,
) -> Result<InboundEvent, UnknownState> {
    Ok(InboundEvent {
        platform,
        event_id,
        session_key,
        state: InboundState::parse(&state).ok_or(UnknownState(state))?,
        // A payload that is not JSON (written by hand) is kept as its text.
        payload: serde_json::from_str(&payload).unwrap_or(Value::String(payload)),
        received_at,
        updated_at,
        reply_obligation_ids: split_ids(replies),
    })
}

/// A comma-separated id list as stored (`reply_obligation_id`, `obligation_ids`).
pub(crate) fn split_ids(joined: Option<String>) -> Vec<String> {
    joined
        .map(|s| {
            s.split(',')
                .filter(|id| !id.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) const INBOUND_COLUMNS: &str = "platform, event_id, session_key, state, payload_json, \
    received_at, updated_at, reply_obligation_id";

/// Events received or in progress in journal order (`rowid`: one writer appends).
pub fn unfinished_inbound(conn: &Connection) -> StoreResult<Vec<InboundEvent>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {INBOUND_COLUMNS} FROM hermesd_inbound_events
         WHERE state IN {UNFINISHED_STATES} ORDER BY rowid"
    ))?;
    let rows = stmt.query_map([], inbound_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// One session's events received or in progress, in journal order.
pub fn unfinished_inbound_of(
    conn: &Connection,
    session_key: &str,
) -> StoreResult<Vec<InboundEvent>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {INBOUND_COLUMNS} FROM hermesd_inbound_events
         WHERE state IN {UNFINISHED_STATES} AND session_key = ?1 ORDER BY rowid"
    ))?;
    let rows = stmt.query_map([session_key], inbound_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Whether `session_key` has an event received or in progress.
pub fn has_unfinished_inbound(conn: &Connection, session_key: &str) -> StoreResult<bool> {
    Ok(conn.query_row(
        &format!(
            "SELECT EXISTS (SELECT 1 FROM hermesd_inbound_events
             WHERE state IN {UNFINISHED_STATES} AND session_key = ?1)"
        ),
        [session_key],
        |r| r.get(0),
    )?)
}

/// Ledger rows still owed: `pending` or `attempting`.
pub fn owed_replies(conn: &Connection) -> StoreResult<u64> {
    let count: i64 = conn.query_row(
        "SELECT COUNT(*) FROM delivery_obligations WHERE state IN ('pending', 'attempting')",
        [],
        |r| r.get(0),
    )?;
    Ok(u64::try_from(count).unwrap_or(0))
}

pub fn get_inbound(
    conn: &Connection,
    platform: &str,
    event_id: &str,
) -> StoreResult<Option<InboundEvent>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {INBOUND_COLUMNS} FROM hermesd_inbound_events
         WHERE platform = ?1 AND event_id = ?2"
    ))?;
    let mut rows = stmt.query_map(params![platform, event_id], inbound_from_row)?;
    Ok(rows.next().transpose()?)
}

pub(crate) const OBLIGATION_COLUMNS: &str = "obligation_id, session_key, platform, chat_id, thread_id, \
    content, state, attempts, created_at, updated_at, owner_pid, owner_started_at, last_error";

fn obligation_from_row(r: &Row<'_>) -> rusqlite::Result<Obligation> {
    let state: String = r.get(6)?;
    let state = ObligationState::parse(&state).ok_or_else(|| bad_state("obligation", &state))?;
    Ok(Obligation {
        obligation_id: r.get(0)?,
        session_key: r.get(1)?,
        platform: r.get(2)?,
        chat_id: r.get(3)?,
        thread_id: r.get(4)?,
        content: r.get(5)?,
        state,
        attempts: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
        owner_pid: r.get(10)?,
        owner_started_at: r.get(11)?,
        last_error: r.get(12)?,
        ambiguous: state.is_ambiguous(),
    })
}

/// The message an obligation is delivered by editing, if it is one (`hermesd_reply_edits`).
pub fn reply_edit_target(conn: &Connection, id: &str) -> StoreResult<Option<String>> {
    let mut stmt =
        conn.prepare("SELECT message_id FROM hermesd_reply_edits WHERE obligation_id = ?1")?;
    let mut rows = stmt.query_map([id], |r| r.get::<_, String>(0))?;
    Ok(rows.next().transpose()?)
}

pub fn get_obligation(conn: &Connection, id: &str) -> StoreResult<Option<Obligation>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {OBLIGATION_COLUMNS} FROM delivery_obligations WHERE obligation_id = ?1"
    ))?;
    let mut rows = stmt.query_map([id], obligation_from_row)?;
    Ok(rows.next().transpose()?)
}

/// Replies to (re)send: undelivered rows (`pending`, `attempting`, `failed`) whose owner is no
/// live process, within the attempt cap and the stale cutoff (rows past those are for
/// [`abandon_stale`](crate::state::Store::abandon_stale)). Oldest first.
pub fn undelivered(conn: &Connection, now: f64) -> StoreResult<Vec<Obligation>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {OBLIGATION_COLUMNS} FROM delivery_obligations
         WHERE state IN ('pending', 'attempting', 'failed')
           AND attempts < ?1 AND ?2 - created_at <= ?3
         ORDER BY created_at, rowid"
    ))?;
    let rows = stmt.query_map(
        params![OBLIGATION_MAX_ATTEMPTS, now, OBLIGATION_STALE_AFTER_SECONDS],
        obligation_from_row,
    )?;
    let mut out = Vec::new();
    for row in rows {
        let row = row?;
        if !owner_alive(row.owner_pid, row.owner_started_at) {
            out.push(row);
        }
    }
    Ok(out)
}

/// The routing index of `scope`; a row whose JSON does not parse is skipped with a warning.
pub fn load_routing(conn: &Connection, scope: &str) -> StoreResult<BTreeMap<String, Value>> {
    let mut stmt =
        conn.prepare("SELECT session_key, entry_json FROM gateway_routing WHERE scope = ?1")?;
    let rows = stmt
        .query_map([scope], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(parse_routing(scope, rows))
}

/// One entry of the routing index of `scope`; `None` when absent or unparsable.
pub fn load_routing_entry(
    conn: &Connection,
    scope: &str,
    session_key: &str,
) -> StoreResult<Option<Value>> {
    let json: Option<String> = conn
        .query_row(
            "SELECT entry_json FROM gateway_routing WHERE scope = ?1 AND session_key = ?2",
            [scope, session_key],
            |r| r.get(0),
        )
        .optional()?;
    Ok(json.and_then(|json| {
        parse_routing(scope, vec![(session_key.to_owned(), json)])
            .into_values()
            .next()
    }))
}

/// Routing rows (key, entry JSON) as the index (either backend).
pub(crate) fn parse_routing(scope: &str, rows: Vec<(String, String)>) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for (key, json) in rows {
        match serde_json::from_str(&json) {
            Ok(entry) => {
                out.insert(key, entry);
            }
            Err(e) => tracing::warn!(scope, key, error = %e, "unreadable routing entry skipped"),
        }
    }
    out
}

/// See [`crate::state::Store::started_tool_calls`].
pub fn started_tool_calls(
    conn: &Connection,
    session_id: &str,
    call_ids: &[String],
) -> StoreResult<std::collections::HashSet<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT 1 FROM hermesd_tool_starts WHERE session_id = ?1 AND call_id = ?2",
    )?;
    let mut started = std::collections::HashSet::new();
    for id in call_ids {
        if stmt.exists(rusqlite::params![session_id, id])? {
            started.insert(id.clone());
        }
    }
    Ok(started)
}
