//! The writes a newer Hermes's schema expects beyond the v11 base, each made only when
//! [`Capabilities`] found its table or column: prompts by hash, per-model usage rows, title and
//! creation provenance, last activity and message uids. Called by `apply` inside the writer's
//! savepoint, so each lands in the same transaction as the write it belongs to.

use rusqlite::{Connection, params};
use sha2::{Digest, Sha256};

use super::capabilities::Capabilities;
use crate::state::error::StoreResult;
use crate::state::model::{UsageDelta, now_epoch};

/// The key of a prompt in `system_prompts`: SHA-256 of its UTF-8 bytes, lowercase hex.
pub fn prompt_hash(prompt: &str) -> String {
    hex::encode(Sha256::digest(prompt.as_bytes()))
}

/// Stores `prompt` under its hash (once per distinct prompt); returns the hash and whether
/// this call added the row.
pub fn store_prompt(conn: &Connection, prompt: &str) -> StoreResult<(String, bool)> {
    let hash = prompt_hash(prompt);
    let added = conn
        .prepare_cached("INSERT OR IGNORE INTO system_prompts (hash, prompt) VALUES (?1, ?2)")?
        .execute(params![hash, prompt])?;
    Ok((hash, added == 1))
}

/// Removes prompts no session refers to any more (among `hashes`).
pub fn drop_unreferenced_prompts(conn: &Connection, hashes: &[String]) -> StoreResult<()> {
    if hashes.is_empty() {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached(
        "DELETE FROM system_prompts WHERE hash = ?1 \
         AND NOT EXISTS (SELECT 1 FROM sessions WHERE system_prompt_hash = ?1)",
    )?;
    for hash in hashes {
        stmt.execute([hash])?;
    }
    Ok(())
}

/// The prompt hashes of `ids`, before they are deleted.
pub fn prompt_hashes_of(conn: &Connection, ids: &[String]) -> StoreResult<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT system_prompt_hash FROM sessions WHERE id = ?1 AND system_prompt_hash IS NOT NULL",
    )?;
    let mut out = Vec::new();
    for id in ids {
        if let Some(hash) =
            rusqlite::OptionalExtension::optional(stmt.query_row([id], |r| r.get::<_, String>(0)))?
        {
            out.push(hash);
        }
    }
    Ok(out)
}

/// Adds a usage delta to the session's row for its model and billing route. hermesd's usage
/// is the main agent loop's, which Hermes keys with the empty task.
pub fn record_model_usage(conn: &Connection, u: &UsageDelta) -> StoreResult<()> {
    let (model, provider, base_url, mode): (Option<String>, Option<String>, Option<String>, Option<String>) =
        conn.query_row(
            "SELECT model, billing_provider, billing_base_url, billing_mode FROM sessions WHERE id = ?1",
            [&u.session_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
    let now = now_epoch();
    conn.prepare_cached(
        "INSERT INTO session_model_usage (session_id, model, billing_provider, billing_base_url,
             billing_mode, task, api_call_count, input_tokens, output_tokens, cache_read_tokens,
             cache_write_tokens, reasoning_tokens, estimated_cost_usd, actual_cost_usd,
             first_seen, last_seen)
         VALUES (?1, ?2, ?3, ?4, ?5, '', ?6, ?7, ?8, ?9, ?10, ?11, ?12, 0, ?13, ?13)
         ON CONFLICT(session_id, model, billing_provider, billing_base_url, billing_mode, task)
         DO UPDATE SET
             api_call_count = api_call_count + excluded.api_call_count,
             input_tokens = input_tokens + excluded.input_tokens,
             output_tokens = output_tokens + excluded.output_tokens,
             cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
             cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
             reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
             estimated_cost_usd = estimated_cost_usd + excluded.estimated_cost_usd,
             last_seen = excluded.last_seen",
    )?
    .execute(params![
        u.session_id,
        u.model
            .clone()
            .or(model)
            .unwrap_or_else(|| "unknown".into()),
        u.billing_provider.clone().or(provider).unwrap_or_default(),
        u.billing_base_url.clone().or(base_url).unwrap_or_default(),
        mode.unwrap_or_default(),
        u.api_calls,
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        u.reasoning_tokens,
        u.estimated_cost_usd.unwrap_or(0.0),
        now,
    ])?;
    Ok(())
}

/// Moves `last_activity_at` forward to `at` (never back).
pub fn touch_activity(
    conn: &Connection,
    caps: &Capabilities,
    id: &str,
    at: f64,
) -> StoreResult<()> {
    if caps.last_activity {
        conn.prepare_cached(
            "UPDATE sessions SET last_activity_at = ?1 \
             WHERE id = ?2 AND (last_activity_at IS NULL OR last_activity_at < ?1)",
        )?
        .execute(params![at, id])?;
    }
    Ok(())
}

/// A fresh durable message id in Hermes's form: 128 random bits as 32 lowercase hex digits.
pub fn mint_uid() -> String {
    use rand::Rng;
    let bits: [u8; 16] = rand::rng().random();
    hex::encode(bits)
}
