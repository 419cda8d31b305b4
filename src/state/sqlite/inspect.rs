//! Inspection of a state.db for `hermesd doctor`: integrity, schema version and which search
//! indexes this process can serve, without creating, migrating or keeping any change (the file
//! may belong to a running gateway, or to a newer Hermes); and a test write that never
//! survives.

use std::path::Path;

use rusqlite::{OpenFlags, OptionalExtension};

use crate::state::error::StoreResult;

/// How many problems `PRAGMA integrity_check` lists at most.
const MAX_INTEGRITY_ROWS: u32 = 20;

/// What [`inspect_read_only`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The rows of `PRAGMA integrity_check`: exactly `["ok"]` for a sound database.
    pub integrity: Vec<String>,
    /// `schema_version.version`, `None` when the table is missing or empty.
    pub schema_version: Option<i64>,
    /// Each full-text index present, and whether this process can use it.
    pub indexes: Vec<(String, bool)>,
}

/// The full-text indexes Hermes may keep, base and optional.
const FTS_INDEXES: [&str; 3] = ["messages_fts", "messages_fts_trigram", "messages_fts_cjk"];

impl Inspection {
    pub fn is_intact(&self) -> bool {
        self.integrity.len() == 1 && self.integrity[0] == "ok"
    }
}

/// Opens `path` read-only (never creating it) and checks it. A file that is not a database
/// at all is an error, like any other SQLite failure.
pub fn inspect_read_only(path: &Path) -> StoreResult<Inspection> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch("PRAGMA query_only = ON;")?;
    let mut statement = conn.prepare(&format!("PRAGMA integrity_check({MAX_INTEGRITY_ROWS})"))?;
    let integrity = statement
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    let has_version_table: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version')",
        [],
        |row| row.get(0),
    )?;
    let schema_version = if has_version_table {
        conn.query_row("SELECT version FROM schema_version LIMIT 1", [], |row| {
            row.get(0)
        })
        .optional()?
    } else {
        None
    };
    let mut indexes = Vec::new();
    for table in FTS_INDEXES {
        let present: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
            [table],
            |row| row.get(0),
        )?;
        if present {
            indexes.push((
                table.to_owned(),
                super::capabilities::index_usable(&conn, table),
            ));
        }
    }
    Ok(Inspection {
        integrity,
        schema_version,
        indexes,
    })
}

/// Why a test write could not be made.
#[derive(Debug, thiserror::Error)]
pub enum WriteProbeError {
    /// Another process holds the write lock; nothing was tried.
    #[error("busy: another process is writing ({0})")]
    Busy(String),
    /// The write itself failed (a trigger, an index, the file).
    #[error("{0}")]
    Failed(String),
}

/// Writes a session and a message the way a turn does — so every trigger and index on
/// `messages` runs — then rolls the whole write back, whatever happened.
pub fn try_write(path: &Path) -> Result<(), WriteProbeError> {
    let failed = |e: rusqlite::Error| {
        if crate::state::error::is_busy(&e) {
            WriteProbeError::Busy(e.to_string())
        } else {
            WriteProbeError::Failed(e.to_string())
        }
    };
    let mut conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(failed)?;
    conn.busy_timeout(std::time::Duration::from_secs(2))
        .map_err(failed)?;
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(failed)?;
    tx.execute_batch(
        "INSERT INTO sessions (id, source, started_at) VALUES ('hermesd-doctor-probe', 'doctor', 0);
         INSERT INTO messages (session_id, role, content, timestamp)
             VALUES ('hermesd-doctor-probe', 'user', 'doctor probe 探针', 0);",
    )
    .map_err(failed)?;
    tx.rollback().map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_store_is_intact_and_current() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let store = crate::state::Store::open(&path).unwrap();
        runtime.block_on(store.close());
        let found = inspect_read_only(&path).unwrap();
        assert!(found.is_intact(), "{found:?}");
        assert_eq!(found.schema_version, Some(crate::state::SCHEMA_VERSION));
        assert_eq!(
            found.indexes,
            [
                ("messages_fts".to_owned(), true),
                ("messages_fts_trigram".to_owned(), true)
            ]
        );
        try_write(&path).unwrap();
        let conn = rusqlite::Connection::open(&path).unwrap();
        let left: i64 = conn
            .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 0, "the test write was rolled back");
    }

    #[test]
    fn garbage_and_missing_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("garbage.db");
        std::fs::write(&garbage, vec![0x5a; 8192]).unwrap();
        assert!(inspect_read_only(&garbage).is_err());
        assert!(inspect_read_only(&dir.path().join("missing.db")).is_err());
        assert!(!dir.path().join("missing.db").exists());
    }
}
