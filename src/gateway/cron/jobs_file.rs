//! The scheduler's hold on `cron/jobs.json`: the store, the one thread that reads and
//! writes it, the due-ness index of the version last read or written, and the watcher that
//! notices another process's change between ticks.
//!
//! The watcher makes `hermesd cron run` (or `add`, `edit`, `hermes cron …`, or another
//! instance's change to the shared copy) seen within `WATCH_EVERY`, not at the next tick,
//! which may be a minute away. It compares the stored version (a `stat` of the file, or the
//! shared row's version counter) with the one the index was built from; no inotify, because
//! a `stat` a second is cheap, works the same on every file system (network and container
//! mounts included), needs no extra crate, and covers the shared row with the same loop. The
//! reference only looks at its next tick.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::file_thread::FileThread;
use super::index::Index;
use crate::cron::{JobRecord, JobsStore, JobsVersion};

/// How often the watcher looks at the file.
const WATCH_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(super) struct JobsFile {
    pub store: JobsStore,
    /// Where the file is read and written.
    pub thread: FileThread,
    /// What decides due-ness, per job, for the file version last read or written (taken
    /// by a tick while it runs).
    index: Mutex<Option<Index>>,
}

impl JobsFile {
    pub fn open(store: JobsStore) -> Self {
        Self {
            store,
            thread: FileThread::start(),
            index: Mutex::new(None),
        }
    }

    /// The index, taken for a tick to bring up to date (the watcher stays quiet meanwhile).
    pub fn take_index(&self) -> Option<Index> {
        self.index.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    pub fn keep_index(&self, index: Index) {
        *self.index.lock().unwrap_or_else(|e| e.into_inner()) = Some(index);
    }

    fn known_stamp(&self) -> Option<Option<JobsVersion>> {
        self.index
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|index| index.stamp)
    }

    /// The job with `job_id` as the file holds it now.
    pub async fn find(&self, job_id: &str) -> Option<JobRecord> {
        let jobs = self.store.clone();
        let id = job_id.to_owned();
        self.thread
            .run(move || jobs.find(&id).ok().flatten())
            .await
            .flatten()
    }

    /// Until `stop`, wakes `tick` whenever the file changed behind the index's back.
    pub async fn watch(&self, stop: &CancellationToken, tick: &Notify) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(WATCH_EVERY) => {}
            }
            let jobs = self.store.clone();
            // A version that cannot be read is the tick's to report.
            let Ok(Ok(seen)) = tokio::task::spawn_blocking(move || jobs.version()).await else {
                continue;
            };
            // No index: a tick is running (it wakes this loop's next look) or the file could
            // not be read (its error is reported by the ticks; waking would only repeat it).
            if self.known_stamp().is_some_and(|known| known != seen) {
                tick.notify_one();
            }
        }
    }
}
