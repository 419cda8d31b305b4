//! Applying each write command to state.db inside the writer's transaction.
//!
//! Only this module (with `gateway_commands`, the gateway's writes it dispatches to) and
//! `titles::set_title` issue SQL writes to the database, and only the
//! writer thread calls them.

use rusqlite::{Connection, params};

use super::gateway_commands as gateway;
use super::titles;
use crate::state::commands::{Outcome, WriteCommand};
use crate::state::encode::{encode_content, encode_json, tool_call_count};
use crate::state::error::{StoreError, StoreResult};
use crate::state::ledger::InboundState;
use crate::state::model::{NewMessage, NewSession, UsageDelta, now_epoch};

pub fn apply(conn: &Connection, command: &WriteCommand) -> StoreResult<Outcome> {
    match command {
        WriteCommand::CreateSession(session) => create_session(conn, session),
        WriteCommand::EndSession { id, reason } => Ok(Outcome::Changed(conn.execute(
            // First reason wins: an ended session keeps its original reason and time.
            "UPDATE sessions SET ended_at = ?1, end_reason = ?2 WHERE id = ?3 AND ended_at IS NULL",
            params![now_epoch(), reason, id],
        )?)),
        WriteCommand::ReopenSession { id } => Ok(Outcome::Changed(conn.execute(
            "UPDATE sessions SET ended_at = NULL, end_reason = NULL WHERE id = ?1",
            params![id],
        )?)),
        WriteCommand::AppendMessage(message) => append_message(conn, message),
        WriteCommand::StartTurn {
            message,
            platform,
            event_id,
        } => {
            let appended = append_message(conn, message)?;
            gateway::mark_inbound(conn, platform, event_id, InboundState::Processing.as_str())?;
            Ok(appended)
        }
        WriteCommand::SetTitle { id, title } => {
            titles::set_title(conn, id, title.as_deref())?;
            Ok(Outcome::Done)
        }
        WriteCommand::SetTitleIfEmpty { id, title } => {
            let current: Option<Option<String>> = rusqlite::OptionalExtension::optional(
                conn.query_row("SELECT title FROM sessions WHERE id = ?1", [id], |r| {
                    r.get(0)
                }),
            )?;
            match current {
                Some(None) => {
                    titles::set_title(conn, id, Some(title))?;
                    Ok(Outcome::Changed(1))
                }
                _ => Ok(Outcome::Changed(0)),
            }
        }
        WriteCommand::RecordUsage(usage) => record_usage(conn, usage),
        WriteCommand::ClearMessages { id } => {
            let removed = conn.execute("DELETE FROM messages WHERE session_id = ?1", [id])?;
            conn.execute(
                "UPDATE sessions SET message_count = 0, tool_call_count = 0 WHERE id = ?1",
                [id],
            )?;
            Ok(Outcome::Changed(removed))
        }
        WriteCommand::TruncateMessages { id, from_id } => {
            let removed = conn.execute(
                "DELETE FROM messages WHERE session_id = ?1 AND id >= ?2",
                params![id, from_id],
            )?;
            conn.execute(
                "UPDATE sessions SET
                     message_count = (SELECT COUNT(*) FROM messages WHERE session_id = ?1),
                     tool_call_count = COALESCE((SELECT SUM(CASE json_type(tool_calls)
                                     WHEN 'array' THEN json_array_length(tool_calls) ELSE 1 END)
                                 FROM messages WHERE session_id = ?1 AND tool_calls IS NOT NULL), 0)
                 WHERE id = ?1",
                [id],
            )?;
            Ok(Outcome::Changed(removed))
        }
        WriteCommand::DeleteSessions { ids } => delete_sessions(conn, ids),
        WriteCommand::EnsureGatewaySchema
        | WriteCommand::RecordInbound { .. }
        | WriteCommand::MarkInbound { .. }
        | WriteCommand::PruneInbound { .. }
        | WriteCommand::PruneLedger { .. }
        | WriteCommand::RecordDeadLetter { .. }
        | WriteCommand::ClaimCronRun { .. }
        | WriteCommand::FinishCronRun { .. }
        | WriteCommand::MarkCronRunRecorded { .. }
        | WriteCommand::AnswerInbound { .. }
        | WriteCommand::CreateObligation { .. }
        | WriteCommand::AnswerInboundByEdit { .. }
        | WriteCommand::MarkAttempting { .. }
        | WriteCommand::MarkDelivered { .. }
        | WriteCommand::MarkFailed { .. }
        | WriteCommand::MarkDeferred { .. }
        | WriteCommand::AbandonStale { .. }
        | WriteCommand::SaveRouting { .. }
        | WriteCommand::DeleteRouting { .. }
        | WriteCommand::ReplaceRouting { .. } => apply_gateway(conn, command),
    }
}

