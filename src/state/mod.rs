//! The state database: the Hermes-compatible `$HERMES_HOME/state.db` behind one writer, or
//! (`state.backend: postgres`) a PostgreSQL database shared by several instances.
//!
//! [`Store`] is a cheap, cloneable handle with one API over both backends, chosen at open;
//! callers never learn which one answers. On SQLite (`sqlite/`), writes travel as typed
//! commands over a bounded queue to the writer thread, which group-commits them; reads run on
//! a small pool of read-only connections on tokio's blocking threads. On PostgreSQL
//! ([`postgres`]) the same commands and reads run on a connection pool. Coordination between
//! instances (leases, notifications) is asked of [`Store::coordinator`], a `crate::coord`
//! handle. Only this module contains SQL or names a database driver.

mod commands;
mod cron_runs;
mod dead_letters;
mod encode;
mod error;
mod gateway_api;
pub mod guard;
mod ledger;
mod model;
mod outcome;
pub mod postgres;
mod sessions_api;
mod shared_files;
mod sqlite;
pub mod transfer;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;

pub use commands::{Outcome, WriteCommand};
pub use cron_runs::{CronRun, CronRunEnd};
pub use dead_letters::DeadLetterRow;
pub use encode::content_text;
pub use error::{BackendFailure, SqliteFailure, StoreError, StoreResult};
pub use gateway_api::routing_scope;
pub use ledger::*;
pub use model::*;
pub use shared_files::shared_files;
pub use sqlite::capabilities::{Capabilities, OptionalIndex};
pub use sqlite::connection::{PageCache, READER_CACHE_KIB, WRITER_CACHE_KIB};
pub use sqlite::gateway_schema::GATEWAY_TABLES;
pub use sqlite::inspect::{Inspection, WriteProbeError, inspect_read_only, try_write};
pub use sqlite::schema::{SCHEMA_VERSION, SchemaInfo};
pub use sqlite::search::sanitize_fts5_query;
pub use sqlite::titles::{MAX_TITLE_LENGTH, sanitize_title};
pub use sqlite::writer::{RetryPolicy, WriterStats};

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
    pub page_cache: sqlite::connection::PageCache,
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
            page_cache: sqlite::connection::PageCache::default(),
            instance_id: None,
            lease_ttl: postgres::DEFAULT_LEASE_TTL,
        }
    }
}

/// Where the state lives; chosen once, when the store is opened.
enum Backend {
    Sqlite(Arc<sqlite::SqliteBackend>),
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
        let stats = Arc::new(WriterStats::default());
        let sqlite = sqlite::SqliteBackend::open(path, &options, Arc::clone(&stats))?;
        Ok(Self {
            inner: Arc::new(Inner {
                backend: Backend::Sqlite(Arc::new(sqlite)),
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
            pg.renewals().clone(),
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

    /// What this instance's reply sends are checked against: the local deadline of its
    /// instance lease, which owns the replies it claims; unbounded with a state of its own.
    pub fn send_trust(&self) -> crate::coord::Trust {
        match &self.inner.backend {
            Backend::Postgres(pg) => pg.instance_trust().clone(),
            Backend::Sqlite(_) => crate::coord::Trust::unbounded(),
        }
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

    fn sqlite(&self) -> StoreResult<&Arc<sqlite::SqliteBackend>> {
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
                // PostgreSQL keeps its own schema: prompts inline, no Hermes extras.
                caps: Default::default(),
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
        sqlite.write(command).await
    }

    /// Runs a read on a pooled read-only SQLite connection, off the async threads. (Each
    /// public read dispatches to the PostgreSQL backend before it gets here.)
    pub async fn read<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &SchemaInfo) -> StoreResult<T> + Send + 'static,
    {
        self.sqlite()?.read(f).await
    }

    /// Whether the writer thread still runs. Once it is gone (it panicked, or the store
    /// was closed) no write can succeed, so the daemon can no longer answer anyone. A
    /// PostgreSQL pool has no writer thread: it is alive until closed.
    pub fn writer_alive(&self) -> bool {
        match &self.inner.backend {
            Backend::Sqlite(sqlite) => sqlite.writer_alive(),
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
        sqlite.close().await;
    }
}
