//! Notices another process's change to `jobs.json` between ticks: `hermesd cron run` (or
//! `add`, `edit`, `hermes cron …`) is seen within `WATCH_EVERY`, not at the next tick,
//! which may be a minute away. A `stat` of the file against the version the scheduler last
//! read or wrote; no inotify, because a `stat` a second is cheap, works the same on every
//! file system (network and container mounts included), and needs no extra crate. The
//! reference only looks at its next tick.

use std::sync::Arc;
use std::time::Duration;

use super::CronScheduler;
use super::index::stamp;

/// How often the file is looked at.
const WATCH_EVERY: Duration = Duration::from_secs(1);

impl CronScheduler {
    pub(super) async fn watch_file(self: Arc<Self>) {
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(WATCH_EVERY) => {}
            }
            let jobs = self.jobs.clone();
            let Ok(seen) = tokio::task::spawn_blocking(move || stamp(&jobs)).await else {
                continue;
            };
            // No index: a tick is running (it wakes this loop's next look) or the file could
            // not be read (its error is reported by the ticks; waking would only repeat it).
            let known = self
                .index
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(|index| index.stamp);
            if known.is_some_and(|known| known != seen) {
                self.wake();
            }
        }
    }
}
