//! The state database: the Hermes-compatible `$HERMES_HOME/state.db` behind one writer, or
//! (`state.backend: postgres`) a PostgreSQL database shared by several instances.
//!
//! [`Store`] is a cheap, cloneable handle with one API over both backends, chosen at open.
//! On SQLite, writes travel as typed commands over a bounded queue to the writer thread
//! ([`writer`]), which group-commits them; reads run on a small pool of read-only connections
//! on tokio's blocking threads. On PostgreSQL ([`postgres`]) the same commands and reads run
//! on a connection pool. Only this module contains SQL.

mod columns;
mod commands;
mod connection;
mod cron_runs;
mod dead_letters;
mod encode;
mod error;
mod fifo_gate;
mod gateway_api;
mod gateway_commands;
mod gateway_read;
mod gateway_schema;
pub mod guard;
mod inspect;
mod ledger;
mod model;
pub mod postgres;
mod read;
mod schema;
mod search;
mod shared_files;
mod titles;
pub mod transfer;
mod writer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rusqlite::Connection;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

pub use commands::{Outcome, WriteCommand};
pub use connection::{PageCache, READER_CACHE_KIB, WRITER_CACHE_KIB};
pub use cron_runs::{CronRun, CronRunEnd};
pub use dead_letters::DeadLetterRow;
pub use encode::content_text;
pub use error::{BackendFailure, SqliteFailure, StoreError, StoreResult};
pub use gateway_schema::GATEWAY_TABLES;
pub use inspect::{Inspection, inspect_read_only};
pub use ledger::*;
pub use model::*;
pub use schema::{SCHEMA_VERSION, SchemaInfo};
pub use search::sanitize_fts5_query;
pub use shared_files::shared_files;
pub use titles::{MAX_TITLE_LENGTH, sanitize_title};
pub use writer::{RetryPolicy, WriterStats};

use writer::{Envelope, WriteRequest, Writer};

use crate::coord::{Coordinator, Lease};

/// Tunables for opening a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Capacity of the write queue; senders wait when it is full.
    pub queue_capacity: usize,
    /// Read-only connections kept open for reuse.
    pub max_idle_readers: usize,
    /// The environment used by the test-isolation guard.
    pub env: BTreeMap<String, String>,
    /// How long and how often to retry when another process holds the write lock.
    pub retry: RetryPolicy,
    /// The process stamped as owner of the delivery obligations this store claims (this
    /// process; tests stand in for another one).
    pub ledger_owner: OwnerStamp,
    /// Page-cache caps of the writer and of each reader (benchmarks compare settings).
    pub page_cache: connection::PageCache,
    /// PostgreSQL: this instance's name among those sharing the database (a fresh unique
    /// one when `None`).
    pub instance_id: Option<String>,
    /// PostgreSQL: how long a lease (session, instance, ingress) outlives its holder's last
    /// renewal (`state.lease_seconds`).
    pub lease_ttl: std::time::Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            queue_capacity: 4096,
            max_idle_readers: 4,
            env: std::env::vars().collect(),
            retry: RetryPolicy::default(),
            ledger_owner: OwnerStamp::current(),
            page_cache: connection::PageCache::default(),
            instance_id: None,
            lease_ttl: postgres::DEFAULT_LEASE_TTL,
        }
    }
}

/// The SQLite backend: one writer thread fed by a bounded queue, and pooled readers.
struct SqliteInner {
    path: PathBuf,
    info: SchemaInfo,
    queue: mpsc::Sender<Envelope>,
    idle_readers: Mutex<Vec<Connection>>,
    max_idle_readers: usize,
    page_cache: connection::PageCache,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Where the state lives; chosen once, when the store is opened.
enum Backend {
    Sqlite(SqliteInner),
    Postgres(postgres::PgStore),
}

struct Inner {
    backend: Backend,
    /// Leases and notifications: this process alone on SQLite, the cluster on PostgreSQL.
    coordinator: Coordinator,
    ledger_owner: OwnerStamp,
    stats: Arc<WriterStats>,
}

/// A handle to the state database (state.db, or PostgreSQL with `state.backend: postgres`).
/// Clone it freely; all clones share one writer (or one pool).
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
    /// The session lease this handle's writes are fenced by (PostgreSQL only): set by
    /// [`Store::fenced`] for the writes of one turn.
    fence: Option<Arc<Lease>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner.backend {
            Backend::Sqlite(sqlite) => write!(f, "Store({})", sqlite.path.display()),
            Backend::Postgres(pg) => write!(f, "Store({})", pg.shown_url()),
        }
    }
}

