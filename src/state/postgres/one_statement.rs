//! Write commands that are one statement, run as one: no `BEGIN` and `COMMIT` around them
//! (PostgreSQL commits a lone statement by itself), and, under a session lease, no separate
//! fence check either: the statement checks the lease itself.
//!
//! A fenced statement reads the lease row in a `WITH fence` part, locked `FOR SHARE` until
//! the statement commits, and writes only through rows of that part; it answers whether the
//! lease was current (`held`) and how many rows it wrote (`changed`). A takeover updates
//! the lease row, so it waits until the statement has committed, and a statement that
//! started after a takeover sees the new token and writes nothing: the same guarantee as
//! the fenced transaction (`lease::begin_fenced`), in one round trip instead of four.
//!
//! A lone statement meets a pooled connection that broke while idle with no `BEGIN` before
//! it to fail instead. One whose second run changes nothing the first did not goes through
//! [`retried`]; one that must not run twice (it counts) is sent on a connection that has just
//! answered a ping ([`live_connection`]), as sqlx's default pool would have done.

use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Row};

use super::PgStore;
use super::gateway_writes::{record_inbound, save_routing};
use super::lease::{Lease, lost};
use super::ledger_writes::{
    OBLIGATION_INSERT, Owner, bind_obligation, mark_attempting, mark_delivered, mark_failed,
};
use super::retry::{live_connection, retried};
use super::rows::db;
use super::session_writes::{
    bind_message, bind_usage, message_columns, message_timestamp, usage_update, usage_values,
};
use crate::state::commands::{Outcome, WriteCommand};
use crate::state::encode::tool_call_count;
use crate::state::error::{StoreError, StoreResult};
use crate::state::ledger::{InboundState, NewObligation};
use crate::state::model::{NewMessage, UsageDelta, now_epoch};

/// PostgreSQL's SQLSTATE for a foreign-key violation (a message for a session that is gone).
const FOREIGN_KEY_VIOLATION: &str = "23503";

/// The lease check every fenced statement starts with: the lease's scope, key and token
/// are values `$first` to `$first + 2`.
fn fence_part(first: usize) -> String {
    let (scope, key, token) = (first, first + 1, first + 2);
    format!(
        "fence AS MATERIALIZED ( \
             SELECT 1 FROM hermesd_leases \
             WHERE scope = ${scope} AND key = ${key} AND token = ${token} \
               AND expires_at > now() FOR SHARE)"
    )
}

/// Binds the lease's scope, key and token for [`fence_part`].
fn bind_fence<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    lease: &'q Lease,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    query
        .bind(lease.scope.as_str())
        .bind(&lease.key)
        .bind(lease.token)
}

/// What [`apply`] did with a command.
pub(super) enum Alone {
    /// Applied as one statement.
    Done(Outcome),
    /// Not one statement: for a transaction.
    NotAlone(WriteCommand),
}

/// Applies `command` as one statement when it is one.
pub(super) async fn apply(
    store: &PgStore,
    command: WriteCommand,
    fence: Option<&Lease>,
) -> StoreResult<Alone> {
    use WriteCommand as W;
    let pool = store.pool();
    let outcome = match (command, fence) {
        (
            W::RecordInbound {
                platform,
                event_id,
                session_key,
                payload_json,
            },
            None,
        ) => {
            let recorded = (&*platform, &*event_id, &*session_key, &*payload_json);
            record_inbound(retried(pool), recorded).await?
        }
        (W::MarkDelivered { id }, None) => mark_delivered(retried(pool), &id).await?,
        (W::MarkFailed { id, error }, None) => mark_failed(retried(pool), &id, &error).await?,
        (
            W::SaveRouting {
                scope,
                session_key,
                entry_json,
            },
            None,
        ) => save_routing(retried(pool), &scope, &session_key, &entry_json).await?,
        (
            W::SaveRouting {
                scope,
                session_key,
                entry_json,
            },
            Some(lease),
        ) => save_routing_fenced(store, (&scope, &session_key, &entry_json), lease).await?,
        (W::MarkAttempting { id, owner }, None) => {
            let mut conn = live_connection(pool).await.map_err(db)?;
            let instance = store.instance_owner();
            mark_attempting(&mut *conn, &id, Owner::new(owner, &instance)).await?
        }
        (W::AppendMessage(message), Some(lease)) => {
            turn_message(store, &message, None, lease).await?
        }
        (
            W::StartTurn {
                message,
                platform,
                event_id,
            },
            Some(lease),
        ) => turn_message(store, &message, Some((&platform, &event_id)), lease).await?,
        (
            W::AnswerInbound {
                platform,
                event_id,
                replies,
                owner,
            },
            Some(lease),
        ) if replies.len() == 1 => {
            let instance = store.instance_owner();
            let owner = Owner::new(owner, &instance);
            answer_inbound(store, (&platform, &event_id), &replies[0], owner, lease).await?
        }
        // The model's usage table, when the schema has it, takes a second statement.
        (W::RecordUsage(usage), fence) if !store.extras().model_usage => {
            record_usage(store, &usage, fence).await?
        }
        (command, _) => return Ok(Alone::NotAlone(command)),
    };
    Ok(Alone::Done(outcome))
}

