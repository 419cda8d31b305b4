//! The gateway's writes (inbound journal, delivery obligations, routing index), applied by
//! the writer through [`super::apply::apply`]. Semantics follow Hermes 0.19's
//! `delivery_ledger.py` and `hermes_state.py` routing functions unless noted.

use rusqlite::{Connection, OptionalExtension, params};

use crate::state::commands::Outcome;
use crate::state::error::{StoreError, StoreResult};
use crate::state::ledger::{
    MAX_ERROR_CHARS, NewInbound, NewObligation, OBLIGATION_MAX_ATTEMPTS, OBLIGATION_MAX_ROWS,
    OBLIGATION_RETENTION_SECONDS, OBLIGATION_STALE_AFTER_SECONDS, OwnerStamp, owner_alive,
};
use crate::state::model::now_epoch;
use crate::state::sqlite::gateway_schema::{TOOL_START_KEPT_SECONDS, UNFINISHED_STATES};

/// `INSERT OR IGNORE`: a platform redelivering an event we already hold changes nothing.
/// `Changed(1)` when recorded, `Changed(0)` for a duplicate.
pub fn record_inbound(
    conn: &Connection,
    platform: &str,
    event_id: &str,
    session_key: &str,
    payload_json: &str,
) -> StoreResult<Outcome> {
    let now = now_epoch();
    let inserted = conn.execute(
        "INSERT OR IGNORE INTO hermesd_inbound_events
             (platform, event_id, session_key, state, payload_json, received_at, updated_at)
         VALUES (?1, ?2, ?3, 'received', ?4, ?5, ?5)",
        params![platform, event_id, session_key, payload_json, now],
    )?;
    Ok(Outcome::Changed(inserted))
}

pub fn mark_inbound(
    conn: &Connection,
    platform: &str,
    event_id: &str,
    state: &str,
) -> StoreResult<Outcome> {
    Ok(Outcome::Changed(conn.execute(
        "UPDATE hermesd_inbound_events SET state = ?1, updated_at = ?2
         WHERE platform = ?3 AND event_id = ?4",
        params![state, now_epoch(), platform, event_id],
    )?))
}

/// See [`WriteCommand::MarkToolStarted`](crate::state::WriteCommand::MarkToolStarted).
pub fn mark_tool_started(
    conn: &Connection,
    session_id: &str,
    call_id: &str,
) -> StoreResult<Outcome> {
    let now = now_epoch();
    conn.execute(
        "DELETE FROM hermesd_tool_starts WHERE session_id = ?1 AND started_at < ?2",
        params![session_id, now - TOOL_START_KEPT_SECONDS],
    )?;
    Ok(Outcome::Changed(conn.execute(
        "INSERT OR IGNORE INTO hermesd_tool_starts (session_id, call_id, started_at)
         VALUES (?1, ?2, ?3)",
        params![session_id, call_id, now],
    )?))
}

/// Marks an event `processing` as its turn starts, unless the journal already lists it as
/// answered or ignored (a turn for it ran elsewhere): then the start is refused. An event
/// the journal does not know is let through unmarked, as before.
pub fn start_inbound_turn(conn: &Connection, platform: &str, event_id: &str) -> StoreResult<()> {
    let marked = conn.execute(
        "UPDATE hermesd_inbound_events SET state = 'processing', updated_at = ?1
         WHERE platform = ?2 AND event_id = ?3 AND state IN ('received', 'processing')",
        params![now_epoch(), platform, event_id],
    )?;
    if marked == 0 {
        let known: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM hermesd_inbound_events
                            WHERE platform = ?1 AND event_id = ?2)",
            params![platform, event_id],
            |r| r.get(0),
        )?;
        if known {
            return Err(StoreError::AlreadyAnswered {
                platform: platform.to_owned(),
                event_id: event_id.to_owned(),
            });
        }
    }
    Ok(())
}

