//! The jobs of several instances on one PostgreSQL database. With `state.backend: postgres`
//! the jobs live in the shared row `cron/jobs.json`, so a job made on one instance (by the
//! agent, `/cron` or `hermesd cron`) is listed, run and recovered by every instance. Here:
//! opening the store the configuration calls for, seeding the shared copy from the first
//! instance's home, noticing a home copy that is no longer read, and moving Hermes's
//! `jobs.json` in and out (`hermesd cron import | export`).

use std::path::{Path, PathBuf};

use super::raw;
use super::store::{JobsStore, StoreError, write_atomic};
use crate::config::Config;
use crate::coord::SharedFiles;
use crate::home::HermesHome;

/// Why `hermesd cron import` or `export` moved nothing.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a Hermes jobs file ({reason}); nothing was imported")]
    NotJobsFile { path: PathBuf, reason: String },
    #[error(
        "{path} is the jobs file this home already uses (state.backend is not postgres); \
         import and export move jobs between a jobs.json and the shared database"
    )]
    SameFile { path: PathBuf },
    #[error("no jobs are stored in {place} yet; nothing was exported")]
    NothingStored { place: String },
}

/// The jobs `config` calls for, without reading or writing anything: the shared copy when
/// the state is in PostgreSQL, the home's `cron/jobs.json` otherwise.
pub fn configured_store(home: &HermesHome, config: &Config) -> Result<JobsStore, StoreError> {
    match crate::state::shared_files(config).map_err(|source| StoreError::Shared { source })? {
        Some(shared) => Ok(JobsStore::shared(home.cron_dir(), shared)),
        None => Ok(JobsStore::new(home.cron_dir())),
    }
}

/// As [`configured_store`], seeding the shared copy from this home when there is none yet
/// ([`JobsStore::open_shared`]). Every front end that reads or changes jobs opens this way.
pub fn open_store(home: &HermesHome, config: &Config) -> Result<JobsStore, StoreError> {
    let store = configured_store(home, config)?;
    store.seed_from_home()?;
    Ok(store)
}

impl JobsStore {
    /// The shared jobs, seeded from this home's `cron/jobs.json` when the shared copy does
    /// not exist yet (the first instance brings its jobs along, as with the pairing files).
    pub fn open_shared(
        cron_dir: PathBuf,
        shared: impl Into<SharedFiles>,
    ) -> Result<Self, StoreError> {
        let store = Self::shared(cron_dir, shared);
        store.seed_from_home()?;
        Ok(store)
    }

    /// Copies the home's jobs file, byte for byte, into an absent shared copy, under the
    /// shared lock (two instances starting at once seed once). A home file that is not a
    /// jobs file is not copied: it is reported, and stays where it is.
    fn seed_from_home(&self) -> Result<(), StoreError> {
        if !self.is_shared() {
            return Ok(());
        }
        let lock = self.lock()?;
        if self.version()?.is_some() {
            return Ok(());
        }
        let path = self.jobs_path();
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        match raw::split(&bytes) {
            Ok(jobs) => {
                let count = jobs.len();
                self.write_bytes(&lock, &bytes)?;
                tracing::info!(file = %path.display(), jobs = count,
                    "cron jobs copied into the shared database");
            }
            Err(reason) => tracing::error!(file = %path.display(), %reason,
                "this home's cron jobs file is not valid JSON, so it was not copied into the shared database; repair it and run `hermesd cron import`"),
        }
        Ok(())
    }

    /// The home's `cron/jobs.json` when the jobs are shared and that file holds something
    /// else than the shared copy: it is no longer read, which its owner should hear.
    pub fn unused_home_copy(&self) -> Result<Option<PathBuf>, StoreError> {
        if !self.is_shared() {
            return Ok(None);
        }
        let path = self.jobs_path();
        let local = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        let differs = self.read_bytes()?.is_none_or(|shared| shared != local);
        Ok(differs.then_some(path))
    }

    /// Replaces the jobs with the Hermes jobs file at `path`, byte for byte, under the
    /// jobs lock; returns how many jobs it holds. A file that is not a jobs file changes
    /// nothing; stored jobs that are not valid JSON are kept aside first.
    pub fn import_from(&self, path: &Path) -> Result<usize, TransferError> {
        self.refuse_own_file(path)?;
        let bytes = std::fs::read(path).map_err(|source| TransferError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let count = raw::split(&bytes)
            .map_err(|reason| TransferError::NotJobsFile {
                path: path.to_path_buf(),
                reason: reason.to_string(),
            })?
            .len();
        let lock = self.lock()?;
        // Jobs that are not valid JSON are kept aside, never overwritten, as a save does.
        if let Some(current) = self.read_bytes()?
            && let Err(reason) = raw::split(&current)
        {
            let aside = self.set_aside(&lock)?;
            tracing::warn!(jobs = %self.describe(), kept_as = %aside, %reason,
                "the jobs replaced by an import were not valid JSON; kept aside");
        }
        self.write_bytes(&lock, &bytes)?;
        Ok(count)
    }

    /// Writes the jobs, byte for byte, as the Hermes jobs file `path` (atomically, 0600,
    /// holding Hermes's `.jobs.lock` beside it when it is named `jobs.json`, so a `hermes`
    /// on that home never reads half of it); returns how many jobs were written. Corrupt
    /// jobs are not exported.
    pub fn export_to(&self, path: &Path) -> Result<usize, TransferError> {
        self.refuse_own_file(path)?;
        let _lock = self.lock()?;
        let bytes = self
            .read_bytes()?
            .ok_or_else(|| TransferError::NothingStored {
                place: self.describe(),
            })?;
        let count = raw::split(&bytes)
            .map_err(|reason| StoreError::Corrupt {
                place: self.describe(),
                reason: reason.to_string(),
            })?
            .len();
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        let _destination_lock = match dir {
            Some(dir) if path.file_name().is_some_and(|n| n == "jobs.json") => {
                Some(JobsStore::new(dir.to_path_buf()).lock()?)
            }
            _ => None,
        };
        write_atomic(path, &bytes)?;
        Ok(count)
    }

    /// On one machine the jobs *are* the home's file: moving them onto themselves would
    /// only look like it did something.
    fn refuse_own_file(&self, path: &Path) -> Result<(), TransferError> {
        let own = self.jobs_path();
        let same = !self.is_shared()
            && (path == own
                || std::fs::canonicalize(path)
                    .ok()
                    .is_some_and(|p| std::fs::canonicalize(&own).ok().is_some_and(|o| o == p)));
        if same {
            return Err(TransferError::SameFile {
                path: path.to_path_buf(),
            });
        }
        Ok(())
    }
}
