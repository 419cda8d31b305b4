//! The memory files on disk: parsing `\n§\n`-separated entries, the `flock` that
//! serialises read-modify-write across sessions, and the snapshot sanitiser.

use std::path::{Path, PathBuf};

use crate::coord::{SharedFiles, SharedLock};
use crate::tools::threats::scan_for_threats;

/// What separates two entries in a memory file.
pub const ENTRY_DELIMITER: &str = "\n§\n";

pub(super) fn char_len(entries: &[String]) -> usize {
    entries.join(ENTRY_DELIMITER).chars().count()
}

pub(super) fn dedup(entries: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for entry in entries {
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    out
}

pub(super) fn parse_entries(raw: &str) -> Vec<String> {
    raw.split(ENTRY_DELIMITER)
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Where MEMORY.md and USER.md live: the home's `memories/` directory, or — several
/// instances on PostgreSQL — shared rows named `memories/<file>` with the same bytes.
#[derive(Debug, Default)]
pub(super) enum Backing {
    #[default]
    Files,
    Shared(SharedFiles),
}

/// A held read-modify-write lock: `flock` on `<file>.lock`, or the shared row's advisory lock.
pub(super) enum MemoryLock {
    File(#[allow(dead_code)] std::fs::File),
    Shared(#[allow(dead_code)] SharedLock),
}

/// The shared-files name of a memory file.
pub(super) fn shared_name(path: &Path) -> String {
    crate::coord::shared_name("memories", path)
}

impl Backing {
    /// The file's text; `None` when it does not exist or cannot be read.
    pub(super) fn read(&self, path: &Path) -> Option<String> {
        match self {
            Backing::Files => std::fs::read_to_string(path).ok(),
            Backing::Shared(shared) => match shared.read(&shared_name(path)) {
                Ok(found) => found.map(|(bytes, _)| String::from_utf8_lossy(&bytes).into_owned()),
                Err(e) => {
                    tracing::warn!(file = %shared_name(path), error = %e, "cannot read shared memory");
                    None
                }
            },
        }
    }

    pub(super) fn write(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Backing::Files => {
                if let Some(dir) = path.parent() {
                    crate::home::private::create_dir_all(dir)?;
                }
                crate::tools::approval::write_atomically(path, bytes, Some(0o600))
            }
            Backing::Shared(shared) => shared.write(&shared_name(path), bytes),
        }
    }

    pub(super) fn lock(&self, path: &Path) -> Option<MemoryLock> {
        match self {
            Backing::Files => lock_file(path).map(MemoryLock::File),
            Backing::Shared(shared) => shared
                .lock(&shared_name(path))
                .inspect_err(|e| tracing::warn!(error = %e, "cannot lock shared memory"))
                .ok()
                .map(MemoryLock::Shared),
        }
    }

    /// Where a drift backup of `path` is kept, as shown to the model.
    pub(super) fn describe(&self, path: &Path) -> String {
        match self {
            Backing::Files => path.display().to_string(),
            Backing::Shared(_) => format!("{} (shared database)", shared_name(path)),
        }
    }
}

fn lock_file(path: &Path) -> Option<std::fs::File> {
    if let Some(dir) = path.parent() {
        let _ = crate::home::private::create_dir_all(dir);
    }
    let lock_path = PathBuf::from(format!("{}.lock", path.display()));
    let file = crate::home::private::open_options()
        .create(true)
        .append(true)
        .open(lock_path)
        .ok()?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).ok()?;
    Some(file)
}
/// Entries for the snapshot, with threat-matching ones replaced by a placeholder.
pub(super) fn sanitize(entries: &[String], file_name: &str) -> Vec<String> {
    entries
        .iter()
        .map(|entry| {
            if entry.is_empty() || entry.starts_with("[BLOCKED:") {
                return entry.clone();
            }
            let findings = scan_for_threats(entry);
            if findings.is_empty() {
                entry.clone()
            } else {
                tracing::warn!(file = file_name, findings = %findings.join(", "), "memory entry blocked at load time");
                format!(
                    "[BLOCKED: an entry of {file_name} matched {} and was left out of this prompt; memory(action=remove) deletes it.]",
                    findings.join(", ")
                )
            }
        })
        .collect()
}
