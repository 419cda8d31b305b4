//! Opening SQLite connections with the pragmas and lock-contention policy of the seed.
//!
//! Contention policy: SQLite's own busy handler sleeps on a fixed ladder, so every waiting
//! writer retries at the same moments (the convoy effect). We install a handler that polls
//! with sub-millisecond random jitter for a short window ([`BUSY_WINDOW`]); past that the
//! writer's application-level retry (20–150 ms jitter, 15 attempts) takes over.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::Rng;
use rusqlite::{Connection, OpenFlags};

use crate::state::error::StoreResult;

/// Page cache of each read-pool connection, in KiB. Reads go through the memory map, so the
/// cache mostly keeps decoded hot pages; a small cap keeps the ceiling known: with the pool's
/// idle connections and the writer, SQLite's caches hold at most
/// `max_idle_readers × READER_CACHE_KIB + WRITER_CACHE_KIB` (4 × 2 + 4 = 12 MiB by default),
/// plus 2 MiB for each reader open beyond the pool while a burst of reads lasts.
pub const READER_CACHE_KIB: u32 = 2048;
/// Page cache of the writer connection, in KiB (SQLite's default is ~2 MiB); the FTS index
/// merges touch many pages, so the writer gets a little more than a reader.
pub const WRITER_CACHE_KIB: u32 = 4096;

/// The page-cache caps of a store's connections, in KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageCache {
    pub reader_kib: u32,
    pub writer_kib: u32,
}

impl Default for PageCache {
    fn default() -> Self {
        Self {
            reader_kib: READER_CACHE_KIB,
            writer_kib: WRITER_CACHE_KIB,
        }
    }
}

/// How long one statement waits for a lock before the application-level retry takes over.
pub const BUSY_WINDOW: Duration = Duration::from_millis(1000);
const BUSY_POLL_MAX_MICROS: u64 = 1500;

thread_local! {
    /// The busy window of connections used on this thread (the writer thread may shorten it).
    static BUSY_WINDOW_MICROS: std::cell::Cell<u64> =
        const { std::cell::Cell::new(BUSY_WINDOW.as_micros() as u64) };
}

/// Sets the busy window for connections used on the calling thread.
pub fn set_busy_window(window: Duration) {
    BUSY_WINDOW_MICROS.with(|w| w.set(window.as_micros() as u64));
}

static WAL_FALLBACK_WARNED: AtomicBool = AtomicBool::new(false);

/// Sleeps a random sub-millisecond interval; gives up once the busy window has passed.
fn jittered_busy_handler(attempt: i32) -> bool {
    // The mean sleep is ~0.75 ms, so the attempt count approximates the elapsed time.
    let mean_micros = BUSY_POLL_MAX_MICROS / 2;
    if (attempt.max(0) as u64) * mean_micros > BUSY_WINDOW_MICROS.with(|w| w.get()) {
        return false;
    }
    let micros = rand::rng().random_range(100..BUSY_POLL_MAX_MICROS);
    std::thread::sleep(Duration::from_micros(micros));
    true
}

fn apply_common_pragmas(conn: &mut Connection) -> StoreResult<()> {
    conn.busy_handler(Some(jittered_busy_handler))?;
    conn.execute_batch("PRAGMA foreign_keys = ON;")?;
    Ok(())
}

/// Opens the read-write connection: WAL (rollback journal where the filesystem refuses WAL),
/// `synchronous=FULL` so a commit acknowledged to a caller survives power loss too.
///
/// A new database file is created 0600 before SQLite opens it: SQLite gives the WAL,
/// shared-memory and journal files the database file's mode, so they are private too.
pub fn open_writer(path: &Path, cache: PageCache) -> StoreResult<Connection> {
    if path != Path::new(":memory:") && !path.as_os_str().is_empty() {
        crate::home::private::create_empty_if_missing(path)?;
    }
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    apply_common_pragmas(&mut conn)?;
    set_journal_mode(&conn, path)?;
    conn.execute_batch(&format!(
        "PRAGMA synchronous = FULL; PRAGMA cache_size = -{};",
        cache.writer_kib
    ))?;
    Ok(conn)
}

fn set_journal_mode(conn: &Connection, path: &Path) -> StoreResult<()> {
    match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
        Ok(mode) if mode.eq_ignore_ascii_case("wal") => Ok(()),
        outcome => {
            let reason = match outcome {
                Ok(mode) => format!("journal_mode stayed {mode}"),
                Err(e) => e.to_string(),
            };
            if !WAL_FALLBACK_WARNED.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    path = %path.display(),
                    reason,
                    "the filesystem refused WAL mode; using a rollback journal (slower, readers block writers)"
                );
            }
            conn.execute_batch("PRAGMA journal_mode = DELETE;")?;
            Ok(())
        }
    }
}

/// Opens a read-only connection for the reader pool.
pub fn open_reader(path: &Path, cache: PageCache) -> StoreResult<Connection> {
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    apply_common_pragmas(&mut conn)?;
    // Memory-mapped reads skip a syscall and a copy per page, which matters for searches and
    // conversation loads on large databases; the page cache is capped (see READER_CACHE_KIB).
    conn.execute_batch(&format!(
        "PRAGMA query_only = ON; PRAGMA mmap_size = 268435456; PRAGMA cache_size = -{};",
        cache.reader_kib
    ))?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_connection_has_a_capped_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let cache = |conn: &Connection| -> i64 {
            conn.query_row("PRAGMA cache_size", [], |r| r.get(0))
                .unwrap()
        };
        let writer = open_writer(&path, PageCache::default()).unwrap();
        assert_eq!(cache(&writer), -i64::from(WRITER_CACHE_KIB));
        let reader = open_reader(&path, PageCache::default()).unwrap();
        assert_eq!(cache(&reader), -i64::from(READER_CACHE_KIB));
        let other = PageCache {
            reader_kib: 16384,
            writer_kib: 2000,
        };
        assert_eq!(cache(&open_reader(&path, other).unwrap()), -16384);
    }
}
