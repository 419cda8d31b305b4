//! Read-only inspection of a state.db for `hermesd doctor`: integrity and schema version,
//! without creating, migrating or writing anything (the file may belong to a running
//! gateway, or to a newer Hermes).

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
}

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
    Ok(Inspection {
        integrity,
        schema_version,
    })
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
