//! The small shared handles the router's parts are built from: the current reloadable
//! settings, the shutdown flag and the paused platforms. Each part holds the handles it
//! uses (a clone of the `Arc`), so what a part may read is written in its struct.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::live::Live;

/// The current [`Live`] settings; a reload swaps the whole snapshot at once.
#[derive(Debug)]
pub(super) struct LiveCell(RwLock<Arc<Live>>, tokio::sync::Notify);

impl LiveCell {
    pub(super) fn new(live: Live) -> Arc<Self> {
        Arc::new(Self(
            RwLock::new(Arc::new(live)),
            tokio::sync::Notify::new(),
        ))
    }

    /// A chat command asks the daemon to read its configuration again (as SIGHUP does).
    pub(super) fn request_reload(&self) {
        self.1.notify_one();
    }

    pub(super) async fn reload_requested(&self) {
        self.1.notified().await;
    }

    /// One consistent snapshot; later reloads do not change it.
    pub(super) fn get(&self) -> Arc<Live> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(super) fn replace(&self, fresh: Arc<Live>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = fresh;
    }
}

/// Set once when the daemon begins to stop: from then on an interrupted turn stays
/// unfinished in the journal and nothing new is taken up.
#[derive(Debug, Clone, Default)]
pub(super) struct Stopping(Arc<AtomicBool>);

impl Stopping {
    pub(super) fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub(super) fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The platforms `/platform pause` silenced.
#[derive(Debug, Clone, Default)]
pub(super) struct Paused(Arc<Mutex<HashSet<String>>>);

impl Paused {
    pub(super) fn lock(&self) -> MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn contains(&self, platform: &str) -> bool {
        self.lock().contains(platform)
    }
}
