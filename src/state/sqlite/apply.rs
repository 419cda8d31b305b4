//! Applying each write command to state.db inside the writer's transaction.
//!
//! Only this module (with `gateway_commands`, the gateway's writes it dispatches to) and
//! `titles::set_title` issue SQL writes to the database, and only the
//! writer thread calls them.

use rusqlite::{Connection, params};

use super::capabilities::Capabilities;
use super::gateway_commands as gateway;
use super::newer;
use super::titles;
use crate::state::commands::{Outcome, WriteCommand};
use crate::state::encode::{encode_content, encode_json, tool_call_count};
use crate::state::error::{StoreError, StoreResult};
use crate::state::model::TitleSource;
use crate::state::model::{NewMessage, NewSession, UsageDelta, now_epoch};

/// Applies `command`; `caps` says what this database's Hermes version expects beside it.
pub fn apply(
    conn: &Connection,
    caps: &Capabilities,
    command: &WriteCommand,
) -> StoreResult<Outcome> {
    match command {
        WriteCommand::CreateSession(session) => create_session(conn, caps, session),
        WriteCommand::EndSession { id, reason } => Ok(Outcome::Changed(conn.execute(
            // First reason wins: an ended session keeps its original reason and time.
            "UPDATE sessions SET ended_at = ?1, end_reason = ?2 WHERE id = ?3 AND ended_at IS NULL",
            params![now_epoch(), reason, id],
        )?)),
        WriteCommand::ReopenSession { id } => Ok(Outcome::Changed(conn.execute(
            "UPDATE sessions SET ended_at = NULL, end_reason = NULL WHERE id = ?1",
            params![id],
        )?)),
        WriteCommand::AppendMessage(message) => append_message(conn, caps, message),
        WriteCommand::StartTurn {
            message,
            platform,
            event_id,
        } => {
            gateway::start_inbound_turn(conn, platform, event_id)?;
            append_message(conn, caps, message)
        }
        WriteCommand::SetTitle { id, title } => {
            titles::set_title(conn, caps, id, title.as_deref(), TitleSource::User)?;
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
                    titles::set_title(conn, caps, id, Some(title), TitleSource::Generated)?;
                    Ok(Outcome::Changed(1))
                }
                _ => Ok(Outcome::Changed(0)),
            }
        }
        WriteCommand::RecordUsage(usage) => record_usage(conn, caps, usage),
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
        WriteCommand::DeleteSessions { ids } => delete_sessions(conn, caps, ids),
        WriteCommand::EnsureGatewaySchema
        | WriteCommand::MarkToolStarted { .. }
        | WriteCommand::RecordInbound { .. }
        | WriteCommand::MarkInbound { .. }
        | WriteCommand::FoldInbound { .. }
        | WriteCommand::PruneInbound { .. }
        | WriteCommand::PruneLedger { .. }
        | WriteCommand::RecordDeadLetter { .. }
        | WriteCommand::ClaimCronRun { .. }
        | WriteCommand::FinishCronRun { .. }
        | WriteCommand::MarkCronRunRecorded { .. }
        | WriteCommand::AnswerInbound { .. }
        | WriteCommand::AnswerAndSpawn { .. }
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
        WriteCommand::MarkToolStarted {
            session_id,
            call_id,
        } => gateway::mark_tool_started(conn, session_id, call_id),
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
        WriteCommand::FoldInbound {
            platform,
            keep,
            payload_json,
            absorbed,
        } => gateway::fold_inbound(conn, platform, keep, payload_json, absorbed),
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
        } => super::cron_runs::claim(conn, job_id, *scheduled_at, session_id, *owner),
        WriteCommand::FinishCronRun { end, owner } => super::cron_runs::finish(conn, end, *owner),
        WriteCommand::MarkCronRunRecorded {
            job_id,
            scheduled_at,
        } => super::cron_runs::mark_recorded(conn, job_id, *scheduled_at),
        WriteCommand::AnswerInbound {
            platform,
            event_id,
            replies,
            owner,
        } => gateway::answer_inbound(conn, platform, event_id, replies, *owner),
        WriteCommand::AnswerAndSpawn {
            platform,
            event_id,
            replies,
            owner,
            spawn,
        } => gateway::answer_and_spawn(conn, (platform, event_id), replies, *owner, spawn),
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

