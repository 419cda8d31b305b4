//! Where a background process came from and the news of its end: a process started by a
//! chat turn remembers the chat ([`ProcessOrigin`]), and when it exits the registry
//! broadcasts a [`ProcessExit`] that the gateway turns into a notice for that chat
//! (`display.background_process_notifications`). Tools stay below the gateway: they only
//! publish; nobody listening is fine.

use std::time::SystemTime;

use tokio::sync::broadcast;

/// Exits kept for a slow listener before the oldest are dropped (it is told how many).
pub const EXIT_BACKLOG: usize = 64;

/// The chat a background process was started from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOrigin {
    pub platform: String,
    pub chat_id: String,
    pub thread_id: Option<String>,
}

/// A background process that ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessExit {
    /// `proc_<12 hex>`.
    pub id: String,
    pub command: String,
    /// `None` when the exit status is unknown (killed by a signal, lost).
    pub exit_code: Option<i32>,
    /// The last characters of its output, ANSI-stripped.
    pub output_tail: String,
    pub origin: ProcessOrigin,
    pub started_at: SystemTime,
    /// How long it ran, in whole seconds.
    pub runtime_secs: u64,
}

/// Characters of output an exit carries.
pub const EXIT_TAIL_CHARS: usize = 1000;

pub(super) fn channel() -> broadcast::Sender<ProcessExit> {
    broadcast::channel(EXIT_BACKLOG).0
}