impl Store {
    /// Opens (creating if needed) the database at `path` with default options.
    pub fn open(path: &Path) -> StoreResult<Self> {
        Self::open_with(path, StoreOptions::default())
    }

    pub fn open_with(path: &Path, options: StoreOptions) -> StoreResult<Self> {
        guard::check(path, &options.env)?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            crate::home::private::create_dir_all(parent)?;
        }
        let mut conn = connection::open_writer(path, options.page_cache)?;
        let info = with_lock_retries(|| schema::initialise(&mut conn))?;
        let (queue, rx) = mpsc::channel(options.queue_capacity.max(1));
        let stats = Arc::new(WriterStats::default());
        let gate = fifo_gate::FifoGate::open(path)
            .inspect_err(|e| tracing::warn!(error = %e, "cannot open the writer queue files; relying on SQLite's lock"))
            .ok();
        let writer = Writer::new(conn, gate, options.retry, rx, Arc::clone(&stats));
        let writer_thread = std::thread::Builder::new()
            .name("state-writer".into())
            .spawn(move || writer.run())?;
        let sqlite = SqliteInner {
            path: path.to_path_buf(),
            info,
            queue,
            idle_readers: Mutex::new(Vec::new()),
            max_idle_readers: options.max_idle_readers,
            page_cache: options.page_cache,
            writer_thread: Mutex::new(Some(writer_thread)),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                backend: Backend::Sqlite(sqlite),
                coordinator: Coordinator::solo(
                    options
                        .instance_id
                        .clone()
                        .unwrap_or_else(|| "local".to_owned()),
                    options.lease_ttl,
                ),
                ledger_owner: options.ledger_owner,
                stats,
            }),
            fence: None,
        })
    }

    /// Connects to PostgreSQL at `url` (a secret: errors show it redacted) and migrates its
    /// schema; the same API then runs on it.
    pub async fn open_postgres(url: &str, options: StoreOptions) -> StoreResult<Self> {
        let pg = postgres::PgStore::open(url, &options).await?;
        let coordinator = Coordinator::new(Arc::new(postgres::PgCoordination::new(
            pg.pool().clone(),
            pg.instance_id(),
            pg.lease_ttl(),
        )));
        Ok(Self {
            inner: Arc::new(Inner {
                backend: Backend::Postgres(pg),
                coordinator,
                ledger_owner: options.ledger_owner,
                stats: Arc::new(WriterStats::default()),
            }),
            fence: None,
        })
    }

    /// A handle whose writes are all fenced by `lease` (PostgreSQL): once another instance
    /// holds the session's lease, they fail with a lease-lost error instead of landing.
    /// On SQLite (one process owns the file) the fence is not needed and is ignored.
    pub fn fenced(&self, lease: Lease) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            fence: Some(Arc::new(lease)),
        }
    }

    /// The coordination of the instances sharing this state (leases, notifications): this
    /// process alone on SQLite, every instance on the database on PostgreSQL.
    pub fn coordinator(&self) -> &Coordinator {
        &self.inner.coordinator
    }

    /// Whether other instances may share this state (PostgreSQL), so their work must be
    /// coordinated and their rows are the cluster's rather than this home's.
    pub fn is_shared(&self) -> bool {
        self.inner.coordinator.is_shared()
    }

    /// Where the state lives, as it may be shown: the state.db path, or the database URL
    /// without its password.
    pub fn shown_location(&self) -> String {
        match &self.inner.backend {
            Backend::Sqlite(sqlite) => sqlite.path.display().to_string(),
            Backend::Postgres(pg) => pg.shown_url().to_owned(),
        }
    }

    /// The PostgreSQL backend, when that is where the state lives. For this module and the
    /// PostgreSQL tests; code outside `state` asks [`Store::coordinator`] instead.
    pub fn postgres(&self) -> Option<&postgres::PgStore> {
        match &self.inner.backend {
            Backend::Postgres(pg) => Some(pg),
            Backend::Sqlite(_) => None,
        }
    }

    fn sqlite(&self) -> StoreResult<&SqliteInner> {
        match &self.inner.backend {
            Backend::Sqlite(sqlite) => Ok(sqlite),
            Backend::Postgres(_) => Err(StoreError::Invalid(
                "a SQLite-only operation was called on the PostgreSQL backend".into(),
            )),
        }
    }

    /// The state.db path; empty on PostgreSQL.
    pub fn path(&self) -> &Path {
        match &self.inner.backend {
            Backend::Sqlite(sqlite) => &sqlite.path,
            Backend::Postgres(_) => Path::new(""),
        }
    }

    /// state.db's schema; on PostgreSQL, the schema version the migrations provide.
    pub fn schema(&self) -> SchemaInfo {
        match &self.inner.backend {
            Backend::Sqlite(sqlite) => sqlite.info,
            Backend::Postgres(_) => SchemaInfo {
                version: SCHEMA_VERSION,
                has_active_column: false,
            },
        }
    }

    pub fn stats(&self) -> &WriterStats {
        &self.inner.stats
    }

    /// Sends one write to the writer and waits for its committed result.
    pub async fn write(&self, command: WriteCommand) -> StoreResult<Outcome> {
        let sqlite = match &self.inner.backend {
            Backend::Sqlite(sqlite) => sqlite,
            Backend::Postgres(pg) => {
                // A handle fenced explicitly, or any handle inside a fenced turn's task.
                let fence = self.fence.clone().or_else(postgres::current_fence);
                return pg.apply(command, fence.as_deref()).await;
            }
        };
        let (reply, result) = oneshot::channel();
        let request = WriteRequest {
            command,
            reply,
            enqueued: Instant::now(),
        };
        sqlite
            .queue
            .send(Envelope::Write(request))
            .await
            .map_err(|_| StoreError::Closed)?;
        result.await.map_err(|_| StoreError::Closed)?
    }

    /// Runs a read on a pooled read-only SQLite connection, off the async threads. (Each
    /// public read dispatches to the PostgreSQL backend before it gets here.)
    pub async fn read<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &SchemaInfo) -> StoreResult<T> + Send + 'static,
    {
        self.sqlite()?;
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let Backend::Sqlite(sqlite) = &inner.backend else {
                unreachable!("checked above")
            };
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

    /// Whether the writer thread still runs. Once it is gone (it panicked, or the store
    /// was closed) no write can succeed, so the daemon can no longer answer anyone. A
    /// PostgreSQL pool has no writer thread: it is alive until closed.
    pub fn writer_alive(&self) -> bool {
        match &self.inner.backend {
            Backend::Sqlite(sqlite) => sqlite
                .writer_thread
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_some_and(|thread| !thread.is_finished()),
            Backend::Postgres(pg) => !pg.pool().is_closed(),
        }
    }

    /// Stops the writer after it has committed everything queued before this call, then
    /// checkpoints. Later writes through any clone fail with [`StoreError::Closed`].
    pub async fn close(&self) {
        let sqlite = match &self.inner.backend {
            Backend::Sqlite(sqlite) => sqlite,
            Backend::Postgres(pg) => return pg.close().await,
        };
        let (done, finished) = oneshot::channel();
        if sqlite.queue.send(Envelope::Shutdown(done)).await.is_ok() {
            let _ = finished.await;
        }
        let handle = sqlite.writer_thread.lock().ok().and_then(|mut h| h.take());
        if let Some(handle) = handle {
            let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        }
        if let Ok(mut idle) = sqlite.idle_readers.lock() {
            idle.clear();
        }
    }

    // ---- sessions -------------------------------------------------------------------------

    pub async fn create_session(&self, session: NewSession) -> StoreResult<()> {
        self.write(WriteCommand::CreateSession(session)).await?;
        Ok(())
    }

    /// Ends a live session; the first reason wins. Returns whether this call ended it.
    pub async fn end_session(&self, id: &str, reason: &str) -> StoreResult<bool> {
        let outcome = self
            .write(WriteCommand::EndSession {
                id: id.to_owned(),
                reason: reason.to_owned(),
            })
            .await?;
        Ok(outcome.changed() > 0)
    }

    pub async fn reopen_session(&self, id: &str) -> StoreResult<bool> {
        let outcome = self
            .write(WriteCommand::ReopenSession { id: id.to_owned() })
            .await?;
        Ok(outcome.changed() > 0)
    }

    pub async fn get_session(&self, id: &str) -> StoreResult<Option<Session>> {
        if let Some(pg) = self.postgres() {
            return postgres::get_session(pg.pool(), id).await;
        }
        let id = id.to_owned();
        self.read(move |c, _| read::get_session(c, &id)).await
    }

    /// An exact id or a unique prefix of one.
    pub async fn resolve_session_id(&self, prefix: &str) -> StoreResult<String> {
        if let Some(pg) = self.postgres() {
            return postgres::resolve_session_id(pg.pool(), prefix).await;
        }
        let prefix = prefix.to_owned();
        self.read(move |c, _| read::resolve_session_id(c, &prefix))
            .await
    }

    pub async fn recent_sessions(
        &self,
        source: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<SessionSummary>> {
        if let Some(pg) = self.postgres() {
            return postgres::recent_sessions(pg.pool(), source, limit).await;
        }
        let source = source.map(str::to_owned);
        self.read(move |c, info| read::recent_sessions(c, info, source.as_deref(), limit))
            .await
    }

    /// Deletes a session and its messages; its children are orphaned, not deleted.
    pub async fn delete_session(&self, id: &str) -> StoreResult<bool> {
        let outcome = self
            .write(WriteCommand::DeleteSessions {
                ids: vec![id.to_owned()],
            })
            .await?;
        Ok(outcome.changed() > 0)
    }

    /// Deletes ended sessions older than `older_than_days`, in small transactions so other
    /// writers are never held up for long. Returns how many were deleted.
    pub async fn prune_sessions(
        &self,
        older_than_days: f64,
        source: Option<&str>,
    ) -> StoreResult<usize> {
        const PRUNE_CHUNK: usize = 25;
        let source = source.map(str::to_owned);
        let now = now_epoch();
        let ids = match self.postgres() {
            Some(pg) => {
                postgres::prune_candidates(pg.pool(), older_than_days, source.as_deref(), now)
                    .await?
            }
            None => {
                self.read(move |c, _| {
                    read::prune_candidates(c, older_than_days, source.as_deref(), now)
                })
                .await?
            }
        };
        let mut deleted = 0;
        for chunk in ids.chunks(PRUNE_CHUNK) {
            let outcome = self
                .write(WriteCommand::DeleteSessions {
                    ids: chunk.to_vec(),
                })
                .await?;
            deleted += outcome.changed();
        }
        Ok(deleted)
    }

    pub async fn record_usage(&self, usage: UsageDelta) -> StoreResult<()> {
        self.write(WriteCommand::RecordUsage(usage)).await?;
        Ok(())
    }

    // ---- messages -------------------------------------------------------------------------

    /// Appends a message and bumps the session's counters; returns the message id.
    pub async fn append_message(&self, message: NewMessage) -> StoreResult<i64> {
        match self
            .write(WriteCommand::AppendMessage(Box::new(message)))
            .await?
        {
            Outcome::RowId(id) => Ok(id),
            other => Err(StoreError::Invalid(format!(
                "append returned {other:?} instead of a row id"
            ))),
        }
    }

    /// Appends a gateway turn's user message and marks its inbound event `processing`
    /// atomically; returns the message id.
    pub async fn start_turn(
        &self,
        message: NewMessage,
        platform: &str,
        event_id: &str,
    ) -> StoreResult<i64> {
        match self
            .write(WriteCommand::StartTurn {
                message: Box::new(message),
                platform: platform.to_owned(),
                event_id: event_id.to_owned(),
            })
            .await?
        {
            Outcome::RowId(id) => Ok(id),
            other => Err(StoreError::Invalid(format!(
                "start_turn returned {other:?} instead of a row id"
            ))),
        }
    }

    pub async fn get_messages(&self, session_id: &str) -> StoreResult<Vec<Message>> {
        if let Some(pg) = self.postgres() {
            return postgres::get_messages(pg.pool(), session_id).await;
        }
        let id = session_id.to_owned();
        self.read(move |c, info| read::get_messages(c, info, &id))
            .await
    }

    /// The session as an OpenAI-format conversation (`role`, `content`, tool fields).
    pub async fn get_messages_as_conversation(&self, session_id: &str) -> StoreResult<Vec<Value>> {
        let messages = self.get_messages(session_id).await?;
        Ok(read::as_conversation(&messages))
    }

    /// Deletes a session's messages with ids `from_id` and up; returns how many.
    pub async fn truncate_messages(&self, session_id: &str, from_id: i64) -> StoreResult<usize> {
        let outcome = self
            .write(WriteCommand::TruncateMessages {
                id: session_id.to_owned(),
                from_id,
            })
            .await?;
        Ok(outcome.changed())
    }

    /// Removes a session's messages but keeps the session row.
    pub async fn clear_messages(&self, session_id: &str) -> StoreResult<usize> {
        let outcome = self
            .write(WriteCommand::ClearMessages {
                id: session_id.to_owned(),
            })
            .await?;
        Ok(outcome.changed())
    }

    pub async fn search(&self, query: SearchQuery) -> StoreResult<Vec<SearchHit>> {
        if let Some(pg) = self.postgres() {
            return postgres::search(pg.pool(), &query).await;
        }
        self.read(move |c, info| search::search(c, info, &query))
            .await
    }

    // ---- titles and lineage ---------------------------------------------------------------

    /// Sets a title (sanitised, ≤ 100 characters, unique); `None` or blank clears it.
    pub async fn set_session_title(&self, id: &str, title: Option<&str>) -> StoreResult<()> {
        self.write(WriteCommand::SetTitle {
            id: id.to_owned(),
            title: title.map(str::to_owned),
        })
        .await?;
        Ok(())
    }

    /// Sets a generated title only if the session is still untitled; true when it was set.
    /// A title held by another session fails with `TitleInUse` (pick a `#N` variant).
    pub async fn set_auto_title_if_empty(&self, id: &str, title: &str) -> StoreResult<bool> {
        let outcome = self
            .write(WriteCommand::SetTitleIfEmpty {
                id: id.to_owned(),
                title: title.to_owned(),
            })
            .await?;
        Ok(outcome.changed() > 0)
    }

    pub async fn next_title_in_lineage(&self, title: &str) -> StoreResult<String> {
        if let Some(pg) = self.postgres() {
            return postgres::next_title_in_lineage(pg.pool(), title).await;
        }
        let title = title.to_owned();
        self.read(move |c, _| titles::next_title_in_lineage(c, &title))
            .await
    }

    pub async fn resolve_session_by_title(&self, title: &str) -> StoreResult<Option<String>> {
        if let Some(pg) = self.postgres() {
            return postgres::resolve_by_title(pg.pool(), title).await;
        }
        let title = title.to_owned();
        self.read(move |c, _| titles::resolve_by_title(c, &title))
            .await
    }

    pub async fn ancestors(&self, id: &str) -> StoreResult<Vec<LineageEntry>> {
        if let Some(pg) = self.postgres() {
            return postgres::ancestors(pg.pool(), id).await;
        }
        let id = id.to_owned();
        self.read(move |c, _| read::ancestors(c, &id)).await
    }

    pub async fn descendants(&self, id: &str) -> StoreResult<Vec<LineageEntry>> {
        if let Some(pg) = self.postgres() {
            return postgres::descendants(pg.pool(), id).await;
        }
        let id = id.to_owned();
        self.read(move |c, _| read::descendants(c, &id)).await
    }

    // ---- statistics and export ------------------------------------------------------------

    pub async fn model_stats(&self) -> StoreResult<Vec<ModelStats>> {
        if let Some(pg) = self.postgres() {
            return postgres::model_stats(pg.pool()).await;
        }
        self.read(|c, _| read::model_stats(c)).await
    }

    pub async fn export_session(&self, id: &str) -> StoreResult<Option<SessionExport>> {
        if let Some(pg) = self.postgres() {
            return postgres::export_session(pg.pool(), id).await;
        }
        let id = id.to_owned();
        self.read(move |c, info| read::export_session(c, info, &id))
            .await
    }

    pub async fn export_all(&self, source: Option<&str>) -> StoreResult<Vec<SessionExport>> {
        if let Some(pg) = self.postgres() {
            return postgres::export_all(pg.pool(), source).await;
        }
        let source = source.map(str::to_owned);
        self.read(move |c, info| read::export_all(c, info, source.as_deref()))
            .await
    }
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
