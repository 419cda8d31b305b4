//! Files that every instance must see alike (the pairing files, MEMORY.md / USER.md) when
//! instances share no filesystem. With one instance they are plain files in the home and
//! their owners read them directly; with several, the same bytes live in the shared state
//! under names like their paths (`pairing/telegram-approved.json`, `memories/MEMORY.md`).
//!
//! The interface is synchronous: its users run on blocking threads under locks, like the
//! file code it stands in for.

use std::fmt::Debug;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A store of named byte strings with cluster-wide locks.
pub trait SharedFileStore: Send + Sync + Debug {
    /// The bytes stored under `name` and their version, `None` when nothing is.
    fn read(&self, name: &str) -> io::Result<Option<(Vec<u8>, i64)>>;
    /// The version of `name` (grows with every write), `None` when nothing is stored.
    fn version(&self, name: &str) -> io::Result<Option<i64>>;
    /// Replaces what `name` holds at once (readers see the old or the new bytes).
    fn write(&self, name: &str, bytes: &[u8]) -> io::Result<()>;
    /// The stored names starting with `prefix`, sorted.
    fn list(&self, prefix: &str) -> io::Result<Vec<String>>;
    /// Removes the names starting with `prefix` — only those last written longer than
    /// `older_than` ago, when given; returns how many went.
    fn remove(&self, prefix: &str, older_than: Option<Duration>) -> io::Result<u64>;
    /// Waits for the lock on `name` across every instance and holds it until the guard drops.
    fn lock(&self, name: &str) -> io::Result<SharedLock>;
}

/// A held lock on a shared name; released when dropped.
pub struct SharedLock {
    _held: Box<dyn Send>,
}

impl SharedLock {
    /// Wraps a backend's guard, whose drop releases the lock.
    pub fn new(guard: impl Send + 'static) -> Self {
        Self {
            _held: Box::new(guard),
        }
    }
}

impl Debug for SharedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedLock")
    }
}

/// A handle to the shared files. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SharedFiles {
    store: Arc<dyn SharedFileStore>,
}

impl SharedFiles {
    pub fn new(store: Arc<dyn SharedFileStore>) -> Self {
        Self { store }
    }

    pub fn read(&self, name: &str) -> io::Result<Option<(Vec<u8>, i64)>> {
        self.store.read(name)
    }

    pub fn version(&self, name: &str) -> io::Result<Option<i64>> {
        self.store.version(name)
    }

    pub fn write(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.store.write(name, bytes)
    }

    pub fn list(&self, prefix: &str) -> io::Result<Vec<String>> {
        self.store.list(prefix)
    }

    pub fn remove(&self, prefix: &str, older_than: Option<Duration>) -> io::Result<u64> {
        self.store.remove(prefix, older_than)
    }

    pub fn lock(&self, name: &str) -> io::Result<SharedLock> {
        self.store.lock(name)
    }
}

/// The shared name of the file at `path` inside the home directory `dir` (`pairing`,
/// `memories`): `<dir>/<file name>`.
pub fn shared_name(dir: &str, path: &Path) -> String {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    format!("{dir}/{file}")
}
