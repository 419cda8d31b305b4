//! The state.db schema (Hermes schema version 11) and its idempotent initialisation.
//!
//! Interoperability rules: a database whose `schema_version` is higher than ours belongs to a
//! newer Hermes; we never lower the version, never drop or alter its tables, and leave its
//! FTS layout alone. Column additions are reconciled declaratively from [`SCHEMA_SQL`].

use rusqlite::{Connection, OptionalExtension};

use super::capabilities::{Capabilities, column_names};
use crate::state::error::StoreResult;

pub const SCHEMA_VERSION: i64 = 11;

/// Core tables and indexes, exactly as the seed lists them (column order included).
pub const SCHEMA_SQL: &str = r#"
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    user_id TEXT,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0,
    billing_provider TEXT,
    billing_base_url TEXT,
    billing_mode TEXT,
    estimated_cost_usd REAL,
    actual_cost_usd REAL,
    cost_status TEXT,
    cost_source TEXT,
    pricing_version TEXT,
    title TEXT,
    api_call_count INTEGER DEFAULT 0,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
);

CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER,
    finish_reason TEXT,
    reasoning TEXT,
    reasoning_content TEXT,
    reasoning_details TEXT,
    codex_reasoning_items TEXT,
    codex_message_items TEXT
);

CREATE TABLE IF NOT EXISTS state_meta (
    key TEXT PRIMARY KEY,
    value TEXT
);

CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source);
CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC);
CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp);
CREATE INDEX IF NOT EXISTS idx_messages_session_id ON messages(session_id, id);
"#;

const TITLE_INDEX_SQL: &str = "CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique \
     ON sessions(title) WHERE title IS NOT NULL";

/// The indexed text of a message: content, tool name and raw tool-call JSON (inline mode, v11).
const FTS_ROW: &str = "COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' ' || COALESCE(new.tool_calls, '')";

pub const FTS_TABLES: [&str; 2] = ["messages_fts", "messages_fts_trigram"];

fn fts_sql() -> String {
    let mut sql = String::from(
        "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(content);\n\
         CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_trigram USING fts5(content, tokenize='trigram');\n",
    );
    for table in FTS_TABLES {
        sql.push_str(&format!(
            "CREATE TRIGGER IF NOT EXISTS {table}_insert AFTER INSERT ON messages BEGIN\n\
             INSERT INTO {table}(rowid, content) VALUES (new.id, {FTS_ROW});\nEND;\n\
             CREATE TRIGGER IF NOT EXISTS {table}_delete AFTER DELETE ON messages BEGIN\n\
             DELETE FROM {table} WHERE rowid = old.id;\nEND;\n\
             CREATE TRIGGER IF NOT EXISTS {table}_update AFTER UPDATE ON messages BEGIN\n\
             DELETE FROM {table} WHERE rowid = old.id;\n\
             INSERT INTO {table}(rowid, content) VALUES (new.id, {FTS_ROW});\nEND;\n"
        ));
    }
    sql
}

/// What initialisation found, for the store to adapt to (newer Hermes columns, foreign FTS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaInfo {
    /// `schema_version` after initialisation (ours, or a newer Hermes's).
    pub version: i64,
    /// The `messages.active` column of newer Hermes exists: reads show only active rows.
    pub has_active_column: bool,
    /// What a newer Hermes's schema holds, and so what hermesd writes into it.
    pub caps: Capabilities,
}

/// Creates or upgrades the schema. Idempotent; safe to run on every open.
pub fn initialise(conn: &mut Connection) -> StoreResult<SchemaInfo> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA_SQL)?;
    reconcile_columns(&tx)?;
    let found: Option<i64> = tx
        .query_row("SELECT version FROM schema_version LIMIT 1", [], |r| {
            r.get(0)
        })
        .optional()?;
    let version = match found {
        None => {
            tx.execute_batch(&fts_sql())?;
            tx.execute(
                "INSERT INTO schema_version (version) VALUES (?1)",
                [SCHEMA_VERSION],
            )?;
            SCHEMA_VERSION
        }
        Some(v) if v < SCHEMA_VERSION => {
            migrate_fts_to_inline(&tx)?;
            tx.execute("UPDATE schema_version SET version = ?1", [SCHEMA_VERSION])?;
            SCHEMA_VERSION
        }
        Some(v) if v == SCHEMA_VERSION => {
            tx.execute_batch(&fts_sql())?;
            v
        }
        // A newer Hermes owns this database: its FTS layout and version stay as they are.
        Some(v) => v,
    };
    ensure_title_index(&tx)?;
    let has_active_column = column_names(&tx, "messages")?.iter().any(|c| c == "active");
    let caps = super::capabilities::detect(&tx)?;
    tx.commit()?;
    Ok(SchemaInfo {
        version,
        has_active_column,
        caps,
    })
}

