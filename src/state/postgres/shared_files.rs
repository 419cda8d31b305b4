//! Files that several instances must share, kept in PostgreSQL (`hermesd_shared_files`):
//! the pairing files and the agent's MEMORY.md / USER.md. With one machine they are files in
//! `HERMES_HOME`; instances on different machines share no filesystem, so in
//! `state.backend: postgres` mode the same bytes live in rows named like their paths
//! (`pairing/telegram-approved.json`, `memories/MEMORY.md`). Their owners keep every rule and
//! every format; only where the bytes live changes.
//!
//! The owners are synchronous (they run on blocking threads, under locks, like the file code
//! they replace), so this is a synchronous API over a thread of its own: requests go to a
//! small current-thread runtime with its own pool and come back over a std channel. That
//! blocks only the caller, never a runtime worker of the daemon. Locks are session-level
//! advisory locks held on a connection set aside for the lock's lifetime: a process that dies
//! holding one loses its session, and with it the lock.

use std::collections::HashSet;
use std::io;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Condvar, Mutex};

use sqlx::Row;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPool, Postgres};
use tokio::sync::mpsc;

/// Connections of the shared-files pool. A held lock keeps one; within a process at most one
/// caller per name waits on the database (`LocalNames`), so a few names in use at once leave
/// room for the reads and writes their holders make.
const POOL_SIZE: u32 = 8;

type Reply<T> = std_mpsc::Sender<io::Result<T>>;

enum Request {
    Read(String, Reply<Option<(Vec<u8>, i64)>>),
    Version(String, Reply<Option<i64>>),
    Write(String, Vec<u8>, Reply<()>),
    List(String, Reply<Vec<String>>),
    Remove(String, Option<std::time::Duration>, Reply<u64>),
    Lock(String, Reply<u64>),
    Unlock(u64),
}

/// A handle to the shared files. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SharedFiles {
    requests: mpsc::UnboundedSender<Request>,
    local: Arc<LocalNames>,
}

/// The names this process holds or is taking a lock on. Callers of one process queue here,
/// not on the database: otherwise each would park a pooled connection in
/// `pg_advisory_lock` and the holder could find no connection left to do its work with.
#[derive(Debug, Default)]
struct LocalNames {
    held: Mutex<HashSet<String>>,
    released: Condvar,
}

impl LocalNames {
    fn take(&self, name: &str) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        while held.contains(name) {
            held = self.released.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        held.insert(name.to_owned());
    }

    fn give_back(&self, name: &str) {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        self.released.notify_all();
    }
}

/// A held advisory lock on a name; released when dropped.
#[derive(Debug)]
pub struct SharedLock {
    id: u64,
    name: String,
    requests: mpsc::UnboundedSender<Request>,
    local: Arc<LocalNames>,
}

impl Drop for SharedLock {
    fn drop(&mut self) {
        let _ = self.requests.send(Request::Unlock(self.id));
        self.local.give_back(&self.name);
    }
}

fn pg_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("shared files in PostgreSQL: {e}"))
}

impl SharedFiles {
    /// Connects to `url` (a secret: errors show it redacted) and brings the schema up to
    /// date. The connection lives on a thread of its own until every handle is dropped.
    pub fn open(url: &str) -> io::Result<Self> {
        let (requests, mut rx) = mpsc::unbounded_channel::<Request>();
        let (ready, started) = std_mpsc::channel::<io::Result<()>>();
        let url = url.to_owned();
        std::thread::Builder::new()
            .name("shared-files".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let opened = async {
                        super::migrate(&url).await?;
                        super::connect(&url, POOL_SIZE).await
                    }
                    .await;
                    let pool = match opened {
                        Ok(pool) => {
                            let _ = ready.send(Ok(()));
                            pool
                        }
                        Err(e) => {
                            let _ = ready.send(Err(pg_error(e)));
                            return;
                        }
                    };
                    let locks = Arc::new(tokio::sync::Mutex::new(std::collections::HashMap::<
                        u64,
                        PoolConnection<Postgres>,
                    >::new()));
                    let mut next_lock = 0u64;
                    while let Some(request) = rx.recv().await {
                        // Each request runs as its own task, so a caller waiting for a lock
                        // never holds up another caller's unlock.
                        let (pool, locks) = (pool.clone(), locks.clone());
                        if let Request::Lock(..) = request {
                            next_lock += 1;
                        }
                        let lock_id = next_lock;
                        tokio::spawn(serve(pool, locks, request, lock_id));
                    }
                    pool.close().await;
                });
            })?;
        started
            .recv()
            .map_err(|_| pg_error("the shared-files thread stopped"))??;
        Ok(Self {
            requests,
            local: Arc::default(),
        })
    }

    fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> io::Result<T> {
        let (reply, answer) = std_mpsc::channel();
        self.requests
            .send(make(reply))
            .map_err(|_| pg_error("the shared-files thread stopped"))?;
        answer
            .recv()
            .map_err(|_| pg_error("the shared-files thread stopped"))?
    }

    /// The bytes stored under `name` and their version, `None` when nothing is.
    pub fn read(&self, name: &str) -> io::Result<Option<(Vec<u8>, i64)>> {
        self.ask(|reply| Request::Read(name.to_owned(), reply))
    }

    /// The version of `name` (grows with every write), `None` when nothing is stored.
    pub fn version(&self, name: &str) -> io::Result<Option<i64>> {
        self.ask(|reply| Request::Version(name.to_owned(), reply))
    }

    /// Replaces what `name` holds, in one statement (readers see the old or the new bytes).
    pub fn write(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.ask(|reply| Request::Write(name.to_owned(), bytes.to_vec(), reply))
    }

    /// The stored names starting with `prefix`, sorted.
    pub fn list(&self, prefix: &str) -> io::Result<Vec<String>> {
        self.ask(|reply| Request::List(prefix.to_owned(), reply))
    }

    /// Removes the names starting with `prefix` (only those last written longer than
    /// `older_than` ago, when given); returns how many went.
    pub fn remove(&self, prefix: &str, older_than: Option<std::time::Duration>) -> io::Result<u64> {
        self.ask(|reply| Request::Remove(prefix.to_owned(), older_than, reply))
    }

    /// Waits for the advisory lock on `name` (cluster-wide) and holds it until the returned
    /// guard is dropped.
    pub fn lock(&self, name: &str) -> io::Result<SharedLock> {
        self.local.take(name);
        let id = self
            .ask(|reply| Request::Lock(name.to_owned(), reply))
            .inspect_err(|_| self.local.give_back(name))?;
        Ok(SharedLock {
            id,
            name: name.to_owned(),
            requests: self.requests.clone(),
            local: Arc::clone(&self.local),
        })
    }
}

