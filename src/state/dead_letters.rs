//! Dead letters: inbound items an adapter could not decode, kept with their raw payload so
//! an operator can see (and replay by hand) what a user sent. `hermesd_dead_letters` is ours;
//! one row per (platform, item id), so a platform redelivering the same item adds nothing.

use rusqlite::{Connection, Row, params};

use super::error::StoreResult;
use super::model::now_epoch;
use super::outcome::Outcome;

/// The dead-letter table, created with the rest of the gateway schema.
pub const DEAD_LETTERS_SQL: &str = "CREATE TABLE IF NOT EXISTS hermesd_dead_letters (
    platform TEXT NOT NULL,
    item_id TEXT NOT NULL,
    chat_id TEXT,
    raw TEXT NOT NULL,
    error TEXT NOT NULL,
    received_at REAL NOT NULL,
    PRIMARY KEY (platform, item_id)
)";

/// One kept item.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetterRow {
    pub platform: String,
    pub item_id: String,
    pub chat_id: Option<String>,
    pub raw: String,
    pub error: String,
    pub received_at: f64,
}

/// `INSERT OR IGNORE`: `Changed(1)` when kept, `Changed(0)` for a redelivery.
pub fn record(
    conn: &Connection,
    platform: &str,
    item_id: &str,
    chat_id: Option<&str>,
    raw: &str,
    error: &str,
) -> StoreResult<Outcome> {
    Ok(Outcome::Changed(conn.execute(
        "INSERT OR IGNORE INTO hermesd_dead_letters
             (platform, item_id, chat_id, raw, error, received_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![platform, item_id, chat_id, raw, error, now_epoch()],
    )?))
}

pub(crate) fn list(conn: &Connection) -> StoreResult<Vec<DeadLetterRow>> {
    let mut stmt = conn.prepare(
        "SELECT platform, item_id, chat_id, raw, error, received_at
         FROM hermesd_dead_letters ORDER BY received_at, rowid",
    )?;
    let rows = stmt.query_map([], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<DeadLetterRow> {
    Ok(DeadLetterRow {
        platform: r.get(0)?,
        item_id: r.get(1)?,
        chat_id: r.get(2)?,
        raw: r.get(3)?,
        error: r.get(4)?,
        received_at: r.get(5)?,
    })
}
