//! Session and message reads on PostgreSQL (the counterpart of `state/read.rs`): the same
//! queries, result shapes, orderings and errors, over the pool.
//!
//! Where the two databases differ the SQL says so: `SUM` of a `BIGINT` is `NUMERIC` here (cast
//! back), NULLs sort first in a descending order here but last in SQLite (`NULLS LAST`), and
//! SQLite's `LIKE` ignores ASCII case (`ILIKE`).

use sqlx::AssertSqlSafe;
use sqlx::Row;
use sqlx::postgres::PgPool;

use super::pg_text::from_pg;
use super::rows::{self, Columns, MESSAGE_COLUMNS, SESSION_COLUMN_COUNT, SESSION_COLUMNS, db};
use crate::state::error::{StoreError, StoreResult};
use crate::state::model::{
    LineageEntry, Message, ModelStats, Session, SessionExport, SessionSummary, UsageGroup,
};
use crate::state::sqlite::titles::escape_like;

/// Characters of the first user message shown in a listing (SQLite's `SUBSTR(content, 1, 63)`).
const PREVIEW_CHARS: usize = 63;

pub async fn get_session(pool: &PgPool, id: &str) -> StoreResult<Option<Session>> {
    let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.id = $1");
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(super::retried(pool))
        .await
        .map_err(db)?;
    row.map(|row| rows::session(&row)).transpose().map_err(db)
}

/// An exact id, or the one session whose id starts with `prefix`.
pub async fn resolve_session_id(pool: &PgPool, prefix: &str) -> StoreResult<String> {
    if get_session(pool, prefix).await?.is_some() {
        return Ok(prefix.to_owned());
    }
    let pattern = format!("{}%", escape_like(prefix));
    let ids: Vec<String> =
        sqlx::query_scalar("SELECT id FROM sessions WHERE id ILIKE $1 ESCAPE '\\' LIMIT 2")
            .bind(&pattern)
            .fetch_all(super::retried(pool))
            .await
            .map_err(db)?;
    match ids.len() {
        0 => Err(StoreError::SessionNotFound(prefix.to_owned())),
        1 => Ok(ids.into_iter().next().unwrap_or_default()),
        _ => {
            let count: i64 =
                sqlx::query_scalar("SELECT count(*) FROM sessions WHERE id ILIKE $1 ESCAPE '\\'")
                    .bind(&pattern)
                    .fetch_one(super::retried(pool))
                    .await
                    .map_err(db)?;
            Err(StoreError::AmbiguousPrefix {
                prefix: prefix.to_owned(),
                count: count as usize,
            })
        }
    }
}

/// A session's messages in insertion (`id`) order.
pub async fn get_messages(pool: &PgPool, id: &str) -> StoreResult<Vec<Message>> {
    let sql =
        format!("SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.session_id = $1 ORDER BY m.id");
    let found = sqlx::query(AssertSqlSafe(sql))
        .bind(id)
        .fetch_all(super::retried(pool))
        .await
        .map_err(db)?;
    rows::all(&found, rows::message)
}

/// Newest sessions first, with a preview of the first user message and the last activity.
pub async fn recent_sessions(
    pool: &PgPool,
    source: Option<&str>,
    limit: usize,
) -> StoreResult<Vec<SessionSummary>> {
    // Twice the preview's length is read so that it can be cut after decoding `pg_text`.
    let sql = format!(
        "SELECT {SESSION_COLUMNS}, \
            COALESCE((SELECT substr(m.content, 1, {}) FROM messages m \
                      WHERE m.session_id = s.id AND m.role = 'user' AND m.content IS NOT NULL \
                      ORDER BY m.timestamp, m.id LIMIT 1), '') AS preview, \
            COALESCE((SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = s.id), \
                     s.started_at) AS last_active \
         FROM sessions s WHERE ($1::text IS NULL OR s.source = $1) \
         ORDER BY s.started_at DESC LIMIT $2",
        PREVIEW_CHARS * 2
    );
    let found = sqlx::query(AssertSqlSafe(sql))
        .bind(source)
        .bind(limit as i64)
        .fetch_all(super::retried(pool))
        .await
        .map_err(db)?;
    let summary = |r: &sqlx::postgres::PgRow| -> Result<SessionSummary, sqlx::Error> {
        let preview: String = r.try_get(SESSION_COLUMN_COUNT)?;
        Ok(SessionSummary {
            session: rows::session(r)?,
            // SQLite's `SUBSTR` ends the text at a U+0000 (state.db's structured-content marker).
            preview: from_pg(preview)
                .chars()
                .take(PREVIEW_CHARS)
                .take_while(|c| *c != '\0')
                .collect(),
            last_active: r.try_get(SESSION_COLUMN_COUNT + 1)?,
        })
    };
    rows::all(&found, summary)
}

async fn lineage(pool: &PgPool, sql: &'static str, id: &str) -> StoreResult<Vec<LineageEntry>> {
    let found = sqlx::query(sql)
        .bind(id)
        .fetch_all(super::retried(pool))
        .await
        .map_err(db)?;
    let entry = |r: &sqlx::postgres::PgRow| -> Result<LineageEntry, sqlx::Error> {
        Ok(LineageEntry {
            id: r.text_or_empty(0)?,
            title: r.text(1)?,
            started_at: r.try_get(2)?,
            parent_session_id: r.text(3)?,
        })
    };
    rows::all(&found, entry)
}