type Locks = Arc<tokio::sync::Mutex<std::collections::HashMap<u64, PoolConnection<Postgres>>>>;

async fn serve(pool: PgPool, locks: Locks, request: Request, lock_id: u64) {
    match request {
        Request::Read(name, reply) => {
            let row = sqlx::query("SELECT body, version FROM hermesd_shared_files WHERE name = $1")
                .bind(&name)
                .fetch_optional(&pool)
                .await
                .map_err(pg_error)
                .map(|row| row.map(|r| (r.get::<Vec<u8>, _>(0), r.get::<i64, _>(1))));
            let _ = reply.send(row);
        }
        Request::Version(name, reply) => {
            let version =
                sqlx::query_scalar("SELECT version FROM hermesd_shared_files WHERE name = $1")
                    .bind(&name)
                    .fetch_optional(&pool)
                    .await
                    .map_err(pg_error);
            let _ = reply.send(version);
        }
        Request::Write(name, bytes, reply) => {
            let done = sqlx::query(
                "INSERT INTO hermesd_shared_files (name, body) VALUES ($1, $2) \
                 ON CONFLICT (name) DO UPDATE SET body = EXCLUDED.body, \
                 version = hermesd_shared_files.version + 1, updated_at = now()",
            )
            .bind(&name)
            .bind(&bytes)
            .execute(&pool)
            .await
            .map(|_| ())
            .map_err(pg_error);
            let _ = reply.send(done);
        }
        Request::List(prefix, reply) => {
            let names = sqlx::query_scalar(
                "SELECT name FROM hermesd_shared_files WHERE starts_with(name, $1) ORDER BY name",
            )
            .bind(&prefix)
            .fetch_all(&pool)
            .await
            .map_err(pg_error);
            let _ = reply.send(names);
        }
        Request::Remove(prefix, older_than, reply) => {
            let removed = sqlx::query(
                "DELETE FROM hermesd_shared_files WHERE starts_with(name, $1) \
                 AND ($2::float8 IS NULL OR updated_at < now() - make_interval(secs => $2))",
            )
            .bind(&prefix)
            .bind(older_than.map(|age| age.as_secs_f64()))
            .execute(&pool)
            .await
            .map(|done| done.rows_affected())
            .map_err(pg_error);
            let _ = reply.send(removed);
        }
        Request::Lock(name, reply) => {
            let locked = async {
                let mut conn = pool.acquire().await?;
                sqlx::query("SELECT pg_advisory_lock(hashtextextended($1, 0))")
                    .bind(format!("hermesd-shared-file:{name}"))
                    .execute(&mut *conn)
                    .await?;
                Ok::<_, sqlx::Error>(conn)
            }
            .await;
            match locked {
                Ok(conn) => {
                    locks.lock().await.insert(lock_id, conn);
                    // A caller that gave up meanwhile drops its guard, whose unlock is queued
                    // behind this insert: the lock is released either way.
                    let _ = reply.send(Ok(lock_id));
                }
                Err(e) => {
                    let _ = reply.send(Err(pg_error(e)));
                }
            }
        }
        Request::Unlock(id) => {
            let held = locks.lock().await.remove(&id);
            if let Some(mut conn) = held {
                let released = sqlx::query("SELECT pg_advisory_unlock_all()")
                    .execute(&mut *conn)
                    .await;
                if let Err(e) = released {
                    // Never return a connection that may still hold the lock to the pool.
                    tracing::warn!(error = %e, "could not release a shared-file lock; closing its connection");
                    let _ = conn.detach();
                }
            }
        }
    }
}

impl crate::coord::SharedFileStore for SharedFiles {
    fn read(&self, name: &str) -> io::Result<Option<(Vec<u8>, i64)>> {
        SharedFiles::read(self, name)
    }

    fn version(&self, name: &str) -> io::Result<Option<i64>> {
        SharedFiles::version(self, name)
    }

    fn write(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        SharedFiles::write(self, name, bytes)
    }

    fn list(&self, prefix: &str) -> io::Result<Vec<String>> {
        SharedFiles::list(self, prefix)
    }

    fn remove(&self, prefix: &str, older_than: Option<std::time::Duration>) -> io::Result<u64> {
        SharedFiles::remove(self, prefix, older_than)
    }

    fn lock(&self, name: &str) -> io::Result<crate::coord::SharedLock> {
        SharedFiles::lock(self, name).map(crate::coord::SharedLock::new)
    }
}

impl From<SharedFiles> for crate::coord::SharedFiles {
    fn from(files: SharedFiles) -> Self {
        crate::coord::SharedFiles::new(Arc::new(files))
    }
}
