//! Read queries, run on pooled read-only connections. No writes happen here.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::{Map, Value};

use crate::state::encode::{text, text_or_empty};
use crate::state::error::{StoreError, StoreResult};
use crate::state::model::{
    Content, LineageEntry, Message, ModelStats, Session, SessionExport, SessionSummary, UsageGroup,
};
use crate::state::sqlite::schema::SchemaInfo;
use crate::state::sqlite::titles::escape_like;

pub const SESSION_COLUMNS: &str = "s.id, s.source, s.user_id, s.model, s.model_config, \
    s.system_prompt, s.parent_session_id, s.started_at, s.ended_at, s.end_reason, \
    s.message_count, s.tool_call_count, s.input_tokens, s.output_tokens, s.cache_read_tokens, \
    s.cache_write_tokens, s.reasoning_tokens, s.billing_provider, s.billing_base_url, \
    s.estimated_cost_usd, s.actual_cost_usd, s.title, s.api_call_count";
pub const SESSION_COLUMN_COUNT: usize = 23;

/// [`SESSION_COLUMNS`] for a database that keeps prompts by hash: the prompt is read from
/// `system_prompts` (an inline prompt written before the move still wins, as in Hermes).
const SESSION_COLUMNS_PROMPT_BY_HASH: &str = "s.id, s.source, s.user_id, s.model, s.model_config, \
    COALESCE(s.system_prompt, (SELECT sp.prompt FROM system_prompts sp \
        WHERE sp.hash = s.system_prompt_hash)), s.parent_session_id, s.started_at, s.ended_at, \
    s.end_reason, s.message_count, s.tool_call_count, s.input_tokens, s.output_tokens, \
    s.cache_read_tokens, s.cache_write_tokens, s.reasoning_tokens, s.billing_provider, \
    s.billing_base_url, s.estimated_cost_usd, s.actual_cost_usd, s.title, s.api_call_count";

/// The session columns to select from this database.
pub fn session_columns(info: &SchemaInfo) -> &'static str {
    if info.caps.prompts_by_hash {
        SESSION_COLUMNS_PROMPT_BY_HASH
    } else {
        SESSION_COLUMNS
    }
}

pub const MESSAGE_COLUMNS: &str = "m.id, m.session_id, m.role, m.content, m.tool_call_id, \
    m.tool_calls, m.tool_name, m.timestamp, m.token_count, m.finish_reason, m.reasoning, \
    m.reasoning_content, m.reasoning_details, m.codex_reasoning_items, m.codex_message_items";

pub fn session_from_row(r: &Row<'_>) -> rusqlite::Result<Session> {
    crate::state::sqlite::columns::session(r)
}

fn message_from_row(r: &Row<'_>) -> rusqlite::Result<Message> {
    crate::state::sqlite::columns::message(r)
}

/// Visibility filter for databases a newer Hermes has compacted (`messages.active`).
pub fn active_filter(info: &SchemaInfo) -> &'static str {
    if info.has_active_column {
        " AND (m.active = 1 OR m.active IS NULL)"
    } else {
        ""
    }
}

pub fn get_session(conn: &Connection, info: &SchemaInfo, id: &str) -> StoreResult<Option<Session>> {
    let sql = format!(
        "SELECT {} FROM sessions s WHERE s.id = ?1",
        session_columns(info)
    );
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([id], session_from_row)
        .optional()?)
}