fn apply_gateway(conn: &Connection, command: &WriteCommand) -> StoreResult<Outcome> {
    match command {
        WriteCommand::EnsureGatewaySchema => {
            super::gateway_schema::ensure(conn)?;
            Ok(Outcome::Done)
        }
        WriteCommand::RecordInbound {
            platform,
            event_id,
            session_key,
            payload_json,
        } => gateway::record_inbound(conn, platform, event_id, session_key, payload_json),
        WriteCommand::MarkInbound {
            platform,
            event_id,
            state,
        } => gateway::mark_inbound(conn, platform, event_id, state.as_str()),
        WriteCommand::PruneInbound { before } => gateway::prune_inbound(conn, *before),
        WriteCommand::PruneLedger { now } => gateway::prune_ledger(conn, *now),
        WriteCommand::RecordDeadLetter {
            platform,
            item_id,
            chat_id,
            raw,
            error,
        } => crate::state::dead_letters::record(
            conn,
            platform,
            item_id,
            chat_id.as_deref(),
            raw,
            error,
        ),
        WriteCommand::ClaimCronRun {
            job_id,
            scheduled_at,
            session_id,
            owner,
        } => crate::state::cron_runs::claim(conn, job_id, *scheduled_at, session_id, *owner),
        WriteCommand::FinishCronRun { end, owner } => {
            crate::state::cron_runs::finish(conn, end, *owner)
        }
        WriteCommand::MarkCronRunRecorded {
            job_id,
            scheduled_at,
        } => crate::state::cron_runs::mark_recorded(conn, job_id, *scheduled_at),
        WriteCommand::AnswerInbound {
            platform,
            event_id,
            replies,
            owner,
        } => gateway::answer_inbound(conn, platform, event_id, replies, *owner),
        WriteCommand::CreateObligation { obligation, owner } => {
            gateway::create_obligation(conn, obligation, *owner)
        }
        WriteCommand::AnswerInboundByEdit {
            platform,
            event_id,
            reply,
            message_id,
            owner,
        } => gateway::answer_inbound_by_edit(conn, (platform, event_id), reply, message_id, *owner),
        WriteCommand::MarkAttempting { id, owner } => gateway::mark_attempting(conn, id, *owner),
        WriteCommand::MarkDelivered { id } => gateway::mark_delivered(conn, id),
        WriteCommand::MarkFailed { id, error } => gateway::mark_failed(conn, id, error),
        WriteCommand::MarkDeferred { id, error, owner } => {
            gateway::mark_deferred(conn, id, error, *owner)
        }
        WriteCommand::AbandonStale { now } => gateway::abandon_stale(conn, *now),
        WriteCommand::SaveRouting {
            scope,
            session_key,
            entry_json,
        } => gateway::save_routing(conn, scope, session_key, entry_json),
        WriteCommand::DeleteRouting {
            scope,
            session_keys,
        } => gateway::delete_routing(conn, scope, session_keys),
        WriteCommand::ReplaceRouting { scope, entries } => {
            gateway::replace_routing(conn, scope, entries)
        }
        other => Err(StoreError::Invalid(format!(
            "not a gateway command: {other:?}"
        ))),
    }
}

