//! What the gateway's lock, pid and status files hold, in the Python gateway's JSON shapes,
//! plus the errors lock acquisition reports and the small file helpers they share.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::process_info;

/// `kind` in every record, as the Python gateway writes it.
pub const GATEWAY_KIND: &str = "hermes-gateway";

/// The identity block shared by `gateway.pid`, `gateway.lock`, scoped locks and
/// `gateway_state.json`: `{"pid","kind","argv","start_time"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    pub pid: u32,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub argv: Vec<String>,
    #[serde(default)]
    pub start_time: Option<u64>,
}

impl ProcessRecord {
    /// The record describing this process.
    pub fn current(argv: &[String]) -> Self {
        let pid = process_info::current_pid();
        Self {
            pid,
            kind: Some(GATEWAY_KIND.to_owned()),
            argv: argv.to_vec(),
            start_time: process_info::start_time(pid),
        }
    }

    /// Whether the process this record names is still that process, running as a gateway:
    /// the pid exists, its start time matches when both are known (pid reuse), its command
    /// line (or, when unreadable, the record's argv) looks like a gateway, and it is not
    /// stopped. These are the Python gateway's stale-lock rules.
    pub fn is_live_gateway(&self) -> bool {
        if !process_info::pid_exists(self.pid) {
            return false;
        }
        let current_start = process_info::start_time(self.pid);
        if let (Some(recorded), Some(current)) = (self.start_time, current_start)
            && recorded != current
        {
            return false;
        }
        let is_gateway = match process_info::cmdline(self.pid) {
            Some(command) => process_info::looks_like_gateway(&command),
            None => {
                self.kind.as_deref() == Some(GATEWAY_KIND)
                    && process_info::looks_like_gateway(&self.argv.join(" "))
            }
        };
        is_gateway && !process_info::is_stopped(self.pid)
    }
}

/// Why a lock could not be taken. Messages name homes and pids, never credentials.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "hermesd is already running for {home} (pid {pid}); stop it or use --replace",
        home = home.display(),
        pid = pid.map_or_else(|| "unknown".to_owned(), |p| p.to_string())
    )]
    AlreadyRunning { home: PathBuf, pid: Option<u32> },
    #[error(
        "--replace: the gateway for {home} (pid {pid}) still holds the lock after {waited:?}",
        home = home.display()
    )]
    ReplaceTimedOut {
        home: PathBuf,
        pid: u32,
        waited: Duration,
    },
    #[error(
        "another local gateway (pid {pid}, home {home}) is already using this {scope} credential; \
         stop it or give this home a different credential",
        pid = pid.map_or_else(|| "unknown".to_owned(), |p| p.to_string()),
        home = home.as_deref().unwrap_or("unknown")
    )]
    CredentialInUse {
        scope: String,
        pid: Option<u32>,
        home: Option<String>,
    },
    #[error(
        "cannot place the credential lock: set HERMES_GATEWAY_LOCK_DIR, XDG_STATE_HOME or HOME"
    )]
    NoLockDir,
    #[error("cannot use {path}: {source}", path = path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub(crate) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LockError + '_ {
    move |source| LockError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Reads a JSON object file; a missing, unreadable, empty or malformed file is `None`, as in
/// the reference (such files are treated as absent or stale, never trusted).
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    let raw = std::fs::read_to_string(path).ok()?;
    let raw = raw.trim();
    if raw.is_empty() {
        return None;
    }
    serde_json::from_str(raw).ok()
}

/// Writes compact JSON to a sibling temporary file, then renames it into place, so a
/// reader sees the old or the new document, never half of one.
pub fn write_json_atomic(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    let body = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(format!(".{file_name}.{}.tmp", process_info::current_pid()));
    let result = (|| {
        let mut file = crate::home::private::open_options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        file.write_all(&body)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Now as Python's `datetime.now(timezone.utc).isoformat()`: microseconds and `+00:00`.
pub fn utc_now_iso() -> String {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    iso_from_unix(since_epoch)
}

pub(crate) fn iso_from_unix(since_epoch: Duration) -> String {
    let secs = since_epoch.as_secs() as i64;
    let (year, month, day) = crate::clock::civil_from_days(secs.div_euclid(86_400));
    let in_day = secs.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60,
        since_epoch.subsec_micros()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_timestamps_match_python() {
        let t = Duration::from_micros(1_700_000_000_123_456);
        assert_eq!(iso_from_unix(t), "2023-11-14T22:13:20.123456+00:00");
    }

    #[test]
    fn python_pid_file_parses() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("gateway.pid");
        std::fs::write(
            &path,
            r#"{"pid": 4761, "kind": "hermes-gateway", "argv": ["hermes", "gateway", "run"], "start_time": 35533}"#,
        )
        .expect("write");
        let record: ProcessRecord = read_json(&path).expect("parses");
        assert_eq!(record.pid, 4761);
        assert_eq!(record.start_time, Some(35533));
        std::fs::write(&path, "{not json").expect("write");
        assert!(read_json::<ProcessRecord>(&path).is_none());
    }
}