/// See [`crate::state::Store::fold_inbound`]. Run in the command's savepoint, so the
/// statements land together.
pub fn fold_inbound(
    conn: &Connection,
    platform: &str,
    keep: &str,
    payload_json: &str,
    absorbed: &[String],
) -> StoreResult<Outcome> {
    let mut received = conn.prepare_cached(
        "SELECT count(*) FROM hermesd_inbound_events
         WHERE platform = ?1 AND event_id = ?2 AND state = 'received'",
    )?;
    for event_id in std::iter::once(keep).chain(absorbed.iter().map(String::as_str)) {
        let found: i64 = received.query_row(params![platform, event_id], |row| row.get(0))?;
        if found == 0 {
            return Ok(Outcome::Changed(0));
        }
    }
    let now = now_epoch();
    conn.execute(
        "UPDATE hermesd_inbound_events SET payload_json = ?1, updated_at = ?2
         WHERE platform = ?3 AND event_id = ?4",
        params![payload_json, now, platform, keep],
    )?;
    for event_id in absorbed {
        conn.execute(
            "UPDATE hermesd_inbound_events SET state = 'answered', updated_at = ?1
             WHERE platform = ?2 AND event_id = ?3",
            params![now, platform, event_id],
        )?;
    }
    Ok(Outcome::Changed(1 + absorbed.len()))
}

/// Deletes finished (answered/ignored) events last updated before `before`.
pub fn prune_inbound(conn: &Connection, before: f64) -> StoreResult<Outcome> {
    Ok(Outcome::Changed(conn.execute(
        &format!(
            "DELETE FROM hermesd_inbound_events
             WHERE state NOT IN {UNFINISHED_STATES} AND updated_at < ?1"
        ),
        [before],
    )?))
}

/// Records the reply obligations for an event and marks it answered, in one savepoint: either
/// both happen or neither does. An unknown event is an error (and records nothing).
pub fn answer_inbound(
    conn: &Connection,
    platform: &str,
    event_id: &str,
    replies: &[NewObligation],
    owner: OwnerStamp,
) -> StoreResult<Outcome> {
    let ids: Vec<String> = replies.iter().map(NewObligation::obligation_id).collect();
    let joined = (!ids.is_empty()).then(|| ids.join(","));
    let changed = conn.execute(
        "UPDATE hermesd_inbound_events
         SET state = 'answered', updated_at = ?1, reply_obligation_id = ?2
         WHERE platform = ?3 AND event_id = ?4",
        params![now_epoch(), joined, platform, event_id],
    )?;
    if changed == 0 {
        return Err(StoreError::InboundNotFound {
            platform: platform.to_owned(),
            event_id: event_id.to_owned(),
        });
    }
    for reply in replies {
        insert_obligation(conn, reply, owner)?;
    }
    Ok(Outcome::Changed(replies.len()))
}

/// `answer_inbound` plus journaling `spawn` as `received`, in the command's savepoint. The
/// spawned event goes in first, so an already journaled one (the same `/background` run
/// twice) stops everything with `Changed(0)`; an unknown answered event rolls both back.
pub fn answer_and_spawn(
    conn: &Connection,
    (platform, event_id): (&str, &str),
    replies: &[NewObligation],
    owner: OwnerStamp,
    spawn: &NewInbound,
) -> StoreResult<Outcome> {
    let spawned = record_inbound(
        conn,
        &spawn.platform,
        &spawn.event_id,
        &spawn.session_key,
        &spawn.payload_json,
    )?;
    if spawned.changed() == 0 {
        return Ok(Outcome::Changed(0));
    }
    answer_inbound(conn, platform, event_id, replies, owner)?;
    Ok(Outcome::Changed(1))
}

/// `answer_inbound` with one reply that is delivered by editing `message_id` (noted in
/// `hermesd_reply_edits`), in the same transaction.
pub fn answer_inbound_by_edit(
    conn: &Connection,
    (platform, event_id): (&str, &str),
    reply: &NewObligation,
    message_id: &str,
    owner: OwnerStamp,
) -> StoreResult<Outcome> {
    let outcome = answer_inbound(conn, platform, event_id, std::slice::from_ref(reply), owner)?;
    conn.execute(
        "INSERT OR IGNORE INTO hermesd_reply_edits (obligation_id, message_id, created_at)
         VALUES (?1, ?2, ?3)",
        params![reply.obligation_id(), message_id, now_epoch()],
    )?;
    Ok(outcome)
}

/// Records one obligation as `pending`, owned by `owner`. Unlike Python's `INSERT OR REPLACE`,
/// re-recording an existing id keeps the row: a delivered reply is never reset to pending.
pub fn create_obligation(
    conn: &Connection,
    obligation: &NewObligation,
    owner: OwnerStamp,
) -> StoreResult<Outcome> {
    let inserted = insert_obligation(conn, obligation, owner)?;
    Ok(Outcome::Changed(inserted))
}

