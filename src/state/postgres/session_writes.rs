//! Session and message writes on PostgreSQL (the counterpart of `state/commands.rs`): the same
//! statements, counters and outcomes, inside the transaction [`super::store::PgStore::apply`]
//! opened (fenced by the turn's lease when there is one).

use sqlx::{AssertSqlSafe, Row};

use super::extras::{self, Extras};
use super::pg_text::{opt_to_pg, to_pg};
use super::rows::db;
use super::titles::set_title;
use super::tx::PgTx;
use crate::state::commands::{Outcome, WriteCommand};
use crate::state::encode::{encode_content, encode_json, tool_call_count};
use crate::state::error::{StoreError, StoreResult};
use crate::state::ledger::InboundState;
use crate::state::model::{NewMessage, NewSession, TitleSource, UsageDelta, now_epoch};

/// PostgreSQL's SQLSTATE for a foreign-key violation.
const FOREIGN_KEY_VIOLATION: &str = "23503";

pub async fn apply(tx: &mut PgTx, command: WriteCommand, extras: &Extras) -> StoreResult<Outcome> {
    match command {
        WriteCommand::CreateSession(session) => create_session(tx, &session, extras).await,
        // First reason wins: an ended session keeps its original reason and time.
        WriteCommand::EndSession { id, reason } => {
            changed(
                tx,
                sqlx::query(
                    "UPDATE sessions SET ended_at = $1, end_reason = $2 \
                 WHERE id = $3 AND ended_at IS NULL",
                )
                .bind(now_epoch())
                .bind(reason)
                .bind(id),
            )
            .await
        }
        WriteCommand::ReopenSession { id } => {
            changed(
                tx,
                sqlx::query("UPDATE sessions SET ended_at = NULL, end_reason = NULL WHERE id = $1")
                    .bind(id),
            )
            .await
        }
        WriteCommand::AppendMessage(message) => append_message(tx, &message, extras).await,
        WriteCommand::StartTurn {
            message,
            platform,
            event_id,
        } => {
            // Refused when the journal lists the event as answered or ignored: a turn for
            // it ran elsewhere (an unknown event is let through, as on SQLite).
            let row = sqlx::query(
                "WITH marked AS (UPDATE hermesd_inbound_events SET state = $1, updated_at = $2 \
                   WHERE platform = $3 AND event_id = $4 AND state IN ('received', 'processing') \
                   RETURNING 1) \
                 SELECT EXISTS (SELECT 1 FROM marked) AS marked, \
                        EXISTS (SELECT 1 FROM hermesd_inbound_events \
                                 WHERE platform = $3 AND event_id = $4) AS known",
            )
            .bind(InboundState::Processing.as_str())
            .bind(now_epoch())
            .bind(&platform)
            .bind(&event_id)
            .fetch_one(&mut **tx)
            .await
            .map_err(db)?;
            let (marked, known): (bool, bool) = (row.get("marked"), row.get("known"));
            if known && !marked {
                return Err(StoreError::AlreadyAnswered { platform, event_id });
            }
            append_message(tx, &message, extras).await
        }
        WriteCommand::SetTitle { id, title } => {
            set_title(tx, &id, title.as_deref(), extras, TitleSource::User).await?;
            Ok(Outcome::Done)
        }
        WriteCommand::SetTitleIfEmpty { id, title } => {
            let current = sqlx::query("SELECT title FROM sessions WHERE id = $1 FOR UPDATE")
                .bind(&id)
                .fetch_optional(&mut **tx)
                .await
                .map_err(db)?;
            match current.map(|row| row.try_get::<Option<String>, _>(0)) {
                Some(Ok(None)) => {
                    set_title(tx, &id, Some(&title), extras, TitleSource::Generated).await?;
                    Ok(Outcome::Changed(1))
                }
                Some(Err(e)) => Err(db(e)),
                _ => Ok(Outcome::Changed(0)),
            }
        }
        WriteCommand::RecordUsage(usage) => record_usage(tx, &usage, extras).await,
        WriteCommand::ClearMessages { id } => {
            let removed = sqlx::query("DELETE FROM messages WHERE session_id = $1")
                .bind(&id)
                .execute(&mut **tx)
                .await
                .map_err(db)?;
            sqlx::query("UPDATE sessions SET message_count = 0, tool_call_count = 0 WHERE id = $1")
                .bind(&id)
                .execute(&mut **tx)
                .await
                .map_err(db)?;
            Ok(Outcome::Changed(removed.rows_affected() as usize))
        }
        WriteCommand::TruncateMessages { id, from_id } => {
            let removed = sqlx::query("DELETE FROM messages WHERE session_id = $1 AND id >= $2")
                .bind(&id)
                .bind(from_id)
                .execute(&mut **tx)
                .await
                .map_err(db)?;
            // A JSON list counts its length, any other value one call (as `tool_call_count`).
            sqlx::query(
                "UPDATE sessions SET \
                     message_count = (SELECT COUNT(*) FROM messages WHERE session_id = $1), \
                     tool_call_count = COALESCE((SELECT SUM(CASE \
                             WHEN tool_calls ~ '^\\s*\\[' THEN json_array_length(tool_calls::json) \
                             ELSE 1 END) \
                         FROM messages WHERE session_id = $1 AND tool_calls IS NOT NULL), 0) \
                 WHERE id = $1",
            )
            .bind(&id)
            .execute(&mut **tx)
            .await
            .map_err(db)?;
            Ok(Outcome::Changed(removed.rows_affected() as usize))
        }
        WriteCommand::DeleteSessions { ids } => delete_sessions(tx, &ids).await,
        other => Err(StoreError::Invalid(format!(
            "not a session command: {other:?}"
        ))),
    }
}

