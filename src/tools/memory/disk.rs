//! The memory files on disk: parsing `\n§\n`-separated entries, the `flock` that
//! serialises read-modify-write across sessions, and the snapshot sanitiser.

use std::path::{Path, PathBuf};

use super::store::ENTRY_DELIMITER;
use crate::tools::threats::scan_for_threats;

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

pub(super) fn read_entries(path: &Path) -> Vec<String> {
    let Ok(raw) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    raw.split(ENTRY_DELIMITER)
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Holds an exclusive `flock` on `<file>.lock` for read-modify-write.
pub(super) struct FileLock(#[allow(dead_code)] std::fs::File);

pub(super) fn lock_file(path: &Path) -> Option<FileLock> {
    let lock_path = PathBuf::from(format!("{}.lock", path.display()));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(lock_path)
        .ok()?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).ok()?;
    Some(FileLock(file))
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