pub(crate) fn insert_obligation(
    conn: &Connection,
    o: &NewObligation,
    owner: OwnerStamp,
) -> StoreResult<usize> {
    let now = now_epoch();
    let thread_id = o.thread_id.as_deref().filter(|t| !t.is_empty());
    let mut stmt = conn.prepare_cached(
        "INSERT INTO delivery_obligations
             (obligation_id, session_key, platform, chat_id, thread_id, content, state,
              attempts, created_at, updated_at, owner_pid, owner_started_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', 0, ?7, ?7, ?8, ?9)
         ON CONFLICT(obligation_id) DO NOTHING",
    )?;
    Ok(stmt.execute(params![
        o.obligation_id(),
        o.session_key,
        o.platform,
        o.chat_id,
        thread_id,
        o.content,
        now,
        owner.pid,
        owner.started_at,
    ])?)
}

/// Claims an undelivered row for a send: `attempting`, one more attempt, owned by `owner`.
/// Delivered or abandoned rows are left alone (`Changed(0)`).
pub fn mark_attempting(conn: &Connection, id: &str, owner: OwnerStamp) -> StoreResult<Outcome> {
    Ok(Outcome::Changed(conn.execute(
        "UPDATE delivery_obligations
         SET state = 'attempting', attempts = attempts + 1, updated_at = ?1,
             owner_pid = ?2, owner_started_at = ?3, last_error = NULL
         WHERE obligation_id = ?4 AND state IN ('pending', 'attempting', 'failed')",
        params![now_epoch(), owner.pid, owner.started_at, id],
    )?))
}

pub fn mark_delivered(conn: &Connection, id: &str) -> StoreResult<Outcome> {
    Ok(Outcome::Changed(conn.execute(
        "UPDATE delivery_obligations SET state = 'delivered', updated_at = ?1, last_error = NULL
         WHERE obligation_id = ?2",
        params![now_epoch(), id],
    )?))
}

/// A definitive rejection; never overrides `delivered`.
pub fn mark_failed(conn: &Connection, id: &str, error: &str) -> StoreResult<Outcome> {
    let error: String = error.chars().take(MAX_ERROR_CHARS).collect();
    let error = (!error.is_empty()).then_some(error);
    Ok(Outcome::Changed(conn.execute(
        "UPDATE delivery_obligations SET state = 'failed', updated_at = ?1, last_error = ?2
         WHERE obligation_id = ?3 AND state != 'delivered'",
        params![now_epoch(), error, id],
    )?))
}

/// Flow control outlasted the delivery deadline before any part of the reply went out: the
/// row returns to `pending` (so a restart sends it without the recovered marker) and the
/// claim is not counted, because a platform saying "later" is not a failed attempt and must
/// not push the reply towards [`OBLIGATION_MAX_ATTEMPTS`]. Never overrides `delivered`.
/// Only `owner`'s send is reset, or one whose owner is gone: a send another live process is
/// making stays `attempting` (`Changed(0)`), as on PostgreSQL between instances. The writer
/// runs every command in turn, so nothing claims the row between the read and the update.
pub fn mark_deferred(
    conn: &Connection,
    id: &str,
    error: &str,
    owner: OwnerStamp,
) -> StoreResult<Outcome> {
    let holder: Option<(Option<i64>, Option<i64>)> = conn
        .query_row(
            "SELECT owner_pid, owner_started_at FROM delivery_obligations
             WHERE obligation_id = ?1 AND state = 'attempting'",
            params![id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((pid, started_at)) = holder else {
        return Ok(Outcome::Changed(0));
    };
    let ours = pid == Some(owner.pid) && started_at == owner.started_at;
    if !ours && owner_alive(pid, started_at) {
        return Ok(Outcome::Changed(0));
    }
    let error: String = error.chars().take(MAX_ERROR_CHARS).collect();
    let error = (!error.is_empty()).then_some(error);
    Ok(Outcome::Changed(conn.execute(
        "UPDATE delivery_obligations
         SET state = 'pending', attempts = MAX(attempts - 1, 0), updated_at = ?1, last_error = ?2
         WHERE obligation_id = ?3 AND state = 'attempting'",
        params![now_epoch(), error, id],
    )?))
}

/// Undelivered rows of dead owners that are over the attempt cap or older than
/// [`OBLIGATION_STALE_AFTER_SECONDS`] become `abandoned` (Python's sweep does the same before claiming).
pub fn abandon_stale(conn: &Connection, now: f64) -> StoreResult<Outcome> {
    let candidates: Vec<(String, Option<i64>, Option<i64>)> = conn
        .prepare(
            "SELECT obligation_id, owner_pid, owner_started_at FROM delivery_obligations
             WHERE state IN ('pending', 'attempting', 'failed')
               AND (attempts >= ?1 OR ?2 - created_at > ?3)",
        )?
        .query_map(
            params![OBLIGATION_MAX_ATTEMPTS, now, OBLIGATION_STALE_AFTER_SECONDS],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?
        .collect::<Result<_, _>>()?;
    let mut abandoned = 0;
    for (id, pid, started) in candidates {
        if owner_alive(pid, started) {
            continue;
        }
        abandoned += conn.execute(
            "UPDATE delivery_obligations SET state = 'abandoned', updated_at = ?1
             WHERE obligation_id = ?2",
            params![now, id],
        )?;
    }
    Ok(Outcome::Changed(abandoned))
}

/// Drops finished (delivered, abandoned) rows past retention, then keeps at most
/// [`OBLIGATION_MAX_ROWS`] finished rows, oldest going first. Owed rows (pending, attempting)
/// are never touched: unlike Hermes's cap, a long outage cannot delete replies still owed.
/// Run by the janitor, off the reply path, so no reply's commit waits on it.
pub fn prune_ledger(conn: &Connection, now: f64) -> StoreResult<Outcome> {
    let mut removed = conn.execute(
        "DELETE FROM delivery_obligations
         WHERE state IN ('delivered', 'abandoned') AND updated_at < ?1",
        [now - OBLIGATION_RETENTION_SECONDS],
    )?;
    let finished: i64 = conn.query_row(
        "SELECT COUNT(*) FROM delivery_obligations WHERE state IN ('delivered', 'abandoned')",
        [],
        |r| r.get(0),
    )?;
    let excess = (finished - OBLIGATION_MAX_ROWS).max(0);
    if excess > 0 {
        removed += conn.execute(
            "DELETE FROM delivery_obligations WHERE obligation_id IN (
                 SELECT obligation_id FROM delivery_obligations
                 WHERE state IN ('delivered', 'abandoned')
                 ORDER BY updated_at ASC
                 LIMIT ?1)",
            [excess],
        )?;
    }
    conn.execute(
        "DELETE FROM hermesd_reply_edits WHERE obligation_id NOT IN
             (SELECT obligation_id FROM delivery_obligations)",
        [],
    )?;
    Ok(Outcome::Changed(removed))
}

/// Upserts one routing entry; an empty key is ignored (as Python).
pub fn save_routing(
    conn: &Connection,
    scope: &str,
    key: &str,
    entry: &str,
) -> StoreResult<Outcome> {
    if key.is_empty() || entry.is_empty() {
        return Ok(Outcome::Changed(0));
    }
    Ok(Outcome::Changed(conn.execute(
        "INSERT INTO gateway_routing (scope, session_key, entry_json, updated_at)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(scope, session_key) DO UPDATE SET
             entry_json = excluded.entry_json, updated_at = excluded.updated_at",
        params![scope, key, entry, now_epoch()],
    )?))
}

pub fn delete_routing(conn: &Connection, scope: &str, keys: &[String]) -> StoreResult<Outcome> {
    let mut stmt =
        conn.prepare_cached("DELETE FROM gateway_routing WHERE scope = ?1 AND session_key = ?2")?;
    let mut deleted = 0;
    for key in keys {
        deleted += stmt.execute(params![scope, key])?;
    }
    Ok(Outcome::Changed(deleted))
}

/// The whole index of `scope` replaced in one savepoint; other scopes untouched.
pub fn replace_routing(
    conn: &Connection,
    scope: &str,
    entries: &[(String, String)],
) -> StoreResult<Outcome> {
    conn.execute("DELETE FROM gateway_routing WHERE scope = ?1", [scope])?;
    let now = now_epoch();
    let mut stmt = conn.prepare_cached(
        "INSERT INTO gateway_routing (scope, session_key, entry_json, updated_at)
         VALUES (?1, ?2, ?3, ?4)",
    )?;
    let mut inserted = 0;
    for (key, entry) in entries
        .iter()
        .filter(|(k, e)| !k.is_empty() && !e.is_empty())
    {
        inserted += stmt.execute(params![scope, key, entry, now])?;
    }
    Ok(Outcome::Changed(inserted))
}
