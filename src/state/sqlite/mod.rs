//! The SQLite backend: the Hermes-compatible `$HERMES_HOME/state.db`, written by one writer
//! thread that group-commits typed commands from a bounded queue, read on a small pool of
//! read-only connections.

pub(crate) mod apply;
pub(crate) mod capabilities;
pub(crate) mod columns;
pub(crate) mod connection;
pub(crate) mod cron_runs;
pub(crate) mod fifo_gate;
pub(crate) mod gateway_commands;
pub(crate) mod gateway_read;
pub(crate) mod gateway_schema;
pub(crate) mod inspect;
pub(crate) mod newer;
pub(crate) mod read;
pub(crate) mod schema;
pub(crate) mod search;
pub(crate) mod titles;
pub(crate) mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::state::StoreOptions;
use crate::state::commands::{Outcome, WriteCommand};
use crate::state::error::{StoreError, StoreResult};
use connection::PageCache;
use schema::SchemaInfo;
use writer::{Envelope, WriteRequest, Writer, WriterStats};

/// An open state.db: one writer thread fed by a bounded queue, and pooled readers.
pub(crate) struct SqliteBackend {
    pub(crate) path: PathBuf,
    pub(crate) info: SchemaInfo,
    queue: mpsc::Sender<Envelope>,
    idle_readers: Mutex<Vec<Connection>>,
    max_idle_readers: usize,
    page_cache: PageCache,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl SqliteBackend {
    /// Opens (creating if needed) the database at `path` and starts its writer, which counts
    /// its work in `stats`.
    pub(crate) fn open(
        path: &Path,
        options: &StoreOptions,
        stats: Arc<WriterStats>,
    ) -> StoreResult<Self> {
        let mut conn = connection::open_writer(path, options.page_cache)?;
        let info = with_lock_retries(|| schema::initialise(&mut conn))?;
        let (queue, rx) = mpsc::channel(options.queue_capacity.max(1));
        let gate = fifo_gate::FifoGate::open(path)
            .inspect_err(|e| tracing::warn!(error = %e, "cannot open the writer queue files; relying on SQLite's lock"))
            .ok();
        let writer = Writer::new(conn, gate, options.retry, rx, stats, info.caps);
        note_newer_schema(path, &info);
        let writer_thread = std::thread::Builder::new()
            .name("state-writer".into())
            .spawn(move || writer.run())?;
        Ok(Self {
            path: path.to_path_buf(),
            info,
            queue,
            idle_readers: Mutex::new(Vec::new()),
            max_idle_readers: options.max_idle_readers,
            page_cache: options.page_cache,
            writer_thread: Mutex::new(Some(writer_thread)),
        })
    }

    /// Sends one write to the writer and waits for its committed result.
    pub(crate) async fn write(&self, command: WriteCommand) -> StoreResult<Outcome> {
        let (reply, result) = oneshot::channel();
        let request = WriteRequest {
            command,
            reply,
            enqueued: Instant::now(),
        };
        self.queue
            .send(Envelope::Write(request))
            .await
            .map_err(|_| StoreError::Closed)?;
        result.await.map_err(|_| StoreError::Closed)?
    }

    /// Runs a read on a pooled read-only connection, off the async threads.
    pub(crate) async fn read<T, F>(self: &Arc<Self>, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &SchemaInfo) -> StoreResult<T> + Send + 'static,
    {
        let sqlite = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let pooled = sqlite.idle_readers.lock().ok().and_then(|mut v| v.pop());
            let conn = match pooled {
                Some(conn) => conn,
                None => connection::open_reader(&sqlite.path, sqlite.page_cache)?,
            };
            let result = f(&conn, &sqlite.info);
            if let Ok(mut idle) = sqlite.idle_readers.lock()
                && idle.len() < sqlite.max_idle_readers
            {
                idle.push(conn);
            }
            result
        })
        .await
        .map_err(|e| StoreError::Invalid(format!("read task failed: {e}")))?
    }

    /// Whether the writer thread still runs.
    pub(crate) fn writer_alive(&self) -> bool {
        self.writer_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|thread| !thread.is_finished())
    }

    /// Stops the writer after it has committed everything queued before this call, then
    /// drops the pooled readers.
    pub(crate) async fn close(&self) {
        let (done, finished) = oneshot::channel();
        if self.queue.send(Envelope::Shutdown(done)).await.is_ok() {
            let _ = finished.await;
        }
        let handle = self.writer_thread.lock().ok().and_then(|mut h| h.take());
        if let Some(handle) = handle {
            let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        }
        if let Ok(mut idle) = self.idle_readers.lock() {
            idle.clear();
        }
    }
}

/// One line at start when the database belongs to a newer Hermes: which version, and what
/// hermesd writes into it to match.
fn note_newer_schema(path: &Path, info: &SchemaInfo) {
    if info.version <= schema::SCHEMA_VERSION && !info.caps.any() {
        return;
    }
    tracing::info!(
        path = %path.display(),
        schema_version = info.version,
        base_version = schema::SCHEMA_VERSION,
        writes = %info.caps.written().join(", "),
        cjk_index = info.caps.cjk_index.as_str(),
        "state.db was written by a newer Hermes; hermesd writes what that version expects"
    );
}

/// Retries an operation that needs the write lock during open (schema initialisation), with
/// the same jittered policy as the writer.
fn with_lock_retries<T>(mut op: impl FnMut() -> StoreResult<T>) -> StoreResult<T> {
    use rand::Rng;
    for _ in 1..writer::MAX_ATTEMPTS {
        match op() {
            Err(e) if e.is_busy() => {
                let jitter = rand::rng().random_range(20..150);
                std::thread::sleep(std::time::Duration::from_millis(jitter));
            }
            other => return other,
        }
    }
    op()
}