fn create_session(conn: &Connection, s: &NewSession) -> StoreResult<Outcome> {
    let model_config = s.model_config.as_ref().map(|v| v.to_string());
    // An existing row keeps its values; the new call only fills columns that are NULL.
    let mut stmt = conn.prepare_cached(
        "INSERT INTO sessions (id, source, user_id, model, model_config, system_prompt,
                               parent_session_id, started_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT(id) DO UPDATE SET
             user_id = COALESCE(sessions.user_id, excluded.user_id),
             model = COALESCE(sessions.model, excluded.model),
             model_config = COALESCE(sessions.model_config, excluded.model_config),
             system_prompt = COALESCE(sessions.system_prompt, excluded.system_prompt),
             parent_session_id = COALESCE(sessions.parent_session_id, excluded.parent_session_id)",
    )?;
    stmt.execute(params![
        s.id,
        s.source,
        s.user_id,
        s.model,
        model_config,
        s.system_prompt,
        s.parent_session_id,
        s.started_at.unwrap_or_else(now_epoch),
    ])?;
    Ok(Outcome::Done)
}

fn append_message(conn: &Connection, m: &NewMessage) -> StoreResult<Outcome> {
    let mut insert = conn.prepare_cached(
        "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name,
             timestamp, token_count, finish_reason, reasoning, reasoning_content,
             reasoning_details, codex_reasoning_items, codex_message_items)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?;
    let inserted = insert.execute(params![
        m.session_id,
        m.role,
        encode_content(&m.content),
        m.tool_call_id,
        encode_json(&m.tool_calls),
        m.tool_name,
        m.timestamp.unwrap_or_else(now_epoch),
        m.token_count,
        m.finish_reason,
        m.reasoning,
        m.reasoning_content,
        encode_json(&m.reasoning_details),
        encode_json(&m.codex_reasoning_items),
        encode_json(&m.codex_message_items),
    ]);
    if let Err(e) = inserted {
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) {
            return Err(StoreError::SessionNotFound(m.session_id.clone()));
        }
        return Err(e.into());
    }
    let id = conn.last_insert_rowid();
    let mut counters = conn.prepare_cached(
        "UPDATE sessions SET message_count = COALESCE(message_count, 0) + 1,
             tool_call_count = COALESCE(tool_call_count, 0) + ?1 WHERE id = ?2",
    )?;
    counters.execute(params![tool_call_count(&m.tool_calls), m.session_id])?;
    Ok(Outcome::RowId(id))
}

fn record_usage(conn: &Connection, u: &UsageDelta) -> StoreResult<Outcome> {
    let changed = conn.execute(
        "UPDATE sessions SET
             input_tokens = COALESCE(input_tokens, 0) + ?1,
             output_tokens = COALESCE(output_tokens, 0) + ?2,
             cache_read_tokens = COALESCE(cache_read_tokens, 0) + ?3,
             cache_write_tokens = COALESCE(cache_write_tokens, 0) + ?4,
             reasoning_tokens = COALESCE(reasoning_tokens, 0) + ?5,
             api_call_count = COALESCE(api_call_count, 0) + ?6,
             estimated_cost_usd = CASE WHEN ?7 IS NULL THEN estimated_cost_usd
                                       ELSE COALESCE(estimated_cost_usd, 0) + ?7 END,
             model = COALESCE(?8, model),
             billing_provider = COALESCE(?9, billing_provider),
             billing_base_url = COALESCE(?10, billing_base_url)
         WHERE id = ?11",
        params![
            u.input_tokens,
            u.output_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
            u.reasoning_tokens,
            u.api_calls,
            u.estimated_cost_usd,
            u.model,
            u.billing_provider,
            u.billing_base_url,
            u.session_id,
        ],
    )?;
    if changed == 0 {
        return Err(StoreError::SessionNotFound(u.session_id.clone()));
    }
    Ok(Outcome::Done)
}

fn delete_sessions(conn: &Connection, ids: &[String]) -> StoreResult<Outcome> {
    let mut orphan = conn.prepare_cached(
        "UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ?1",
    )?;
    let mut messages = conn.prepare_cached("DELETE FROM messages WHERE session_id = ?1")?;
    let mut session = conn.prepare_cached("DELETE FROM sessions WHERE id = ?1")?;
    let mut deleted = 0;
    for id in ids {
        orphan.execute([id])?;
        messages.execute([id])?;
        deleted += session.execute([id])?;
    }
    Ok(Outcome::Changed(deleted))
}
