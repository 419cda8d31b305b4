//! Checks that need no network: the home directory, the permissions of files holding
//! secrets, state.db and free disk space.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::check::Check;
use crate::home::HermesHome;
use crate::state::{SCHEMA_VERSION, WriteProbeError, inspect_read_only, try_write};

/// Below this much free space in the home, state.db writes may start failing.
const LOW_DISK_BYTES: u64 = 1 << 30;

/// The home exists and is not open to other users.
pub fn home_directory(home: &HermesHome) -> Check {
    let path = home.path();
    match std::fs::metadata(path) {
        Err(_) => Check::warn("home", format!("{} does not exist yet", path.display()))
            .hint("`hermesd run` creates it; or create it with mode 0700"),
        Ok(meta) if !meta.is_dir() => {
            Check::error("home", format!("{} is not a directory", path.display()))
                .hint("point HERMES_HOME (or --home) at a directory")
        }
        Ok(meta) => {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o002 != 0 {
                Check::error(
                    "home",
                    format!(
                        "{} is mode {mode:04o}: anyone can write to it",
                        path.display()
                    ),
                )
                .hint(format!("chmod 700 {}", path.display()))
            } else if mode & 0o077 != 0 {
                Check::warn(
                    "home",
                    format!(
                        "{} is mode {mode:04o}: other users can look inside",
                        path.display()
                    ),
                )
                .hint(format!("chmod 700 {}", path.display()))
            } else {
                Check::ok("home", format!("{} (mode {mode:04o})", path.display()))
            }
        }
    }
}

/// Files that hold secrets: `.env`, `auth.json` (provider credentials, as in Hermes) and the
/// pairing store's JSON files (current `platforms/pairing/` and legacy `pairing/`).
pub(super) fn secret_files(home: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [".env", "auth.json"]
        .iter()
        .map(|name| home.join(name))
        .filter(|path| path.is_file())
        .collect();
    for dir in [home.join("platforms").join("pairing"), home.join("pairing")] {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            let mut json: Vec<PathBuf> = entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "json") && path.is_file())
                .collect();
            json.sort();
            files.extend(json);
        }
    }
    files
}

/// Every secret file is 0600 (no access for group or others): one line per offender, or
/// one line saying all is well.
pub fn secret_permissions(home: &HermesHome) -> Vec<Check> {
    let files = secret_files(home.path());
    let mut checks = Vec::new();
    for path in &files {
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            checks.push(
                Check::error(
                    "permissions",
                    format!(
                        "{} is mode {mode:04o}: other users can read the secrets in it",
                        path.display()
                    ),
                )
                .hint(format!("chmod 600 {}", path.display())),
            );
        }
    }
    if checks.is_empty() {
        let message = if files.is_empty() {
            "no secret files yet (.env, auth.json, pairing)".to_owned()
        } else {
            format!(
                "{} secret files, all readable by their owner only",
                files.len()
            )
        };
        checks.push(Check::ok("permissions", message));
    }
    checks
}

/// state.db opens read-only, passes `PRAGMA integrity_check`, and has a schema we handle.
pub fn state_db(home: &HermesHome) -> Check {
    let path = home.state_db();
    if !path.exists() {
        return Check::ok("state.db", "not created yet; `hermesd run` creates it");
    }
    let recover = format!(
        "stop hermesd, keep a copy, then rebuild it: sqlite3 {0} '.recover' | sqlite3 {0}.recovered \
         and move {0}.recovered into place",
        path.display()
    );
    let found = match inspect_read_only(&path) {
        Ok(found) => found,
        Err(e) => {
            return Check::error(
                "state.db",
                format!("{} cannot be read: {e}", path.display()),
            )
            .hint(recover);
        }
    };
    if !found.is_intact() {
        let shown: Vec<&str> = found.integrity.iter().take(3).map(String::as_str).collect();
        return Check::error(
            "state.db",
            format!("integrity check failed: {}", shown.join("; ")),
        )
        .hint(recover);
    }
    let version = match found.schema_version {
        None => {
            return Check::error(
                "state.db",
                format!(
                    "{} has no schema_version: not a Hermes state database",
                    path.display()
                ),
            )
            .hint("point HERMES_HOME at the right home, or move the file away");
        }
        Some(version) if version < SCHEMA_VERSION => {
            format!("schema v{version}; upgraded to v{SCHEMA_VERSION} at the next start")
        }
        Some(version) if version > SCHEMA_VERSION => {
            format!("schema v{version} from a newer Hermes (ours is v{SCHEMA_VERSION}); kept as is")
        }
        Some(version) => format!("schema v{version}"),
    };
    let indexes: Vec<String> = found
        .indexes
        .iter()
        .map(|(name, live)| {
            let state = if *live { "live" } else { "not usable here" };
            format!("{name} {state}")
        })
        .collect();
    let shown = format!("intact, {version}; search indexes: {}", indexes.join(", "));
    match try_write(&path) {
        Ok(()) => Check::ok(
            "state.db",
            format!("{shown}; a test write succeeded (rolled back)"),
        ),
        Err(WriteProbeError::Busy(why)) => {
            Check::ok("state.db", format!("{shown}; test write not tried: {why}"))
        }
        Err(WriteProbeError::Failed(why)) => {
            let check = Check::error("state.db", format!("{shown}; a test write failed: {why}"));
            match found.indexes.iter().find(|(_, live)| !live) {
                Some((index, _)) => check.hint(format!(
                    "{index} cannot be used by this build; start hermesd once: it drops that \
                     index's triggers and marks it stale (Hermes rebuilds it where its tokenizer \
                     is installed)"
                )),
                None => check.hint("check the file's permissions and the disk"),
            }
        }
    }
}

/// Free space on the home's filesystem (or its nearest existing parent).
pub fn free_disk(home: &HermesHome) -> Check {
    let mut probe = home.path();
    while !probe.exists() {
        match probe.parent() {
            Some(parent) => probe = parent,
            None => break,
        }
    }
    match rustix::fs::statvfs(probe) {
        Ok(stats) => {
            let free = stats.f_bavail.saturating_mul(stats.f_frsize);
            let shown = format!(
                "{:.1} GiB free on the home's filesystem",
                free as f64 / (1u64 << 30) as f64
            );
            if free < LOW_DISK_BYTES {
                Check::warn("disk", shown)
                    .hint("free some space: state.db writes fail when the disk is full")
            } else {
                Check::ok("disk", shown)
            }
        }
        Err(e) => Check::warn(
            "disk",
            format!("cannot read free space of {}: {e}", probe.display()),
        ),
    }
}