/// The session and all its ancestors, nearest first (depth-capped against cycles).
pub async fn ancestors(pool: &PgPool, id: &str) -> StoreResult<Vec<LineageEntry>> {
    lineage(
        pool,
        "WITH RECURSIVE lineage(id, title, started_at, parent_session_id, depth) AS ( \
             SELECT id, title, started_at, parent_session_id, 0 FROM sessions WHERE id = $1 \
             UNION ALL \
             SELECT s.id, s.title, s.started_at, s.parent_session_id, l.depth + 1 \
             FROM sessions s JOIN lineage l ON s.id = l.parent_session_id WHERE l.depth < 1000) \
         SELECT id, title, started_at, parent_session_id FROM lineage ORDER BY depth",
        id,
    )
    .await
}

/// The session and all its descendants, breadth first.
pub async fn descendants(pool: &PgPool, id: &str) -> StoreResult<Vec<LineageEntry>> {
    lineage(
        pool,
        "WITH RECURSIVE descendants(id, title, started_at, parent_session_id, depth) AS ( \
             SELECT id, title, started_at, parent_session_id, 0 FROM sessions WHERE id = $1 \
             UNION ALL \
             SELECT s.id, s.title, s.started_at, s.parent_session_id, d.depth + 1 \
             FROM sessions s JOIN descendants d ON s.parent_session_id = d.id \
             WHERE d.depth < 1000) \
         SELECT id, title, started_at, parent_session_id FROM descendants \
         ORDER BY depth, started_at",
        id,
    )
    .await
}

/// Token and cost totals per model, most expensive first (sessions without a cost last, as
/// SQLite sorts NULL).
pub async fn model_stats(pool: &PgPool) -> StoreResult<Vec<ModelStats>> {
    let found = sqlx::query(
        "SELECT model, COUNT(*), COALESCE(SUM(input_tokens), 0)::bigint, \
                COALESCE(SUM(output_tokens), 0)::bigint, SUM(estimated_cost_usd) \
         FROM sessions WHERE model IS NOT NULL GROUP BY model \
         ORDER BY SUM(estimated_cost_usd) DESC NULLS LAST, COUNT(*) DESC",
    )
    .fetch_all(super::retried(pool))
    .await
    .map_err(db)?;
    let stats = |r: &sqlx::postgres::PgRow| -> Result<ModelStats, sqlx::Error> {
        Ok(ModelStats {
            model: r.text_or_empty(0)?,
            session_count: r.try_get(1)?,
            total_input: r.try_get(2)?,
            total_output: r.try_get(3)?,
            total_cost: r.try_get(4)?,
        })
    };
    rows::all(&found, stats)
}

pub async fn usage_since(
    pool: &PgPool,
    since: f64,
    source: Option<&str>,
) -> StoreResult<Vec<UsageGroup>> {
    let found = sqlx::query(
        "SELECT source, model, COUNT(*), COALESCE(SUM(message_count), 0)::bigint, \
                COALESCE(SUM(tool_call_count), 0)::bigint, COALESCE(SUM(input_tokens), 0)::bigint, \
                COALESCE(SUM(output_tokens), 0)::bigint, SUM(estimated_cost_usd) \
         FROM sessions WHERE started_at >= $1 AND ($2::text IS NULL OR source = $2) \
         GROUP BY source, model ORDER BY COUNT(*) DESC, source, model",
    )
    .bind(since)
    .bind(source)
    .fetch_all(super::retried(pool))
    .await
    .map_err(db)?;
    let group = |r: &sqlx::postgres::PgRow| -> Result<UsageGroup, sqlx::Error> {
        Ok(UsageGroup {
            source: r.text_or_empty(0)?,
            model: r.text(1)?,
            sessions: r.try_get(2)?,
            messages: r.try_get(3)?,
            tool_calls: r.try_get(4)?,
            input_tokens: r.try_get(5)?,
            output_tokens: r.try_get(6)?,
            cost: r.try_get(7)?,
        })
    };
    rows::all(&found, group)
}

pub async fn export_session(pool: &PgPool, id: &str) -> StoreResult<Option<SessionExport>> {
    let Some(session) = get_session(pool, id).await? else {
        return Ok(None);
    };
    let messages = get_messages(pool, id).await?;
    Ok(Some(SessionExport { session, messages }))
}

pub async fn export_all(pool: &PgPool, source: Option<&str>) -> StoreResult<Vec<SessionExport>> {
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM sessions WHERE ($1::text IS NULL OR source = $1) ORDER BY started_at",
    )
    .bind(source)
    .fetch_all(super::retried(pool))
    .await
    .map_err(db)?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(export) = export_session(pool, &id).await? {
            out.push(export);
        }
    }
    Ok(out)
}

/// Ended sessions that started more than `older_than_days` ago (optionally of one source).
pub async fn prune_candidates(
    pool: &PgPool,
    older_than_days: f64,
    source: Option<&str>,
    now: f64,
) -> StoreResult<Vec<String>> {
    let cutoff = now - older_than_days * 86_400.0;
    sqlx::query_scalar(
        "SELECT id FROM sessions WHERE ended_at IS NOT NULL AND started_at < $1 \
         AND ($2::text IS NULL OR source = $2) ORDER BY started_at",
    )
    .bind(cutoff)
    .bind(source)
    .fetch_all(super::retried(pool))
    .await
    .map_err(db)
}
