//! The test-isolation guard: a process under test never opens a real, live `state.db`.
//!
//! "Under test" means a `cfg(test)` build, or an environment carrying `HERMES_TEST_ISOLATION`,
//! `PYTEST_CURRENT_TEST` or `PYTEST_VERSION` (our harnesses set the first for every child).
//! The live databases are `<default root>/state.db` and `<default root>/profiles/*/state.db`,
//! where the default root is `$HOME/.hermes`. `HERMES_STATE_DB_GUARD_BYPASS=1` disables it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::{StoreError, StoreResult};

pub fn in_test_context(env: &BTreeMap<String, String>) -> bool {
    cfg!(test)
        || [
            "HERMES_TEST_ISOLATION",
            "PYTEST_CURRENT_TEST",
            "PYTEST_VERSION",
        ]
        .iter()
        .any(|k| env.get(*k).is_some_and(|v| !v.is_empty()))
}

/// Refuses `db_path` when it is a live database and the process runs under test.
pub fn check(db_path: &Path, env: &BTreeMap<String, String>) -> StoreResult<()> {
    if env.get("HERMES_STATE_DB_GUARD_BYPASS").map(String::as_str) == Some("1")
        || !in_test_context(env)
    {
        return Ok(());
    }
    let Some(root) = crate::home::default_root(env) else {
        return Ok(());
    };
    let db = normalise(db_path);
    let root = normalise(&root);
    let live_default = db == root.join("state.db");
    let live_profile = db.file_name().is_some_and(|n| n == "state.db")
        && db
            .parent()
            .and_then(Path::parent)
            .is_some_and(|p| p == root.join("profiles"));
    if live_default || live_profile {
        return Err(StoreError::LiveDatabaseGuard(db.display().to_string()));
    }
    Ok(())
}

/// Canonicalises as much of the path as exists, so symlinks cannot sneak past the guard.
fn normalise(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
    let mut out = existing.canonicalize().unwrap_or(existing);
    for part in rest.into_iter().rev() {
        out.push(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(home: &Path, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut e: BTreeMap<String, String> = extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        e.insert("HOME".into(), home.display().to_string());
        e
    }

    #[test]
    fn refuses_live_databases_under_test() {
        let dir = tempfile::tempdir().unwrap();
        let e = env(dir.path(), &[]);
        let root = dir.path().join(".hermes");
        assert!(check(&root.join("state.db"), &e).is_err());
        assert!(check(&root.join("profiles/coder/state.db"), &e).is_err());
        assert!(check(&dir.path().join("tmp/state.db"), &e).is_ok());
        let bypass = env(dir.path(), &[("HERMES_STATE_DB_GUARD_BYPASS", "1")]);
        assert!(check(&root.join("state.db"), &bypass).is_ok());
    }
}
