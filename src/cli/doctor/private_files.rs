//! Everything in the home that group or other users may open. hermesd creates its files
//! 0600 and directories 0700 but leaves existing modes alone (an operator may share a home
//! on purpose), so this check is where a looser home is told, path by path, with the
//! `chmod` that makes each private.

use std::path::{Path, PathBuf};

use super::check::Check;
use crate::home::HermesHome;
use crate::home::private::{chmod_fix, looser_than_private};

/// Lines shown one by one; past this, one line with a recursive fix covers the rest.
const SHOWN: usize = 20;
/// A home holding more entries than this is only partly walked (and says so).
const MAX_VISITED: usize = 50_000;

/// Entries below the home (the home itself has its own check; `skip` lists files another
/// check reports) whose mode lets group or others in.
fn shared_entries(home: &Path, skip: &[PathBuf]) -> (Vec<(PathBuf, u32, bool)>, bool) {
    let mut found = Vec::new();
    let mut pending = vec![home.to_path_buf()];
    let mut visited = 0;
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
        paths.sort();
        for path in paths {
            visited += 1;
            if visited > MAX_VISITED {
                return (found, true);
            }
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                continue;
            }
            if let Some(mode) = looser_than_private(&path)
                && !skip.contains(&path)
            {
                found.push((path.clone(), mode, meta.is_dir()));
            }
            if meta.is_dir() {
                pending.push(path);
            }
        }
    }
    found.sort();
    (found, false)
}

/// One warning per shared file or directory (up to [`SHOWN`], then one for the rest), or
/// one line saying all is private.
pub fn private_files(home: &HermesHome, skip: &[PathBuf]) -> Vec<Check> {
    if !home.path().is_dir() {
        return Vec::new();
    }
    let (found, partial) = shared_entries(home.path(), skip);
    let mut checks: Vec<Check> = found
        .iter()
        .take(SHOWN)
        .map(|(path, mode, is_dir)| {
            let what = if *is_dir { "directory" } else { "file" };
            Check::warn(
                "private files",
                format!(
                    "{} is mode {mode:04o}: group or other users can open this {what}",
                    path.display()
                ),
            )
            .hint(chmod_fix(path, *is_dir))
        })
        .collect();
    if found.len() > SHOWN {
        checks.push(
            Check::warn(
                "private files",
                format!(
                    "{} more entries are open to group or others",
                    found.len() - SHOWN
                ),
            )
            .hint(format!("chmod -R go-rwx {}", home.path().display())),
        );
    }
    if checks.is_empty() {
        let scope = if partial {
            format!("the first {MAX_VISITED} entries of the home")
        } else {
            "everything in the home".to_owned()
        };
        checks.push(Check::ok(
            "private files",
            format!("{scope} is private to its owner"),
        ));
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn shared_entries_are_named_with_their_fix() {
        let dir = tempfile::tempdir().unwrap();
        let home = HermesHome::at(dir.path());
        let sessions = dir.path().join("sessions");
        std::fs::create_dir(&sessions).unwrap();
        std::fs::set_permissions(&sessions, std::fs::Permissions::from_mode(0o755)).unwrap();
        let db = dir.path().join("state.db");
        std::fs::write(&db, b"").unwrap();
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        let lines: Vec<String> = private_files(&home, &[]).iter().map(Check::line).collect();
        let text = lines.join("\n");
        assert!(
            text.contains(&format!("chmod 700 {}", sessions.display())),
            "{text}"
        );
        assert!(
            text.contains(&format!("chmod 600 {}", db.display())),
            "{text}"
        );
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(&sessions, std::fs::Permissions::from_mode(0o700)).unwrap();
        let lines: Vec<String> = private_files(&home, &[]).iter().map(Check::line).collect();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("private to its owner"), "{lines:?}");
    }
}