/// An exact id, or the one session whose id starts with `prefix`.
pub fn resolve_session_id(conn: &Connection, prefix: &str) -> StoreResult<String> {
    let exact: Option<i64> = conn
        .query_row("SELECT 1 FROM sessions WHERE id = ?1", [prefix], |r| {
            r.get(0)
        })
        .optional()?;
    if exact.is_some() {
        return Ok(prefix.to_owned());
    }
    let mut stmt =
        conn.prepare_cached("SELECT id FROM sessions WHERE id LIKE ?1 ESCAPE '\\' LIMIT 2")?;
    let ids: Vec<String> = stmt
        .query_map([format!("{}%", escape_like(prefix))], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    match ids.len() {
        0 => Err(StoreError::SessionNotFound(prefix.to_owned())),
        1 => Ok(ids.into_iter().next().unwrap_or_default()),
        _ => {
            let count: i64 = conn.query_row(
                "SELECT count(*) FROM sessions WHERE id LIKE ?1 ESCAPE '\\'",
                [format!("{}%", escape_like(prefix))],
                |r| r.get(0),
            )?;
            Err(StoreError::AmbiguousPrefix {
                prefix: prefix.to_owned(),
                count: count as usize,
            })
        }
    }
}

/// A session's messages in insertion (`id`) order.
pub fn get_messages(conn: &Connection, info: &SchemaInfo, id: &str) -> StoreResult<Vec<Message>> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.session_id = ?1{} ORDER BY m.id",
        active_filter(info)
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map([id], message_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The messages as an OpenAI-style conversation, for replaying to a model.
pub fn as_conversation(messages: &[Message]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m.role != "session_meta")
        .map(|m| {
            let mut out = Map::new();
            out.insert("role".into(), Value::String(m.role.clone()));
            let content = match &m.content {
                None => Value::Null,
                Some(Content::Text(t)) => Value::String(t.clone()),
                Some(Content::Json(v)) => v.clone(),
            };
            out.insert("content".into(), content);
            let optional = [
                ("tool_call_id", m.tool_call_id.clone().map(Value::String)),
                ("tool_calls", m.tool_calls.clone()),
                ("name", m.tool_name.clone().map(Value::String)),
                ("reasoning", m.reasoning.clone().map(Value::String)),
                ("reasoning_details", m.reasoning_details.clone()),
                ("codex_reasoning_items", m.codex_reasoning_items.clone()),
                ("codex_message_items", m.codex_message_items.clone()),
            ];
            for (key, value) in optional {
                if let Some(value) = value {
                    out.insert(key.into(), value);
                }
            }
            Value::Object(out)
        })
        .collect()
}

/// Newest sessions first, with a preview of the first user message and the last activity.
pub fn recent_sessions(
    conn: &Connection,
    info: &SchemaInfo,
    source: Option<&str>,
    limit: usize,
) -> StoreResult<Vec<SessionSummary>> {
    let filter = active_filter(info);
    let columns = session_columns(info);
    let sql = format!(
        "SELECT {columns},
            COALESCE((SELECT SUBSTR(m.content, 1, 63) FROM messages m
                      WHERE m.session_id = s.id AND m.role = 'user' AND m.content IS NOT NULL{filter}
                      ORDER BY m.timestamp, m.id LIMIT 1), '') AS preview,
            COALESCE((SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = s.id{filter}),
                     s.started_at) AS last_active
         FROM sessions s WHERE (?1 IS NULL OR s.source = ?1)
         ORDER BY s.started_at DESC LIMIT ?2"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![source, limit as i64], |r| {
        Ok(SessionSummary {
            session: session_from_row(r)?,
            preview: text_or_empty(r, SESSION_COLUMN_COUNT)?,
            last_active: r.get(SESSION_COLUMN_COUNT + 1)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn lineage(conn: &Connection, sql: &str, id: &str) -> StoreResult<Vec<LineageEntry>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map([id], |r| {
        Ok(LineageEntry {
            id: text_or_empty(r, 0)?,
            title: text(r, 1)?,
            started_at: r.get(2)?,
            parent_session_id: text(r, 3)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The session and all its ancestors, nearest first (depth-capped against cycles).
pub fn ancestors(conn: &Connection, id: &str) -> StoreResult<Vec<LineageEntry>> {
    lineage(
        conn,
        "WITH RECURSIVE lineage(id, title, started_at, parent_session_id, depth) AS (
             SELECT id, title, started_at, parent_session_id, 0 FROM sessions WHERE id = ?1
             UNION ALL
             SELECT s.id, s.title, s.started_at, s.parent_session_id, l.depth + 1
             FROM sessions s JOIN lineage l ON s.id = l.parent_session_id WHERE l.depth < 1000)
         SELECT id, title, started_at, parent_session_id FROM lineage ORDER BY depth",
        id,
    )
}

/// The session and all its descendants, breadth first.
pub fn descendants(conn: &Connection, id: &str) -> StoreResult<Vec<LineageEntry>> {
    lineage(
        conn,
        "WITH RECURSIVE descendants(id, title, started_at, parent_session_id, depth) AS (
             SELECT id, title, started_at, parent_session_id, 0 FROM sessions WHERE id = ?1
             UNION ALL
             SELECT s.id, s.title, s.started_at, s.parent_session_id, d.depth + 1
             FROM sessions s JOIN descendants d ON s.parent_session_id = d.id WHERE d.depth < 1000)
         SELECT id, title, started_at, parent_session_id FROM descendants ORDER BY depth, started_at",
        id,
    )
}

/// Token and cost totals per model, most expensive first.
pub fn model_stats(conn: &Connection) -> StoreResult<Vec<ModelStats>> {
    let mut stmt = conn.prepare_cached(
        "SELECT model, COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                SUM(estimated_cost_usd)
         FROM sessions WHERE model IS NOT NULL GROUP BY model
         ORDER BY SUM(estimated_cost_usd) DESC, COUNT(*) DESC",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(ModelStats {
            model: text_or_empty(r, 0)?,
            session_count: r.get(1)?,
            total_input: r.get(2)?,
            total_output: r.get(3)?,
            total_cost: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn usage_since(
    conn: &Connection,
    since: f64,
    source: Option<&str>,
) -> StoreResult<Vec<UsageGroup>> {
    let mut stmt = conn.prepare_cached(
        "SELECT source, model, COUNT(*), COALESCE(SUM(message_count), 0),
                COALESCE(SUM(tool_call_count), 0), COALESCE(SUM(input_tokens), 0),
                COALESCE(SUM(output_tokens), 0), SUM(estimated_cost_usd)
         FROM sessions WHERE started_at >= ?1 AND (?2 IS NULL OR source = ?2)
         GROUP BY source, model ORDER BY COUNT(*) DESC, source, model",
    )?;
    let rows = stmt.query_map(params![since, source], |r| {
        Ok(UsageGroup {
            source: text_or_empty(r, 0)?,
            model: text(r, 1)?,
            sessions: r.get(2)?,
            messages: r.get(3)?,
            tool_calls: r.get(4)?,
            input_tokens: r.get(5)?,
            output_tokens: r.get(6)?,
            cost: r.get(7)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub fn export_session(
    conn: &Connection,
    info: &SchemaInfo,
    id: &str,
) -> StoreResult<Option<SessionExport>> {
    let Some(session) = get_session(conn, info, id)? else {
        return Ok(None);
    };
    let messages = get_messages(conn, info, id)?;
    Ok(Some(SessionExport { session, messages }))
}

pub fn export_all(
    conn: &Connection,
    info: &SchemaInfo,
    source: Option<&str>,
) -> StoreResult<Vec<SessionExport>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id FROM sessions WHERE (?1 IS NULL OR source = ?1) ORDER BY started_at",
    )?;
    let ids: Vec<String> = stmt
        .query_map([source], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(export) = export_session(conn, info, &id)? {
            out.push(export);
        }
    }
    Ok(out)
}

/// Ended sessions that started more than `older_than_days` ago (optionally of one source).
pub fn prune_candidates(
    conn: &Connection,
    older_than_days: f64,
    source: Option<&str>,
    now: f64,
) -> StoreResult<Vec<String>> {
    let cutoff = now - older_than_days * 86_400.0;
    let mut stmt = conn.prepare_cached(
        "SELECT id FROM sessions WHERE ended_at IS NOT NULL AND started_at < ?1
         AND (?2 IS NULL OR source = ?2) ORDER BY started_at",
    )?;
    let ids = stmt
        .query_map(params![cutoff, source], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    Ok(ids)
}
