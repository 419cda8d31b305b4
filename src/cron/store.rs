//! `cron/jobs.json`, read and written as the reference does: `{"jobs": [...], "updated_at"}`
//! rewritten atomically (temp file, fsync, rename, 0600) under an exclusive `flock` on
//! `cron/.jobs.lock`, the same lock `hermes cron` takes, so either side's edits survive the
//! other's. Each job keeps every field it has, known or not, in its original order.
//!
//! With several instances on PostgreSQL the same bytes live in the shared row
//! `cron/jobs.json` under its cluster-wide lock instead (`backing.rs`; opening and seeding
//! in `shared.rs`); every rule here holds for both.
//!
//! Jobs that are not valid JSON are never overwritten: they are moved aside to
//! `jobs.json.corrupt-<stamp>` on the first write attempt after the error was reported, and
//! until then every read fails with the reason.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::backing::{ASIDE_PREFIX, Backing, LOCK_WAIT, LockFailure, SHARED_NAME};
pub use super::backing::{JobsLock, JobsVersion};
use super::job::JobRecord;
use super::raw::{self, Item};
use crate::coord::SharedFiles;

/// Why the jobs could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot use {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot use {SHARED_NAME} in the shared database: {source}")]
    Shared {
        #[source]
        source: std::io::Error,
    },
    /// `place` names the file, or the shared row.
    #[error("{place} is not a valid jobs file ({reason}); it is left untouched")]
    Corrupt { place: String, reason: String },
    #[error("another process has held {path} for more than {} s", LOCK_WAIT.as_secs())]
    LockTimeout { path: PathBuf },
}

/// The jobs of one home: its cron directory, and where `jobs.json` lives (that directory,
/// or the shared database of several instances; see `backing.rs`). Run records
/// (`cron/output/`) stay in the home either way.
#[derive(Debug, Clone)]
pub struct JobsStore {
    dir: PathBuf,
    backing: Backing,
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
    /// The jobs in `cron_dir/jobs.json`.
    pub fn new(cron_dir: PathBuf) -> Self {
        Self {
            dir: cron_dir,
            backing: Backing::Files,
        }
    }

    /// The jobs in the shared database's `cron/jobs.json`; `cron_dir` still holds the run
    /// records. Touches nothing: [`JobsStore::open_shared`] also seeds the shared copy.
    pub fn shared(cron_dir: PathBuf, shared: impl Into<SharedFiles>) -> Self {
        Self {
            dir: cron_dir,
            backing: Backing::Shared(shared.into()),
        }
    }