/// `dml` (an `INSERT` or `UPDATE` that writes only through rows of `fence`) made a fenced
/// statement: the lease's scope, key and token are values `$first` to `$first + 2`.
fn fenced(dml: &str, first: usize) -> String {
    format!(
        "WITH {}, w AS ({dml} RETURNING 1) \
         SELECT (SELECT count(*) FROM fence) AS held, (SELECT count(*) FROM w) AS changed",
        fence_part(first)
    )
}

/// A fenced statement's answer: the rows it wrote, or the lease lost.
fn fenced_answer(row: &PgRow, lease: &Lease) -> StoreResult<usize> {
    let held: i64 = row.try_get("held").map_err(db)?;
    if held == 0 {
        return Err(lost(lease).into_shared());
    }
    let changed: i64 = row.try_get("changed").map_err(db)?;
    Ok(usize::try_from(changed).unwrap_or(usize::MAX))
}

/// The routing upsert under `lease`. Running it twice leaves the same row.
async fn save_routing_fenced(
    store: &PgStore,
    (scope, session_key, entry_json): (&str, &str, &str),
    lease: &Lease,
) -> StoreResult<Outcome> {
    if session_key.is_empty() || entry_json.is_empty() {
        return Ok(Outcome::Changed(0));
    }
    let sql = fenced(
        "INSERT INTO gateway_routing (scope, session_key, entry_json, updated_at) \
         SELECT $1, $2, $3, $4 FROM fence \
         ON CONFLICT (scope, session_key) DO UPDATE SET \
             entry_json = EXCLUDED.entry_json, updated_at = EXCLUDED.updated_at",
        5,
    );
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(scope)
        .bind(session_key)
        .bind(entry_json)
        .bind(now_epoch());
    let row = bind_fence(row, lease)
        .fetch_one(retried(store.pool()))
        .await
        .map_err(db)?;
    Ok(Outcome::Changed(fenced_answer(&row, lease)?))
}

/// The session's counters moved by `usage`, under `fence` when there is one. It adds, so it
/// must not run twice: it is sent on a connection that has just answered a ping.
async fn record_usage(
    store: &PgStore,
    usage: &UsageDelta,
    fence: Option<&Lease>,
) -> StoreResult<Outcome> {
    let extras = store.extras();
    let mut conn = live_connection(store.pool()).await.map_err(db)?;
    let changed = match fence {
        None => {
            let query = bind_usage(
                sqlx::query(AssertSqlSafe(usage_update(extras))),
                usage,
                extras,
            );
            let done = query.execute(&mut *conn).await.map_err(db)?;
            usize::try_from(done.rows_affected()).unwrap_or(usize::MAX)
        }
        Some(lease) => {
            let dml = format!("{} AND EXISTS (SELECT 1 FROM fence)", usage_update(extras));
            let sql = fenced(&dml, usage_values(extras) + 1);
            let query = bind_usage(sqlx::query(AssertSqlSafe(sql)), usage, extras);
            let row = bind_fence(query, lease)
                .fetch_one(&mut *conn)
                .await
                .map_err(db)?;
            fenced_answer(&row, lease)?
        }
    };
    if changed == 0 {
        return Err(StoreError::SessionNotFound(usage.session_id.clone()));
    }
    Ok(Outcome::Done)
}