/// Adds every column that [`SCHEMA_SQL`] declares and the live table lacks.
fn reconcile_columns(conn: &Connection) -> StoreResult<()> {
    for (table, columns) in declared_columns() {
        let live = column_names(conn, table)?;
        for (name, decl) in columns {
            if !live.iter().any(|c| c == name) {
                conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {name} {decl}"))?;
            }
        }
    }
    Ok(())
}

/// `(table, [(column, declaration)])` parsed from [`SCHEMA_SQL`].
fn declared_columns() -> Vec<(&'static str, Vec<(&'static str, &'static str)>)> {
    let mut out = Vec::new();
    for block in SCHEMA_SQL.split("CREATE TABLE IF NOT EXISTS ").skip(1) {
        let Some((table, body)) = block.split_once(" (") else {
            continue;
        };
        let body = body.split(");").next().unwrap_or("");
        let columns = body
            .lines()
            .map(|l| l.trim().trim_end_matches(','))
            .filter(|l| !l.is_empty() && !l.starts_with("FOREIGN KEY"))
            .filter_map(|l| l.split_once(' '))
            // PRIMARY KEY columns cannot be added by ALTER TABLE; they exist if the table does.
            .filter(|(_, decl)| !decl.contains("PRIMARY KEY"))
            .collect();
        out.push((table, columns));
    }
    out
}

/// Versions before 11 used external-content FTS without tool text: rebuild inline and backfill.
fn migrate_fts_to_inline(conn: &Connection) -> StoreResult<()> {
    for table in FTS_TABLES {
        for suffix in ["insert", "delete", "update"] {
            conn.execute_batch(&format!("DROP TRIGGER IF EXISTS {table}_{suffix}"))?;
        }
        conn.execute_batch(&format!("DROP TABLE IF EXISTS {table}"))?;
    }
    conn.execute_batch(&fts_sql())?;
    let row = FTS_ROW.replace("new.", "");
    for table in FTS_TABLES {
        conn.execute_batch(&format!(
            "INSERT INTO {table}(rowid, content) SELECT id, {row} FROM messages"
        ))?;
    }
    Ok(())
}

/// Creates the unique title index; on old duplicates the newest row keeps the title.
fn ensure_title_index(conn: &Connection) -> StoreResult<()> {
    if conn.execute_batch(TITLE_INDEX_SQL).is_ok() {
        return Ok(());
    }
    conn.execute_batch(
        "UPDATE sessions SET title = NULL WHERE title IS NOT NULL AND rowid NOT IN \
         (SELECT MAX(rowid) FROM sessions WHERE title IS NOT NULL GROUP BY title)",
    )?;
    conn.execute_batch(TITLE_INDEX_SQL)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_columns_cover_the_seed_tables() {
        let cols = declared_columns();
        let sessions = &cols.iter().find(|(t, _)| *t == "sessions").unwrap().1;
        assert_eq!(sessions.len(), 26, "27 columns minus the primary key");
        assert!(sessions.contains(&("api_call_count", "INTEGER DEFAULT 0")));
        let messages = &cols.iter().find(|(t, _)| *t == "messages").unwrap().1;
        assert!(messages.contains(&("session_id", "TEXT NOT NULL REFERENCES sessions(id)")));
        assert_eq!(messages.len(), 14);
    }

    #[test]
    fn initialise_is_idempotent_and_migrates_old_versions() {
        let mut conn = Connection::open_in_memory().unwrap();
        let info = initialise(&mut conn).unwrap();
        assert_eq!(info.version, 11);
        assert!(!info.has_active_column);
        assert!(!info.caps.any(), "a v11 file is written as v11");
        assert_eq!(initialise(&mut conn).unwrap().version, 11);
        conn.execute_batch(
            "INSERT INTO sessions (id, source, started_at) VALUES ('s', 'cli', 1);
             INSERT INTO messages (session_id, role, content, tool_name, timestamp)
                 VALUES ('s', 'tool', 'hello', 'terminal', 1);
             UPDATE schema_version SET version = 9;",
        )
        .unwrap();
        assert_eq!(initialise(&mut conn).unwrap().version, 11);
        let hits: i64 = conn
            .query_row(
                "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'terminal'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(hits, 1, "backfilled with tool_name");
    }
}