/// Runs one statement and reports how many rows it changed.
async fn changed(
    tx: &mut PgTx,
    query: sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments>,
) -> StoreResult<Outcome> {
    let done = query.execute(&mut **tx).await.map_err(db)?;
    Ok(Outcome::Changed(done.rows_affected() as usize))
}

async fn create_session(tx: &mut PgTx, s: &NewSession, extras: &Extras) -> StoreResult<Outcome> {
    let model_config = s.model_config.as_ref().map(|v| v.to_string());
    // A newer Hermes records the surface that created the session: its source.
    let (column, value, update) = if extras.created_source {
        (
            ", created_source",
            ", $2",
            ", created_source = COALESCE(sessions.created_source, EXCLUDED.created_source)",
        )
    } else {
        ("", "", "")
    };
    // An existing row keeps its values; the new call only fills columns that are NULL.
    let sql = format!(
        "INSERT INTO sessions (id, source, user_id, model, model_config, system_prompt, \
                               parent_session_id, started_at{column}) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8{value}) \
         ON CONFLICT (id) DO UPDATE SET \
             user_id = COALESCE(sessions.user_id, EXCLUDED.user_id), \
             model = COALESCE(sessions.model, EXCLUDED.model), \
             model_config = COALESCE(sessions.model_config, EXCLUDED.model_config), \
             system_prompt = COALESCE(sessions.system_prompt, EXCLUDED.system_prompt), \
             parent_session_id = COALESCE(sessions.parent_session_id, EXCLUDED.parent_session_id)\
             {update}"
    );
    sqlx::query(AssertSqlSafe(sql))
        .bind(&s.id)
        .bind(&s.source)
        .bind(&s.user_id)
        .bind(&s.model)
        .bind(opt_to_pg(model_config.as_deref()))
        .bind(opt_to_pg(s.system_prompt.as_deref()))
        .bind(&s.parent_session_id)
        .bind(s.started_at.unwrap_or_else(now_epoch))
        .execute(&mut **tx)
        .await
        .map_err(db)?;
    Ok(Outcome::Done)
}

async fn append_message(tx: &mut PgTx, m: &NewMessage, extras: &Extras) -> StoreResult<Outcome> {
    let (insert, values) = message_columns(extras);
    let sql = format!("{insert} VALUES ({values}) RETURNING id");
    let timestamp = message_timestamp(m);
    let insert = bind_message(sqlx::query(AssertSqlSafe(sql)), m, timestamp, extras);
    let inserted = insert.fetch_one(&mut **tx).await;
    let id: i64 = match inserted {
        Ok(row) => row.try_get(0).map_err(db)?,
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(FOREIGN_KEY_VIOLATION) => {
            return Err(StoreError::SessionNotFound(m.session_id.clone()));
        }
        Err(e) => return Err(db(e)),
    };
    let sql = format!(
        "UPDATE sessions SET message_count = COALESCE(message_count, 0) + 1, \
             tool_call_count = COALESCE(tool_call_count, 0) + $1{} WHERE id = $2",
        extras.activity_assignment(3)
    );
    let mut counters = sqlx::query(AssertSqlSafe(sql))
        .bind(tool_call_count(&m.tool_calls))
        .bind(&m.session_id);
    if extras.last_activity {
        counters = counters.bind(timestamp);
    }
    counters.execute(&mut **tx).await.map_err(db)?;
    Ok(Outcome::RowId(id))
}

/// The message row's `INSERT` up to its values, and those values `$1` to `$14` (`$15`, a
/// durable id in Hermes's form, where rows carry one), as [`bind_message`] binds them.
pub(super) fn message_columns(extras: &Extras) -> (String, String) {
    let count = if extras.message_uid { 15 } else { 14 };
    let uid_column = if extras.message_uid {
        ", message_uid"
    } else {
        ""
    };
    let insert = format!(
        "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, \
             timestamp, token_count, finish_reason, reasoning, reasoning_content, \
             reasoning_details, codex_reasoning_items, codex_message_items{uid_column})"
    );
    let values: Vec<String> = (1..=count).map(|n| format!("${n}")).collect();
    (insert, values.join(", "))
}