fn create_session(conn: &Connection, caps: &Capabilities, s: &NewSession) -> StoreResult<Outcome> {
    let model_config = s.model_config.as_ref().map(|v| v.to_string());
    // A newer Hermes keeps the prompt once in `system_prompts` and only its hash on the row.
    let (inline_prompt, stored) = match (&s.system_prompt, caps.prompts_by_hash) {
        (Some(prompt), true) => (None, Some(newer::store_prompt(conn, prompt)?)),
        (prompt, _) => (prompt.clone(), None),
    };
    let hash = stored.as_ref().map(|(hash, _)| hash.clone());
    let mut columns = String::new();
    let mut values = String::new();
    let mut updates = String::new();
    if caps.prompts_by_hash {
        columns += ", system_prompt_hash";
        values += ", ?9";
        updates += ",\n system_prompt_hash = COALESCE(sessions.system_prompt_hash, excluded.system_prompt_hash)";
    }
    if caps.created_source {
        columns += ", created_source";
        values += ", ?2";
        updates +=
            ",\n created_source = COALESCE(sessions.created_source, excluded.created_source)";
    }
    // An existing row keeps its values; the new call only fills columns that are NULL.
    let sql = format!(
        "INSERT INTO sessions (id, source, user_id, model, model_config, system_prompt,
                               parent_session_id, started_at{columns})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8{values})
         ON CONFLICT(id) DO UPDATE SET
             user_id = COALESCE(sessions.user_id, excluded.user_id),
             model = COALESCE(sessions.model, excluded.model),
             model_config = COALESCE(sessions.model_config, excluded.model_config),
             system_prompt = COALESCE(sessions.system_prompt, excluded.system_prompt),
             parent_session_id = COALESCE(sessions.parent_session_id, excluded.parent_session_id){updates}"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut bound = vec![
        rusqlite::types::Value::from(s.id.clone()),
        s.source.clone().into(),
        s.user_id.clone().into(),
        s.model.clone().into(),
        model_config.into(),
        inline_prompt.into(),
        s.parent_session_id.clone().into(),
        s.started_at.unwrap_or_else(now_epoch).into(),
    ];
    if caps.prompts_by_hash {
        bound.push(hash.clone().into());
    }
    stmt.execute(rusqlite::params_from_iter(bound))?;
    // A row that already had a prompt keeps it; a prompt this call added for nothing goes.
    if let Some((hash, true)) = stored {
        newer::drop_unreferenced_prompts(conn, &[hash])?;
    }
    Ok(Outcome::Done)
}

fn append_message(conn: &Connection, caps: &Capabilities, m: &NewMessage) -> StoreResult<Outcome> {
    // Where rows carry a durable id, hermesd mints it as Hermes does rather than leaving it to
    // a trigger that may not exist.
    let (uid_column, uid_value) = if caps.message_uid {
        (", message_uid", ", ?15")
    } else {
        ("", "")
    };
    let mut insert = conn.prepare_cached(&format!(
        "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name,
             timestamp, token_count, finish_reason, reasoning, reasoning_content,
             reasoning_details, codex_reasoning_items, codex_message_items{uid_column})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14{uid_value})"
    ))?;
    let timestamp = m.timestamp.unwrap_or_else(now_epoch);
    let uid = caps.message_uid.then(newer::mint_uid);
    let mut bound: Vec<rusqlite::types::Value> = vec![
        m.session_id.clone().into(),
        m.role.clone().into(),
        encode_content(&m.content).into(),
        m.tool_call_id.clone().into(),
        encode_json(&m.tool_calls).into(),
        m.tool_name.clone().into(),
        timestamp.into(),
        m.token_count.into(),
        m.finish_reason.clone().into(),
        m.reasoning.clone().into(),
        m.reasoning_content.clone().into(),
        encode_json(&m.reasoning_details).into(),
        encode_json(&m.codex_reasoning_items).into(),
        encode_json(&m.codex_message_items).into(),
    ];
    if let Some(uid) = uid {
        bound.push(uid.into());
    }
    let inserted = insert.execute(rusqlite::params_from_iter(bound));
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
    newer::touch_activity(conn, caps, &m.session_id, timestamp)?;
    Ok(Outcome::RowId(id))
}

fn record_usage(conn: &Connection, caps: &Capabilities, u: &UsageDelta) -> StoreResult<Outcome> {
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
    if caps.model_usage {
        newer::record_model_usage(conn, u)?;
    }
    newer::touch_activity(conn, caps, &u.session_id, now_epoch())?;
    Ok(Outcome::Done)
}

fn delete_sessions(conn: &Connection, caps: &Capabilities, ids: &[String]) -> StoreResult<Outcome> {
    let prompts = if caps.prompts_by_hash {
        newer::prompt_hashes_of(conn, ids)?
    } else {
        Vec::new()
    };
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
    // Per-model usage rows go with their session (Hermes declares ON DELETE CASCADE), and so
    // does a prompt no remaining session uses.
    newer::drop_unreferenced_prompts(conn, &prompts)?;
    Ok(Outcome::Changed(deleted))
}
