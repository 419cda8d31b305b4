//! The approved users of each platform, cached in memory. Authorization asks on every
//! inbound event; reading and parsing `<platform>-approved.json` each time made every
//! message pay for file I/O. The cache is checked against the file's identity (inode, size,
//! modification and change times): every writer — hermesd, `hermesd pairing approve`, the
//! Python gateway — replaces the file atomically, so any approval or revocation shows up as
//! a new identity and the next check reads the file again. Shared rows (several instances on
//! PostgreSQL) carry a version that grows with every write instead.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::backing::Backing;
use super::entries::{ApprovedEntry, Slot};

/// What identifies one version of a file; `None` when it does not exist.
type Stamp = Option<(u64, u64, u64, i64, i64, i64, i64)>;

fn stamp(path: &Path) -> std::io::Result<Stamp> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some((
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[derive(Debug, Default)]
pub(super) struct ApprovedCache {
    platforms: Mutex<HashMap<String, (Stamp, HashSet<String>)>>,
    reads: AtomicU64,
}

impl ApprovedCache {
    /// The trimmed ids approved in `path`, read again only when the file changed.
    pub(super) fn contains(
        &self,
        backing: &Backing,
        platform: &str,
        path: &Path,
        user_id: &str,
    ) -> bool {
        let user_id = user_id.trim();
        if user_id.is_empty() {
            return false;
        }
        let now = match backing.shared_version(path) {
            // Shared rows: the row's version stands in for the file's identity.
            Some(version) => version.map(|v| v.map(|v| (0, 0, 0, v, 0, 0, 0))),
            None => stamp(path),
        };
        let now = match now {
            Ok(now) => now,
            Err(e) => {
                tracing::warn!(platform, error = %e, "pairing approvals unreadable; treating the user as not approved");
                return false;
            }
        };
        let mut platforms = self.platforms.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((seen, ids)) = platforms.get(platform)
            && *seen == now
        {
            return ids.contains(user_id);
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        let ids: HashSet<String> = match backing.read_object::<Slot<ApprovedEntry>>(path) {
            Ok(approved) => approved.keys().map(|id| id.trim().to_owned()).collect(),
            Err(e) => {
                tracing::warn!(platform, error = %e, "pairing approvals unreadable; treating the user as not approved");
                platforms.remove(platform);
                return false;
            }
        };
        let found = ids.contains(user_id);
        platforms.insert(platform.to_owned(), (now, ids));
        found
    }

    /// How many times an approvals file was read and parsed.
    pub(super) fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}
