//! Credential locks: two local gateways (different homes, or Python and us) must never drive
//! one bot token. Each credential maps to
//! `${HERMES_GATEWAY_LOCK_DIR:-$XDG_STATE_HOME/hermes/gateway-locks}/<scope>-<sha256(token)[:16]>.lock`,
//! created `O_EXCL` with the Python gateway's JSON record and, on our side, also held with an
//! OS lock. Python never takes that OS lock, so its records are judged by its stale rules
//! (dead pid, recycled pid, not a gateway, stopped). The token itself is never written or
//! printed: only its truncated hash names the file.

use std::collections::BTreeMap;
use std::fs::{File, TryLockError};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::lock_record::{LockError, ProcessRecord, io_error, read_json, utc_now_iso};

/// The lock file's contents: `{pid,kind,argv,start_time,scope,identity_hash,metadata,updated_at}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScopedLockRecord {
    #[serde(flatten)]
    pub process: ProcessRecord,
    #[serde(default)]
    pub scope: String,
    #[serde(default)]
    pub identity_hash: String,
    #[serde(default)]
    pub metadata: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub updated_at: Option<String>,
}

/// Held while this process uses the credential; dropping it deletes the lock file.
#[derive(Debug)]
pub struct ScopedLock {
    file: File,
    path: PathBuf,
    pid: u32,
}

/// The first 16 hex digits of SHA-256 of the credential, as Python's `_scope_hash`.
pub fn identity_hash(identity: &str) -> String {
    let digest = Sha256::digest(identity.as_bytes());
    hex::encode(digest)[..16].to_owned()
}

/// The machine-wide lock directory, from the environment map.
pub fn lock_dir(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let set = |key: &str| env.get(key).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set("HERMES_GATEWAY_LOCK_DIR") {
        return Some(dir);
    }
    let state_home =
        set("XDG_STATE_HOME").or_else(|| set("HOME").map(|h| h.join(".local/state")))?;
    Some(state_home.join("hermes").join("gateway-locks"))
}

/// Where the lock for `scope` + `identity` lives.
pub fn lock_path(scope: &str, identity: &str, env: &BTreeMap<String, String>) -> Option<PathBuf> {
    Some(lock_dir(env)?.join(format!("{scope}-{}.lock", identity_hash(identity))))
}

impl ScopedLock {
    /// Claims `identity` (a bot token) under `scope` (e.g. `telegram-bot-token`) for the
    /// gateway of `home`, or names the gateway (pid and home) that already holds it.
    pub fn acquire(
        scope: &str,
        identity: &str,
        home: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<Self, LockError> {
        let path = lock_path(scope, identity, env).ok_or(LockError::NoLockDir)?;
        if let Some(dir) = path.parent() {
            crate::home::private::create_dir_all(dir).map_err(io_error(dir))?;
        }
        let argv: Vec<String> = std::env::args().collect();
        let record = ScopedLockRecord {
            process: ProcessRecord::current(&argv),
            scope: scope.to_owned(),
            identity_hash: identity_hash(identity),
            metadata: BTreeMap::from([(
                "hermes_home".to_owned(),
                serde_json::Value::from(home.to_string_lossy().into_owned()),
            )]),
            updated_at: Some(utc_now_iso()),
        };
        if path.exists() {
            clear_if_stale(&path, scope)?;
        }
        let file = match crate::home::private::open_options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                return Err(in_use(scope, read_json(&path)));
            }
            Err(e) => return Err(io_error(&path)(e)),
        };
        let written = file
            .try_lock()
            .map_err(|e| match e {
                TryLockError::WouldBlock => std::io::Error::from(ErrorKind::WouldBlock),
                TryLockError::Error(e) => e,
            })
            .and_then(|()| serde_json::to_writer(&file, &record).map_err(std::io::Error::other))
            .and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&path);
            return Err(io_error(&path)(e));
        }
        Ok(Self {
            file,
            path,
            pid: record.process.pid,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScopedLock {
    fn drop(&mut self) {
        if read_json::<ScopedLockRecord>(&self.path).is_some_and(|r| r.process.pid == self.pid) {
            let _ = std::fs::remove_file(&self.path);
        }
        let _ = self.file.unlock();
    }
}

/// Removes the lock file if nobody legitimately holds it; errors naming the holder otherwise.
fn clear_if_stale(path: &Path, scope: &str) -> Result<(), LockError> {
    let existing: Option<ScopedLockRecord> = read_json(path);
    // One of our gateways (in any process, this one included) holds it with an OS lock.
    if let Ok(probe) = File::open(path) {
        match probe.try_lock_shared() {
            Err(TryLockError::WouldBlock) => return Err(in_use(scope, existing)),
            Ok(()) => {
                let _ = probe.unlock();
            }
            Err(TryLockError::Error(_)) => {}
        }
    }
    // A Python gateway holds no OS lock: apply its stale rules. An empty or garbled file is
    // a writer that died between creating and filling it.
    if let Some(record) = &existing
        && record.process.is_live_gateway()
    {
        return Err(in_use(scope, existing));
    }
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error(path)(e)),
    }
}

fn in_use(scope: &str, holder: Option<ScopedLockRecord>) -> LockError {
    LockError::CredentialInUse {
        scope: scope.to_owned(),
        pid: holder.as_ref().map(|h| h.process.pid),
        home: holder.and_then(|h| {
            h.metadata
                .get("hermes_home")
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_path_follows_the_reference() {
        // sha256("test-token")[:16], computed independently with Python's hashlib.
        assert_eq!(identity_hash("test-token"), "4c5dc9b7708905f7");
        let env = BTreeMap::from([("HOME".to_owned(), "/home/u".to_owned())]);
        assert_eq!(
            lock_path("telegram-bot-token", "test-token", &env),
            Some(PathBuf::from(
                "/home/u/.local/state/hermes/gateway-locks/telegram-bot-token-4c5dc9b7708905f7.lock"
            ))
        );
        let env = BTreeMap::from([
            ("HOME".to_owned(), "/home/u".to_owned()),
            ("XDG_STATE_HOME".to_owned(), "/x".to_owned()),
        ]);
        assert_eq!(
            lock_dir(&env),
            Some(PathBuf::from("/x/hermes/gateway-locks"))
        );
        let env = BTreeMap::from([("HERMES_GATEWAY_LOCK_DIR".to_owned(), "/l".to_owned())]);
        assert_eq!(lock_dir(&env), Some(PathBuf::from("/l")));
        assert_eq!(lock_dir(&BTreeMap::new()), None);
    }
}