/// A message of the turn under `lease`, with the session's counters (`AppendMessage`), and
/// its inbound event marked `processing` when it starts the turn (`StartTurn`): one
/// statement. It adds a row, so it must not run twice: it is sent on a connection that has
/// just answered a ping.
async fn turn_message(
    store: &PgStore,
    message: &NewMessage,
    started: Option<(&str, &str)>,
    lease: &Lease,
) -> StoreResult<Outcome> {
    let extras = store.extras();
    let (insert, values) = message_columns(extras);
    let count = if extras.message_uid { 15 } else { 14 };
    // The message's values, its tool calls, the event's (four), the lease's (three).
    let tools = count + 1;
    let event = tools + 1;
    // `go`: the lease is held and, when the message starts a turn, its event is not one the
    // journal lists as answered or ignored (a turn for it ran elsewhere: `AlreadyAnswered`).
    let (go_part, started_part) = match started {
        Some(_) => (
            format!(
                "go AS MATERIALIZED (SELECT 1 FROM fence WHERE NOT EXISTS ( \
                     SELECT 1 FROM hermesd_inbound_events WHERE platform = ${} \
                     AND event_id = ${} AND state NOT IN ('received', 'processing')))",
                event + 2,
                event + 3
            ),
            format!(
                ", e AS (UPDATE hermesd_inbound_events SET state = ${}, updated_at = ${} \
                      WHERE platform = ${} AND event_id = ${} AND EXISTS (SELECT 1 FROM go))",
                event,
                event + 1,
                event + 2,
                event + 3
            ),
        ),
        None => ("go AS (SELECT 1 FROM fence)".to_owned(), String::new()),
    };
    let lease_first = if started.is_some() { event + 4 } else { event };
    let sql = format!(
        "WITH {fence}, {go_part}, \
         m AS ({insert} SELECT {values} FROM go RETURNING id), \
         s AS (UPDATE sessions SET message_count = COALESCE(message_count, 0) + 1, \
                   tool_call_count = COALESCE(tool_call_count, 0) + ${tools}{activity} \
               WHERE id = $1 AND EXISTS (SELECT 1 FROM go)){started_part} \
         SELECT (SELECT count(*) FROM fence) AS held, (SELECT count(*) FROM go) AS go, \
                (SELECT id FROM m) AS id",
        fence = fence_part(lease_first),
        // The message's own time, `$7`, as the unfenced write does.
        activity = extras.activity_assignment(7),
    );
    let timestamp = message_timestamp(message);
    let mut query = bind_message(sqlx::query(AssertSqlSafe(sql)), message, timestamp, extras)
        .bind(tool_call_count(&message.tool_calls));
    if let Some((platform, event_id)) = started {
        query = query
            .bind(InboundState::Processing.as_str())
            .bind(now_epoch())
            .bind(platform)
            .bind(event_id);
    }
    let mut conn = live_connection(store.pool()).await.map_err(db)?;
    let row = match bind_fence(query, lease).fetch_one(&mut *conn).await {
        Ok(row) => row,
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(FOREIGN_KEY_VIOLATION) => {
            return Err(StoreError::SessionNotFound(message.session_id.clone()));
        }
        Err(e) => return Err(db(e)),
    };
    let held: i64 = row.try_get("held").map_err(db)?;
    if held == 0 {
        return Err(lost(lease).into_shared());
    }
    let go: i64 = row.try_get("go").map_err(db)?;
    if let (0, Some((platform, event_id))) = (go, started) {
        return Err(StoreError::AlreadyAnswered {
            platform: platform.to_owned(),
            event_id: event_id.to_owned(),
        });
    }
    let id: i64 = row.try_get("id").map_err(db)?;
    Ok(Outcome::RowId(id))
}

/// The turn's inbound event marked `answered` with its one reply recorded as owed, under
/// `lease`: one statement, which records the reply only when it marked the event (an
/// unknown event writes nothing and is an error, as in the transaction). Running it twice
/// leaves the same rows (the reply's id is fixed, and an existing one is kept).
async fn answer_inbound(
    store: &PgStore,
    (platform, event_id): (&str, &str),
    reply: &NewObligation,
    owner: Owner<'_>,
    lease: &Lease,
) -> StoreResult<Outcome> {
    let sql = format!(
        "WITH {fence}, \
         e AS (UPDATE hermesd_inbound_events \
               SET state = 'answered', updated_at = $12, reply_obligation_id = $1 \
               WHERE platform = $13 AND event_id = $14 AND EXISTS (SELECT 1 FROM fence) \
               RETURNING 1), \
         o AS ({OBLIGATION_INSERT} \
               SELECT $1, $2, $3, $4, $5, $6, 'pending', 0, $7, $7, $8, $9, $10, $11 FROM e \
               ON CONFLICT (obligation_id) DO NOTHING) \
         SELECT (SELECT count(*) FROM fence) AS held, (SELECT count(*) FROM e) AS changed",
        fence = fence_part(15),
    );
    let query = bind_obligation(sqlx::query(AssertSqlSafe(sql)), reply, owner)
        .bind(now_epoch())
        .bind(platform)
        .bind(event_id);
    let row = bind_fence(query, lease)
        .fetch_one(retried(store.pool()))
        .await
        .map_err(db)?;
    if fenced_answer(&row, lease)? == 0 {
        return Err(StoreError::InboundNotFound {
            platform: platform.to_owned(),
            event_id: event_id.to_owned(),
        });
    }
    Ok(Outcome::Changed(1))
}
