//! Creating files and directories that only their owner may open: every creator of a file
//! or directory in `HERMES_HOME` goes through here, so the home stays private whatever the
//! process umask (a service manager or shell often sets 022). The modes are passed to the
//! creating system call, so there is no moment when a new file is readable by others; a
//! umask can only take bits away, never add them.
//!
//! What already exists is left as it is: an operator may share a home with a group on
//! purpose, so a looser existing mode is reported (`hermesd doctor`, a warning at start-up,
//! see [`looser_than_private`]) rather than silently changed.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Directories: owner only.
pub const DIR_MODE: u32 = 0o700;
/// Files: owner read and write only.
pub const FILE_MODE: u32 = 0o600;
/// The bits that give group or others any access.
pub const SHARED_BITS: u32 = 0o077;

/// Creates `dir` and its missing parents, each new one 0700 (existing ones keep theirs).
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

/// Open options that create a missing file 0600; add `.read`, `.write`, `.append`,
/// `.create`/`.create_new` and `.truncate` as the caller needs.
pub fn open_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.mode(FILE_MODE);
    options
}

/// Creates or replaces `path` with `contents`; a new file is 0600, an existing one keeps
/// its mode.
pub fn write(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut file = open_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    file.write_all(contents)
}

/// Creates an empty `path` 0600 unless it exists; returns whether it was created. Used for
/// SQLite databases: SQLite gives a database's WAL, shared-memory and journal files the
/// database file's own mode, so creating the file private first keeps all of them private.
pub fn create_empty_if_missing(path: &Path) -> io::Result<bool> {
    match open_options().write(true).create_new(true).open(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// A new temporary sibling file for an atomic replace, created 0600 (or `mode`).
pub fn create_new_with_mode(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
}

/// The mode of `path` when it gives group or others any access (symlinks not followed).
pub fn looser_than_private(path: &Path) -> Option<u32> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() {
        return None;
    }
    let mode = meta.permissions().mode() & 0o777;
    (mode & SHARED_BITS != 0).then_some(mode)
}

/// The command that makes `path` private: `chmod 700` for a directory, `chmod 600` for a
/// file.
pub fn chmod_fix(path: &Path, is_dir: bool) -> String {
    let mode = if is_dir { "700" } else { "600" };
    format!("chmod {mode} {}", path.display())
}

/// Logs one warning when the home itself is open to group or others: the daemon leaves it
/// so (an operator may share it on purpose) and points at `hermesd doctor`.
pub fn warn_if_home_is_shared(home: &Path) {
    if let Some(mode) = looser_than_private(home) {
        tracing::warn!(
            home = %home.display(),
            mode = %format!("{mode:04o}"),
            fix = %chmod_fix(home, true),
            "the home is open to group or other users; hermesd leaves an existing mode as \
             the operator set it (files it creates are private all the same); run \
             `hermesd doctor` to list what is shared"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn new_files_and_directories_are_private_and_old_ones_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b/c");
        create_dir_all(&nested).unwrap();
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        assert_eq!(mode(&nested), 0o700);
        let file = nested.join("f.txt");
        write(&file, b"x").unwrap();
        assert_eq!(mode(&file), 0o600);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        write(&file, b"y").unwrap();
        assert_eq!(mode(&file), 0o640, "an existing file keeps its mode");
        assert_eq!(looser_than_private(&file), Some(0o640));
        assert_eq!(looser_than_private(&nested), None);
        let db = nested.join("state.db");
        assert!(create_empty_if_missing(&db).unwrap());
        assert!(!create_empty_if_missing(&db).unwrap());
        assert_eq!(mode(&db), 0o600);
        assert_eq!(chmod_fix(&db, false), format!("chmod 600 {}", db.display()));
    }
}