    /// Whether the jobs live in the shared database.
    pub fn is_shared(&self) -> bool {
        matches!(self.backing, Backing::Shared(_))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The home's `cron/jobs.json` (where the jobs are unless they are shared).
    pub fn jobs_path(&self) -> PathBuf {
        self.dir.join("jobs.json")
    }

    /// Where the jobs are, for people: the file's path, or the shared row.
    pub fn describe(&self) -> String {
        match self.backing {
            Backing::Files => self.jobs_path().display().to_string(),
            Backing::Shared(_) => format!("{SHARED_NAME} in the shared database"),
        }
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

    /// Takes the cross-process lock: `flock` on `.jobs.lock` (waiting up to 30 s), or the
    /// shared row's cluster-wide lock.
    pub fn lock(&self) -> Result<JobsLock, StoreError> {
        let taken = match &self.backing {
            Backing::Files => {
                self.ensure_dirs()?;
                JobsLock::on_file(&self.dir.join(".jobs.lock"))
            }
            Backing::Shared(shared) => JobsLock::on_shared(shared),
        };
        taken.map_err(|failure| match failure {
            LockFailure::Io(path, source) => StoreError::Io { path, source },
            LockFailure::TimedOut(path) => StoreError::LockTimeout { path },
            LockFailure::Shared(source) => StoreError::Shared { source },
        })
    }

    fn backing_error(&self, source: std::io::Error) -> StoreError {
        match self.backing {
            Backing::Files => StoreError::Io {
                path: self.jobs_path(),
                source,
            },
            Backing::Shared(_) => StoreError::Shared { source },
        }
    }

    /// The jobs' bytes as stored, `None` when there are none yet.
    pub fn read_bytes(&self) -> Result<Option<Vec<u8>>, StoreError> {
        self.backing
            .read(&self.jobs_path())
            .map_err(|e| self.backing_error(e))
    }

    /// The version of the stored jobs (`None`: none stored), cheap enough to poll.
    pub fn version(&self) -> Result<Option<JobsVersion>, StoreError> {
        self.backing
            .version(&self.jobs_path())
            .map_err(|e| self.backing_error(e))
    }

    /// Replaces the stored bytes at once (readers see the old or the new jobs); the caller
    /// holds the lock.
    pub(super) fn write_bytes(&self, _lock: &JobsLock, bytes: &[u8]) -> Result<(), StoreError> {
        match &self.backing {
            Backing::Files => write_atomic(&self.jobs_path(), bytes),
            Backing::Shared(shared) => shared
                .write(SHARED_NAME, bytes)
                .map_err(|source| StoreError::Shared { source }),
        }
    }

    fn corrupt(&self, shape: raw::ShapeError) -> StoreError {
        StoreError::Corrupt {
            place: self.describe(),
            reason: shape.to_string(),
        }
    }

    /// Reads the jobs (none stored is an empty list). Call with the lock held when the
    /// result will be written back.
    pub fn load(&self) -> Result<JobsFile, StoreError> {
        match self.read_bytes()? {
            Some(bytes) => parse(&bytes).map_err(|shape| self.corrupt(shape)),
            None => Ok(JobsFile::default()),
        }
    }

    /// The first job with this id, reading only it in full.
    pub fn find(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let Some(bytes) = self.read_bytes()? else {
            return Ok(None);
        };
        let jobs = raw::split(&bytes).map_err(|shape| self.corrupt(shape))?;
        Ok(jobs
            .into_iter()
            .find(|job| &*raw::Brief::of_raw(job).id == id)
            .map(raw::record))
    }

    /// Writes the jobs atomically; the caller holds the lock. A corrupt file in the way is
    /// moved aside first (where it went is logged), never overwritten.
    pub fn save(&self, lock: &JobsLock, file: &JobsFile, now: &str) -> Result<(), StoreError> {
        if let Ok(Some(bytes)) = self.read_bytes()
            && let Err(reason) = raw::split(&bytes)
        {
            let aside = self.set_aside(lock)?;
            tracing::error!(jobs = %self.describe(), kept_as = %aside, %reason,
                "cron jobs file was not valid JSON; kept aside before writing a new one");
        }
        let items: Vec<Item> = file.jobs.iter().map(Item::Record).collect();
        self.save_items(lock, &items, now)
    }

    /// Writes `items` as the jobs; to a file, streamed to the temporary file (no copy of
    /// the whole document in memory). The caller holds the lock and has just read the jobs
    /// it replaces, so they are known not to be corrupt.
    pub fn save_items(&self, lock: &JobsLock, items: &[Item], now: &str) -> Result<(), StoreError> {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            jobs: &'a [Item<'a>],
            updated_at: &'a str,
        }
        let doc = Doc {
            jobs: items,
            updated_at: now,
        };
        let render = |out: &mut dyn Write| {
            serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::other)?;
            out.write_all(b"\n")
        };
        match &self.backing {
            Backing::Files => write_atomic_with(&self.jobs_path(), |out| render(out)),
            Backing::Shared(_) => {
                let mut bytes = Vec::new();
                render(&mut bytes).map_err(|e| self.backing_error(e))?;
                self.write_bytes(lock, &bytes)
            }
        }
    }

    /// Moves corrupt jobs out of the way, keeping them for the owner; the caller holds the
    /// lock. A file is renamed to `jobs.json.corrupt-<stamp>`; a shared copy is kept under
    /// `cron/jobs.json.corrupt-<stamp>` and replaced by an empty list (the row stays, so no
    /// instance seeds it again from its home). Returns where the bytes were kept.
    pub fn set_aside(&self, lock: &JobsLock) -> Result<String, StoreError> {
        let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S");
        match &self.backing {
            Backing::Files => {
                let path = self.jobs_path();
                let aside = path.with_file_name(format!("{ASIDE_PREFIX}{stamp}"));
                fs::rename(&path, &aside).map_err(io(&path))?;
                Ok(aside.display().to_string())
            }
            Backing::Shared(shared) => {
                let aside = format!("cron/{ASIDE_PREFIX}{stamp}");
                let bytes = self.read_bytes()?.unwrap_or_default();
                shared
                    .write(&aside, &bytes)
                    .map_err(|source| StoreError::Shared { source })?;
                let now =
                    crate::cron::schedule::format_timestamp(chrono::Utc::now().fixed_offset());
                self.save_items(lock, &[], &now)?;
                Ok(format!("{aside} in the shared database"))
            }
        }
    }

    /// The corrupt copies kept aside so far (`jobs.json.corrupt-<stamp>`), sorted.
    pub fn aside_names(&self) -> Result<Vec<String>, StoreError> {
        self.backing
            .aside_names(&self.dir)
            .map_err(|e| self.backing_error(e))
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
