//! Where the pairing files live: the home's pairing directory (one machine, shared with the
//! Python gateway and `hermesd pairing`), or — several instances on PostgreSQL — shared rows
//! with the same names and the same bytes (`coord::SharedFiles`). The rules in
//! `store.rs` run unchanged over either.

use std::fs::File;
use std::io;
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::files::{self, FileLockGuard, JsonObject, ReadError};
use crate::coord::{SharedFiles, SharedLock};

/// The directory part of the pairing files' shared names (`pairing/<file>`).
const SHARED_DIR: &str = "pairing";
const SHARED_PREFIX: &str = "pairing/";

#[derive(Debug)]
pub(super) enum Backing {
    /// The pairing directory, locked with `flock` on its lock file.
    Files { lock_file: File },
    /// Rows in PostgreSQL, locked with an advisory lock.
    Shared(SharedFiles),
}

/// The cross-process half of a held pairing lock.
pub(super) enum BackingLock<'a> {
    File(#[allow(dead_code)] FileLockGuard<'a>),
    Shared(#[allow(dead_code)] SharedLock),
}

pub(super) fn shared_name(path: &Path) -> String {
    crate::coord::shared_name(SHARED_DIR, path)
}

impl Backing {
    pub(super) fn lock(&self) -> io::Result<BackingLock<'_>> {
        match self {
            Backing::Files { lock_file } => {
                FileLockGuard::acquire(lock_file).map(BackingLock::File)
            }
            Backing::Shared(shared) => shared.lock("pairing").map(BackingLock::Shared),
        }
    }

    pub(super) fn is_shared(&self) -> bool {
        matches!(self, Backing::Shared(_))
    }

    /// A pairing file's object; missing or unparsable reads as empty (see `files::read_object`).
    pub(super) fn read_object<T: DeserializeOwned>(
        &self,
        path: &Path,
    ) -> Result<JsonObject<T>, ReadError> {
        match self {
            Backing::Files { .. } => files::read_object(path),
            Backing::Shared(shared) => match shared.read(&shared_name(path)) {
                Ok(Some((bytes, _))) => Ok(files::parse_object(path, &bytes)),
                Ok(None) => Ok(JsonObject::new()),
                Err(source) => Err(ReadError {
                    path: path.to_owned(),
                    source,
                }),
            },
        }
    }

    pub(super) fn save<T: Serialize>(&self, path: &Path, value: &T) -> io::Result<()> {
        match self {
            Backing::Files { .. } => files::write_json(path, value),
            Backing::Shared(shared) => {
                let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
                shared.write(&shared_name(path), text.as_bytes())
            }
        }
    }

    /// The names of the pairing files (`telegram-approved.json`, ...) in `dir`.
    pub(super) fn file_names(&self, dir: &Path) -> io::Result<Vec<String>> {
        match self {
            Backing::Files { .. } => Ok(std::fs::read_dir(dir)?
                .filter_map(Result::ok)
                .filter_map(|entry| entry.file_name().into_string().ok())
                .collect()),
            Backing::Shared(shared) => Ok(shared
                .list(SHARED_PREFIX)?
                .into_iter()
                .filter_map(|name| name.strip_prefix(SHARED_PREFIX).map(str::to_owned))
                .collect()),
        }
    }

    /// What identifies the current version of the shared file for `path`, for the approvals
    /// cache; `None` for the files backing (the cache stats the file itself).
    pub(super) fn shared_version(&self, path: &Path) -> Option<io::Result<Option<i64>>> {
        match self {
            Backing::Files { .. } => None,
            Backing::Shared(shared) => Some(shared.version(&shared_name(path))),
        }
    }
}
