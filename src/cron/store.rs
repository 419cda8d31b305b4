//! `cron/jobs.json`, read and written as the reference does: `{"jobs": [...], "updated_at"}`
//! rewritten atomically (temp file, fsync, rename, 0600) under an exclusive `flock` on
//! `cron/.jobs.lock`, the same lock `hermes cron` takes, so either side's edits survive the
//! other's. Each job keeps every field it has, known or not, in its original order.
//!
//! A file that is not valid JSON is never overwritten: it is moved aside to
//! `jobs.json.corrupt-<stamp>` on the first write attempt after the error was reported, and
//! until then every read fails with the reason.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::job::JobRecord;
use super::raw::{self, Item};

/// How long a writer waits for another process's lock before giving up (the reference's
/// bound is the same 30 s).
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// Why the jobs file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot use {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid jobs file ({reason}); it is left untouched")]
    Corrupt { path: PathBuf, reason: String },
    #[error("another process has held {path} for more than {} s", LOCK_WAIT.as_secs())]
    LockTimeout { path: PathBuf },
}

/// The cron directory of one home.
#[derive(Debug, Clone)]
pub struct JobsStore {
    dir: PathBuf,
}

/// Holds `.jobs.lock` until dropped.
#[derive(Debug)]
pub struct JobsLock {
    file: File,
}

impl Drop for JobsLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The jobs and the file's other top-level fields.
#[derive(Debug, Clone, Default)]
pub struct JobsFile {
    pub jobs: Vec<JobRecord>,
}

impl JobsStore {
    pub fn new(cron_dir: PathBuf) -> Self {
        Self { dir: cron_dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn jobs_path(&self) -> PathBuf {
        self.dir.join("jobs.json")
    }

    pub fn output_dir(&self) -> PathBuf {
        self.dir.join("output")
    }

    /// Creates `cron/` and `cron/output/` (0700).
    pub fn ensure_dirs(&self) -> Result<(), StoreError> {
        for dir in [self.dir.clone(), self.output_dir()] {
            crate::home::private::create_dir_all(&dir).map_err(io(&dir))?;
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(io(&dir))?;
        }
        Ok(())
    }

    /// Takes the cross-process lock, waiting up to 30 s.
    pub fn lock(&self) -> Result<JobsLock, StoreError> {
        self.ensure_dirs()?;
        let path = self.dir.join(".jobs.lock");
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(io(&path))?;
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(JobsLock { file }),
                Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    // A blocking thread polling a file lock: the holder's sections are short.
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(fs::TryLockError::WouldBlock) => return Err(StoreError::LockTimeout { path }),
                Err(fs::TryLockError::Error(e)) => return Err(io(&path)(e)),
            }
        }
    }

    /// Reads the jobs (an absent file is an empty list). Call with the lock held when the
    /// result will be written back.
    pub fn load(&self) -> Result<JobsFile, StoreError> {
        let path = self.jobs_path();
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(JobsFile::default()),
            Err(e) => return Err(io(&path)(e)),
        };
        parse(&bytes).map_err(|shape| StoreError::Corrupt {
            path,
            reason: shape.to_string(),
        })
    }

    /// The first job with this id, reading only it in full.
    pub fn find(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let path = self.jobs_path();
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path)(e)),
        };
        let jobs = raw::split(&bytes).map_err(|shape| StoreError::Corrupt {
            path,
            reason: shape.to_string(),
        })?;
        Ok(jobs
            .into_iter()
            .find(|job| &*raw::Brief::of_raw(job).id == id)
            .map(raw::record))
    }

    /// Writes the jobs atomically; the caller holds the lock. A corrupt file in the way is
    /// moved aside first (its name is logged), never overwritten.
    pub fn save(&self, lock: &JobsLock, file: &JobsFile, now: &str) -> Result<(), StoreError> {
        let path = self.jobs_path();
        if let Ok(bytes) = fs::read(&path)
            && let Err(reason) = raw::split(&bytes)
        {
            let aside = self.set_aside(&path)?;
            tracing::error!(path = %path.display(), kept_as = %aside.display(), %reason,
                "cron jobs file was not valid JSON; kept aside before writing a new one");
        }
        let items: Vec<Item> = file.jobs.iter().map(Item::Record).collect();
        self.save_items(lock, &items, now)
    }

    /// Writes `items` as the jobs, streamed to the temporary file (no copy of the whole
    /// document in memory). The caller holds the lock and has just read the file it
    /// replaces, so it is known not to be corrupt.
    pub fn save_items(
        &self,
        _lock: &JobsLock,
        items: &[Item],
        now: &str,
    ) -> Result<(), StoreError> {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            jobs: &'a [Item<'a>],
            updated_at: &'a str,
        }
        let doc = Doc {
            jobs: items,
            updated_at: now,
        };
        write_atomic_with(&self.jobs_path(), |out| {
            serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::other)?;
            out.write_all(b"\n")
        })
    }

    /// Moves a corrupt jobs file out of the way, keeping it for the owner.
    pub fn set_aside(&self, path: &Path) -> Result<PathBuf, StoreError> {
        let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S");
        let aside = path.with_file_name(format!("jobs.json.corrupt-{stamp}"));
        fs::rename(path, &aside).map_err(io(path))?;
        Ok(aside)
    }

    /// Load, change and save under one lock. `change` returns what the caller wants back.
    pub fn update<T>(
        &self,
        now: &str,
        change: impl FnOnce(&mut JobsFile) -> T,
    ) -> Result<T, StoreError> {
        let lock = self.lock()?;
        let mut file = self.load()?;
        let result = change(&mut file);
        self.save(&lock, &file, now)?;
        Ok(result)
    }
}

/// Reads the file's bytes into records (the shapes `raw::split` accepts).
fn parse(bytes: &[u8]) -> Result<JobsFile, raw::ShapeError> {
    Ok(JobsFile {
        jobs: raw::split(bytes)?.into_iter().map(raw::record).collect(),
    })
}

/// Temp file in the same directory, fsync, rename over, 0600.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    write_atomic_with(path, |out| out.write_all(bytes))
}

/// `write_atomic` with the content written by `fill` through a buffer.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<&mut File>) -> std::io::Result<()>,
) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let (tmp, mut file) = tempfile_in(dir).map_err(io(dir))?;
    let written = (|| {
        let mut out = BufWriter::new(&mut file);
        fill(&mut out)?;
        out.flush()?;
        drop(out);
        file.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io(&tmp)(e));
    }
    fs::rename(&tmp, path).map_err(io(path))?;
    Ok(())
}

fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, File)> {
    for attempt in 0..100u32 {
        let name = format!(
            ".jobs_{}_{}_{attempt}.tmp",
            std::process::id(),
            rand::random::<u32>()
        );
        let path = dir.join(name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free temporary file name"))
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
