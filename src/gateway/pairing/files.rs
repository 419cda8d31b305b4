//! The pairing directory on disk: which directory is used (the reference's legacy/new rule),
//! atomic 0600 writes, tolerant JSON reads, and the advisory lock shared with other processes.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The new-layout directory, relative to the home.
pub const NEW_SUBPATH: &str = "platforms/pairing";
/// The legacy directory, relative to the home.
pub const LEGACY_NAME: &str = "pairing";
/// The advisory lock file inside the pairing directory. Not `*.json`, so the reference's
/// directory merge and platform listing never see it.
pub const LOCK_FILE: &str = ".pairing.lock";

/// A data file's contents: a JSON object, in file order.
pub type JsonObject<T> = IndexMap<String, T>;

/// Why a data file could not be read. Absence is fine (it reads as empty),
/// and neither is unparsable content (the reference treats it as empty too); a file that
/// exists but cannot be read is, so that it is never overwritten blind.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {}: {source}", path.display())]
pub struct ReadError {
    pub path: PathBuf,
    pub source: io::Error,
}

/// The active directory and the other one, following `get_hermes_dir("platforms/pairing",
/// "pairing")`: the legacy `pairing/` is used only when it exists with content.
pub fn resolve_dirs(home: &Path) -> (PathBuf, PathBuf) {
    let legacy = home.join(LEGACY_NAME);
    let new = home.join(NEW_SUBPATH);
    if legacy_has_content(&legacy) {
        (legacy, new)
    } else {
        (new, legacy)
    }
}

/// The reference's `_legacy_path_has_content`: a populated directory or any non-directory
/// counts; an empty directory, a missing path and a dangling symlink do not; a path that
/// cannot be inspected counts, so that legacy data is never orphaned.
fn legacy_has_content(path: &Path) -> bool {
    let link = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return false,
        Err(_) => return true,
    };
    let is_dir = if link.file_type().is_symlink() {
        match fs::metadata(path) {
            Ok(target) => target.is_dir(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return false,
            Err(_) => return true,
        }
    } else {
        link.is_dir()
    };
    if !is_dir {
        return true;
    }
    match fs::read_dir(path) {
        Ok(mut entries) => entries.next().is_some(),
        Err(_) => true,
    }
}

/// Creates `dir` and its missing parents, owner-only.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Reads a JSON object file. Missing → empty. Unparsable or not an object → empty, with a
/// warning (no contents are logged: pending files hold hashes only, but stay quiet anyway).
pub fn read_object<T: DeserializeOwned>(path: &Path) -> Result<JsonObject<T>, ReadError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(IndexMap::new()),
        Err(source) => {
            return Err(ReadError {
                path: path.to_owned(),
                source,
            });
        }
    };
    Ok(parse_object(path, &bytes))
}

/// A pairing file's bytes as a JSON object; unparsable or not an object → empty, with a
/// warning.
pub fn parse_object<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> JsonObject<T> {
    match serde_json::from_slice(bytes) {
        Ok(object) => object,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "pairing file is not a JSON object; treating it as empty");
            IndexMap::new()
        }
    }
}

/// Writes `value` as the reference does (`json.dumps(indent=2, ensure_ascii=False)`),
/// atomically, mode 0600.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    atomic_write(path, text.as_bytes(), 0o600)
}

/// Replaces `path` with `contents` so that readers see either version whole, never a
/// mix: a sibling temporary file (created 0600, given `mode` before it becomes
/// visible), fsynced, renamed over the target, then the directory fsynced. A symlinked
/// target keeps its link: the file it points to is replaced.
pub fn atomic_write(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let target = if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        fs::canonicalize(path)?
    } else {
        path.to_owned()
    };
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        super::code::generate_entry_id()?
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(contents)?;
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.sync_all()?;
        fs::rename(&tmp, &target)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(io::Error::new(
            e.kind(),
            format!("cannot write {}: {e}", target.display()),
        ));
    }
    // The rename is durable only once the directory entry is; a failure here leaves a
    // complete file either way, so it is not reported.
    if let Ok(dir_handle) = File::open(dir) {
        let _ = dir_handle.sync_all();
    }
    Ok(())
}

/// Opens (creating, 0600) the advisory lock file of `dir`.
pub fn open_lock(dir: &Path) -> io::Result<File> {
    let path = dir.join(LOCK_FILE);
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot open {}: {e}", path.display())))
}

/// Holds the exclusive advisory lock (`flock`) until dropped.
#[derive(Debug)]
pub struct FileLockGuard<'a>(&'a File);

impl<'a> FileLockGuard<'a> {
    /// Blocks until no other process (or other open handle) holds the lock.
    pub fn acquire(file: &'a File) -> io::Result<Self> {
        file.lock()?;
        Ok(Self(file))
    }
}

impl Drop for FileLockGuard<'_> {
    fn drop(&mut self) {
        // Closing the handle would release it too; an unlock failure leaves nothing to do.
        let _ = self.0.unlock();
    }
}

/// The reference's split-directory heal: every `*.json` in `alternate` is merged into the
/// same-named file of `active`, the active file winning on key conflicts, written only when
/// the union adds something. Files that cannot be read are skipped with a warning.
pub fn merge_split_dirs(active: &Path, alternate: &Path) -> io::Result<()> {
    if !alternate.exists() || same_dir(active, alternate) {
        return Ok(());
    }
    let Ok(entries) = fs::read_dir(alternate) else {
        return Ok(());
    };
    let mut sources: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json") && path.is_file())
        .collect();
    sources.sort();
    for source in sources {
        let Some(name) = source.file_name() else {
            continue;
        };
        let dest = active.join(name);
        let (merged, current) = match (
            read_object::<serde_json::Value>(&source),
            read_object::<serde_json::Value>(&dest),
        ) {
            (Ok(merged), Ok(current)) => (merged, current),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "skipping a pairing file while merging directories");
                continue;
            }
        };
        if merged.is_empty() {
            continue;
        }
        let mut union = merged;
        for (key, value) in &current {
            union.insert(key.clone(), value.clone());
        }
        // IndexMap equality ignores order, as Python's dict equality does.
        if union != current {
            write_json(&dest, &union)?;
        }
    }
    Ok(())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
