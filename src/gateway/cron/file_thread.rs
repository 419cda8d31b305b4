//! One thread for the work on `jobs.json` (reading, parsing, writing). With 10,000 jobs the
//! file is 10 MB; done on tokio's blocking pool, every pool thread that ever handled it kept
//! its own allocator arena with a file's worth of freed memory, so the daemon's RSS grew
//! with the number of such threads. One thread keeps that to one arena.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;

type Work = Box<dyn FnOnce() + Send>;

#[derive(Debug)]
pub(super) struct FileThread {
    work: mpsc::Sender<Work>,
}

impl FileThread {
    /// Starts the thread; it ends when the `FileThread` is dropped.
    pub fn start() -> Self {
        let (work, queue) = mpsc::channel::<Work>();
        let started = std::thread::Builder::new()
            .name("cron-jobs-file".into())
            .spawn(move || {
                for work in queue {
                    // A panic fails that one call (its caller sees `None`), not the thread.
                    let _ = catch_unwind(AssertUnwindSafe(work));
                }
            });
        if let Err(e) = started {
            tracing::error!(error = %e, "cannot start the cron jobs-file thread; scheduled jobs will not run");
        }
        Self { work }
    }

    /// Runs `work` on the thread; `None` if it panicked or the thread is gone.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (done, result) = tokio::sync::oneshot::channel();
        self.work
            .send(Box::new(move || {
                let _ = done.send(work());
            }))
            .ok()?;
        result.await.ok()
    }
}
