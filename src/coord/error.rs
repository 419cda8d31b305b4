//! Errors of the coordination interface, the same whatever backend answers.

/// A failure inside a backend (a query that failed, a connection lost), kept as the source
/// of a [`CoordError`] so no backend's error type shows in this interface.
pub type BackendFailure = Box<dyn std::error::Error + Send + Sync>;

/// A failed coordination request.
#[derive(Debug, thiserror::Error)]
pub enum CoordError {
    /// The lease expired or another holder took it: nothing more may be done under it.
    #[error("the {scope} lease {key:?} is no longer held with fencing token {token}")]
    LeaseLost {
        scope: &'static str,
        key: String,
        token: i64,
    },
    /// The backend could not answer (shown as the backend's own message).
    #[error(transparent)]
    Backend(BackendFailure),
}

pub type CoordResult<T> = Result<T, CoordError>;

/// Why a session-work listener stopped.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The state was closed: nothing is lost, the daemon is stopping.
    #[error("the coordination backend is closed")]
    Closed,
    /// The stream broke; open a new listener (announcements meanwhile are lost).
    #[error(transparent)]
    Interrupted(BackendFailure),
}
