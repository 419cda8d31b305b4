//! One gateway per home: `$HERMES_HOME/gateway.lock` held with an OS lock for the life of the
//! process, plus `gateway.pid`, both in the Python gateway's format so either implementation
//! sees the other. `--replace` takes over from a running gateway the way Python does: write
//! `.gateway-takeover.json`, SIGTERM the holder, wait for the lock.

use std::fs::{File, TryLockError};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::lock_record::{
    LockError, ProcessRecord, io_error, read_json, utc_now_iso, write_json_atomic,
};
use super::process_info;
use crate::home::private;

pub const LOCK_FILE: &str = "gateway.lock";
pub const PID_FILE: &str = "gateway.pid";
pub const TAKEOVER_MARKER_FILE: &str = ".gateway-takeover.json";
/// How long `--replace` waits for the old gateway to let go.
pub const REPLACE_TIMEOUT: Duration = Duration::from_secs(10);
const REPLACE_POLL: Duration = Duration::from_millis(50);

/// Held for as long as this process is the home's gateway. Dropping it removes
/// `gateway.pid` (if it is still ours) and releases the OS lock.
#[derive(Debug)]
pub struct InstanceLock {
    lock_file: File,
    pid_path: PathBuf,
    record: ProcessRecord,
}

/// `.gateway-takeover.json`, as Python's `write_takeover_marker` writes it: the replaced
/// gateway reads it on SIGTERM to know the stop was planned.
#[derive(Debug, Serialize)]
struct TakeoverMarker<'a> {
    target_pid: u32,
    target_start_time: Option<u64>,
    replacer_pid: u32,
    replacer_hermes_home: &'a str,
    written_at: String,
}

impl InstanceLock {
    /// Becomes the gateway for `home`, or says who already is.
    pub fn acquire(home: &Path, argv: &[String], replace: bool) -> Result<Self, LockError> {
        private::create_dir_all(home).map_err(io_error(home))?;
        let lock_path = home.join(LOCK_FILE);
        let pid_path = home.join(PID_FILE);
        let lock_file = private::open_options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(io_error(&lock_path))?;
        match lock_file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = read_json::<ProcessRecord>(&lock_path)
                    .or_else(|| read_json::<ProcessRecord>(&pid_path));
                let pid = holder.as_ref().map(|h| h.pid);
                match (replace, holder) {
                    (true, Some(holder)) => {
                        take_over(home, &holder)?;
                        wait_for(REPLACE_TIMEOUT, || try_lock(&lock_file, &lock_path))?
                            .ok_or_else(|| LockError::ReplaceTimedOut {
                                home: home.to_owned(),
                                pid: holder.pid,
                                waited: REPLACE_TIMEOUT,
                            })?;
                    }
                    _ => {
                        return Err(LockError::AlreadyRunning {
                            home: home.to_owned(),
                            pid,
                        });
                    }
                }
            }
            Err(TryLockError::Error(e)) => return Err(io_error(&lock_path)(e)),
        }
        // The OS lock is ours. A gateway that never takes it (an old Python release) can
        // still be running if gateway.pid names a live gateway that is not us.
        let record = ProcessRecord::current(argv);
        if let Some(previous) = read_json::<ProcessRecord>(&pid_path)
            && previous.pid != record.pid
            && previous.is_live_gateway()
        {
            if !replace {
                return Err(LockError::AlreadyRunning {
                    home: home.to_owned(),
                    pid: Some(previous.pid),
                });
            }
            take_over(home, &previous)?;
            wait_for(REPLACE_TIMEOUT, || Ok(!previous.is_live_gateway()))?.ok_or_else(|| {
                LockError::ReplaceTimedOut {
                    home: home.to_owned(),
                    pid: previous.pid,
                    waited: REPLACE_TIMEOUT,
                }
            })?;
        }
        write_lock_record(&lock_file, &record).map_err(io_error(&lock_path))?;
        // Anything left in gateway.pid now is stale: its writer is dead, recycled or replaced.
        match std::fs::remove_file(&pid_path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&pid_path)(e)),
        }
        write_pid_file(&pid_path, &record).map_err(io_error(&pid_path))?;
        Ok(Self {
            lock_file,
            pid_path,
            record,
        })
    }

    /// The record written to `gateway.pid` and `gateway.lock`.
    pub fn record(&self) -> &ProcessRecord {
        &self.record
    }
}

impl Drop for InstanceLock {
    fn drop(&mut self) {
        // During a --replace handoff the new gateway may already have written its own pid
        // file; only remove one that still names us.
        if read_json::<ProcessRecord>(&self.pid_path).is_some_and(|r| r.pid == self.record.pid) {
            let _ = std::fs::remove_file(&self.pid_path);
        }
        let _ = self.lock_file.unlock();
    }
}

/// The gateway holding a home, as `state migrate` names it when it refuses to write under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeHolder {
    pub pid: Option<u32>,
    /// When it took the lock (the lock file's last write), UTC ISO 8601.
    pub since: Option<String>,
}

