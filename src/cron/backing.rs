//! Where `cron/jobs.json` lives. On one machine it is the home's file, shared with
//! `hermes cron` through `flock` on `cron/.jobs.lock`. With several instances on PostgreSQL
//! it is the shared row `cron/jobs.json` (`coord::SharedFiles`: the same bytes under the
//! same name, a cluster-wide advisory lock), because instances on different machines share
//! no home. `store.rs` keeps every rule of the jobs file over either; only the bytes move.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::coord::{SharedFiles, SharedLock};

/// The shared row holding the jobs (the file's path inside the home).
pub const SHARED_NAME: &str = "cron/jobs.json";
/// How the copies of a corrupt jobs file kept aside begin, in the cron directory or among
/// the shared rows (`cron/jobs.json.corrupt-<stamp>`).
pub const ASIDE_PREFIX: &str = "jobs.json.corrupt-";

/// How long a writer waits for another process's file lock before giving up (the
/// reference's bound is the same 30 s).
pub(super) const LOCK_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Default)]
pub(super) enum Backing {
    /// `cron/jobs.json` in the home.
    #[default]
    Files,
    /// The row `cron/jobs.json` in the shared database.
    Shared(SharedFiles),
}

/// One version of the jobs, to notice a change without reading them: the file's size,
/// modification time and inode, or the shared row's version counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobsVersion {
    File(u64, SystemTime, u64),
    Shared(i64),
}

/// Holds the jobs lock (`.jobs.lock`'s `flock`, or the shared row's advisory lock) until
/// dropped.
#[derive(Debug)]
pub struct JobsLock {
    _held: HeldLock,
}

#[derive(Debug)]
enum HeldLock {
    File(#[allow(dead_code)] FlockedFile),
    Shared(#[allow(dead_code)] SharedLock),
}

#[derive(Debug)]
struct FlockedFile(File);

impl Drop for FlockedFile {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Why the cross-process lock could not be taken.
pub(super) enum LockFailure {
    Io(PathBuf, io::Error),
    TimedOut(PathBuf),
    Shared(io::Error),
}

impl JobsLock {
    /// Takes `flock` on `lock_path`, waiting up to [`LOCK_WAIT`].
    pub(super) fn on_file(lock_path: &Path) -> Result<Self, LockFailure> {
        let failed = |e| LockFailure::Io(lock_path.to_path_buf(), e);
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(lock_path)
            .map_err(failed)?;
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            match file.try_lock() {
                Ok(()) => {
                    return Ok(Self {
                        _held: HeldLock::File(FlockedFile(file)),
                    });
                }
                Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    // A blocking thread polling a file lock: the holder's sections are short.
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(LockFailure::TimedOut(lock_path.to_path_buf()));
                }
                Err(fs::TryLockError::Error(e)) => return Err(failed(e)),
            }
        }
    }

    /// Takes the shared row's advisory lock (waits for the holder, on any instance).
    pub(super) fn on_shared(shared: &SharedFiles) -> Result<Self, LockFailure> {
        let held = shared.lock(SHARED_NAME).map_err(LockFailure::Shared)?;
        Ok(Self {
            _held: HeldLock::Shared(held),
        })
    }
}

impl Backing {
    /// The jobs' bytes, `None` when there are none yet.
    pub(super) fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        match self {
            Backing::Files => match fs::read(path) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            },
            Backing::Shared(shared) => Ok(shared.read(SHARED_NAME)?.map(|(bytes, _)| bytes)),
        }
    }

    pub(super) fn version(&self, path: &Path) -> io::Result<Option<JobsVersion>> {
        match self {
            Backing::Files => match fs::metadata(path) {
                Ok(meta) => Ok(Some(JobsVersion::File(
                    meta.len(),
                    meta.modified()?,
                    meta.ino(),
                ))),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            },
            Backing::Shared(shared) => Ok(shared.version(SHARED_NAME)?.map(JobsVersion::Shared)),
        }
    }

    /// The names of the corrupt copies kept aside (`jobs.json.corrupt-<stamp>`), sorted.
    pub(super) fn aside_names(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names: Vec<String> = match self {
            Backing::Files => match fs::read_dir(dir) {
                Ok(entries) => entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|name| name.starts_with(ASIDE_PREFIX))
                    .collect(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(e),
            },
            Backing::Shared(shared) => shared
                .list(&format!("cron/{ASIDE_PREFIX}"))?
                .into_iter()
                .filter_map(|name| name.strip_prefix("cron/").map(str::to_owned))
                .collect(),
        };
        names.sort();
        Ok(names)
    }
}