/// The time a message is stamped with (value `$7` of [`message_columns`]).
pub(super) fn message_timestamp(m: &NewMessage) -> f64 {
    m.timestamp.unwrap_or_else(now_epoch)
}

/// Binds [`message_columns`]'s values.
pub(super) fn bind_message<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    m: &'q NewMessage,
    timestamp: f64,
    extras: &Extras,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let json = |value| encode_json(value).map(|text| to_pg(&text).into_owned());
    let query = query
        .bind(&m.session_id)
        .bind(&m.role)
        .bind(opt_to_pg(encode_content(&m.content).as_deref()))
        .bind(&m.tool_call_id)
        .bind(json(&m.tool_calls))
        .bind(&m.tool_name)
        .bind(timestamp)
        .bind(m.token_count)
        .bind(&m.finish_reason)
        .bind(opt_to_pg(m.reasoning.as_deref()))
        .bind(opt_to_pg(m.reasoning_content.as_deref()))
        .bind(json(&m.reasoning_details))
        .bind(json(&m.codex_reasoning_items))
        .bind(json(&m.codex_message_items));
    match extras.message_uid {
        true => query.bind(crate::state::sqlite::newer::mint_uid()),
        false => query,
    }
}

async fn record_usage(tx: &mut PgTx, u: &UsageDelta, extras: &Extras) -> StoreResult<Outcome> {
    let sql = usage_update(extras);
    let update = bind_usage(sqlx::query(AssertSqlSafe(sql)), u, extras);
    let done = update.execute(&mut **tx).await.map_err(db)?;
    if done.rows_affected() == 0 {
        return Err(StoreError::SessionNotFound(u.session_id.clone()));
    }
    if extras.model_usage {
        extras::record_model_usage(tx, u).await?;
    }
    Ok(Outcome::Done)
}

/// The session counters' update for one usage delta, ending in its `WHERE` clause: values
/// `$1` to `$11`, and `$12` when the schema keeps the last activity (see [`bind_usage`]).
pub(super) fn usage_update(extras: &Extras) -> String {
    format!(
        "UPDATE sessions SET \
             input_tokens = COALESCE(input_tokens, 0) + $1, \
             output_tokens = COALESCE(output_tokens, 0) + $2, \
             cache_read_tokens = COALESCE(cache_read_tokens, 0) + $3, \
             cache_write_tokens = COALESCE(cache_write_tokens, 0) + $4, \
             reasoning_tokens = COALESCE(reasoning_tokens, 0) + $5, \
             api_call_count = COALESCE(api_call_count, 0) + $6, \
             estimated_cost_usd = CASE WHEN $7::double precision IS NULL THEN estimated_cost_usd \
                                       ELSE COALESCE(estimated_cost_usd, 0) + $7 END, \
             model = COALESCE($8, model), \
             billing_provider = COALESCE($9, billing_provider), \
             billing_base_url = COALESCE($10, billing_base_url){} \
         WHERE id = $11",
        extras.activity_assignment(12)
    )
}

/// How many values [`usage_update`] takes.
pub(super) fn usage_values(extras: &Extras) -> usize {
    if extras.last_activity { 12 } else { 11 }
}

/// Binds [`usage_update`]'s values.
pub(super) fn bind_usage<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    u: &'q UsageDelta,
    extras: &Extras,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let query = query
        .bind(u.input_tokens)
        .bind(u.output_tokens)
        .bind(u.cache_read_tokens)
        .bind(u.cache_write_tokens)
        .bind(u.reasoning_tokens)
        .bind(u.api_calls)
        .bind(u.estimated_cost_usd)
        .bind(&u.model)
        .bind(&u.billing_provider)
        .bind(&u.billing_base_url)
        .bind(&u.session_id);
    match extras.last_activity {
        true => query.bind(now_epoch()),
        false => query,
    }
}

/// Deletes sessions and their messages; their children are orphaned, not deleted.
async fn delete_sessions(tx: &mut PgTx, ids: &[String]) -> StoreResult<Outcome> {
    for sql in [
        "UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ANY($1)",
        "DELETE FROM messages WHERE session_id = ANY($1)",
    ] {
        sqlx::query(sql)
            .bind(ids)
            .execute(&mut **tx)
            .await
            .map_err(db)?;
    }
    changed(
        tx,
        sqlx::query("DELETE FROM sessions WHERE id = ANY($1)").bind(ids),
    )
    .await
}