/// Who holds `home` right now: the OS lock on `gateway.lock` (tested by taking it for an
/// instant, never kept), or else a live gateway named by `gateway.pid` (a Python gateway
/// that takes no OS lock). `None` when no gateway runs on this home.
pub fn current_holder(home: &Path) -> Option<HomeHolder> {
    let lock_path = home.join(LOCK_FILE);
    let pid_path = home.join(PID_FILE);
    let since = |path: &Path| {
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
        let since_epoch = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
        Some(super::lock_record::iso_from_unix(since_epoch))
    };
    if let Ok(file) = File::open(&lock_path) {
        match file.try_lock() {
            Err(TryLockError::WouldBlock) => {
                let record = read_json::<ProcessRecord>(&lock_path)
                    .or_else(|| read_json::<ProcessRecord>(&pid_path));
                return Some(HomeHolder {
                    pid: record.map(|r| r.pid),
                    since: since(&lock_path),
                });
            }
            Ok(()) => {
                let _ = file.unlock();
            }
            Err(TryLockError::Error(_)) => {}
        }
    }
    read_json::<ProcessRecord>(&pid_path)
        .filter(ProcessRecord::is_live_gateway)
        .map(|record| HomeHolder {
            pid: Some(record.pid),
            since: since(&pid_path),
        })
}

fn try_lock(file: &File, path: &Path) -> Result<bool, LockError> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(io_error(path)(e)),
    }
}

/// Polls `done` until it holds or `timeout` passes; `Some(())` when it held.
fn wait_for(
    timeout: Duration,
    mut done: impl FnMut() -> Result<bool, LockError>,
) -> Result<Option<()>, LockError> {
    let deadline = Instant::now() + timeout;
    loop {
        if done()? {
            return Ok(Some(()));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(REPLACE_POLL);
    }
}

/// Marks the stop as planned, then asks the holder to stop.
fn take_over(home: &Path, holder: &ProcessRecord) -> Result<(), LockError> {
    let home_text = home.to_string_lossy();
    let marker = TakeoverMarker {
        target_pid: holder.pid,
        target_start_time: process_info::start_time(holder.pid),
        replacer_pid: process_info::current_pid(),
        replacer_hermes_home: &home_text,
        written_at: utc_now_iso(),
    };
    // Best effort, as in the reference: without the marker the old gateway still stops,
    // it only reports the stop as unplanned.
    let marker_path = home.join(TAKEOVER_MARKER_FILE);
    if let Err(e) = write_json_atomic(&marker_path, &marker) {
        tracing::warn!(path = %marker_path.display(), error = %e, "cannot write the takeover marker");
    }
    tracing::info!(pid = holder.pid, "--replace: stopping the running gateway");
    process_info::terminate(holder.pid).map_err(io_error(home))
}

fn write_lock_record(mut file: &File, record: &ProcessRecord) -> std::io::Result<()> {
    file.set_len(0)?;
    file.rewind()?;
    serde_json::to_writer(file, record).map_err(std::io::Error::other)?;
    file.flush()?;
    file.sync_all()
}

/// `O_CREAT|O_EXCL`, as Python's `write_pid_file`: of two racing writers exactly one wins.
fn write_pid_file(path: &Path, record: &ProcessRecord) -> std::io::Result<()> {
    let mut file = private::open_options()
        .write(true)
        .create_new(true)
        .open(path)?;
    let result = serde_json::to_writer(&mut file, record)
        .map_err(std::io::Error::other)
        .and_then(|()| file.sync_all());
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv() -> Vec<String> {
        vec!["hermesd".into(), "run".into()]
    }

    #[test]
    fn second_lock_on_one_home_is_refused_with_a_clear_message() {
        let home = tempfile::tempdir().expect("tempdir");
        let first = InstanceLock::acquire(home.path(), &argv(), false).expect("first");
        let err = InstanceLock::acquire(home.path(), &argv(), false).expect_err("second");
        let pid = process_info::current_pid();
        assert_eq!(
            err.to_string(),
            format!(
                "hermesd is already running for {} (pid {pid}); stop it or use --replace",
                home.path().display()
            )
        );
        let pid_file: ProcessRecord = read_json(&home.path().join(PID_FILE)).expect("pid file");
        assert_eq!(pid_file, *first.record());
        assert_eq!(pid_file.kind.as_deref(), Some("hermes-gateway"));
        drop(first);
        assert!(
            !home.path().join(PID_FILE).exists(),
            "pid file removed on drop"
        );
        InstanceLock::acquire(home.path(), &argv(), false).expect("free again after drop");
    }

    #[test]
    fn the_holder_of_a_home_is_named_while_it_holds_it() {
        let home = tempfile::tempdir().expect("tempdir");
        assert_eq!(current_holder(home.path()), None);
        let lock = InstanceLock::acquire(home.path(), &argv(), false).expect("lock");
        let holder = current_holder(home.path()).expect("held");
        assert_eq!(holder.pid, Some(process_info::current_pid()));
        assert!(holder.since.is_some_and(|s| s.ends_with("+00:00")));
        drop(lock);
        assert_eq!(current_holder(home.path()), None);
    }

    #[test]
    fn leftover_pid_file_is_rewritten_with_our_record() {
        let home = tempfile::tempdir().expect("tempdir");
        // A leftover record (our pid, an old start time) from a previous process.
        let me = process_info::current_pid();
        let stale = format!(
            r#"{{"pid": {me}, "kind": "hermes-gateway", "argv": ["hermes", "gateway", "run"], "start_time": 1}}"#
        );
        std::fs::write(home.path().join(PID_FILE), stale).expect("write");
        let lock = InstanceLock::acquire(home.path(), &argv(), false).expect("taken over");
        let written: ProcessRecord = read_json(&home.path().join(PID_FILE)).expect("pid file");
        assert_eq!(written.start_time, process_info::start_time(me));
        assert_ne!(written.start_time, Some(1));
        drop(lock);
    }
}
