//! DM pairing, file-compatible with the Python Hermes `PairingStore`: an unknown user gets a
//! one-time code, the owner approves it with `hermesd pairing approve`, and the user is
//! authorized from then on.
//!
//! Storage is the reference's: `platforms/pairing/` (or the legacy `pairing/` when that has
//! content) holding `{platform}-pending.json`, `{platform}-approved.json` and
//! `_rate_limits.json`, all mode 0600, written atomically; codes are stored only as salted
//! SHA-256 hashes. Every read-modify-write runs under an in-process mutex *and* an advisory
//! `flock` on `.pairing.lock`, so the daemon and a concurrent CLI never lose each other's
//! updates. Time is passed in (`now`, Unix seconds) so the rules are testable.
//!
//! With several instances on PostgreSQL the same files are rows of the shared-files table
//! (`backing.rs`), under a cluster-wide advisory lock instead of `flock`.
//!
//! All calls do blocking I/O; async callers use `spawn_blocking`.

mod approved_cache;
mod backing;
mod code;
mod dotenv_sync;
mod entries;
mod files;
#[cfg(test)]
mod interop_tests;
mod listing;
mod store;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use serde::Serialize;

pub use code::{
    ALPHABET, CODE_LENGTH, CODE_TTL_SECONDS, LOCKOUT_SECONDS, MAX_FAILED_ATTEMPTS,
    MAX_PENDING_PER_PLATFORM, PairingCode, RATE_LIMIT_SECONDS, hash_code,
};
pub use dotenv_sync::{allowlist_env_var, save_env_value};
pub use files::{LEGACY_NAME, LOCK_FILE, NEW_SUBPATH};
pub use store::PairingStore;

/// The outcome of an unknown user's DM on a pairing platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairingRequest {
    /// A new code: reply with [`crate::gateway::authorize::pairing_code_text`].
    Issued(PairingCode),
    /// The user asked (or was answered) within the last 10 minutes: stay silent.
    RateLimited,
    /// The platform already has 3 codes outstanding: reply with the "too many" text.
    TooManyPending,
    /// The platform is locked after failed approvals: reply with the "too many" text.
    LockedOut,
}

/// The user an approved code belonged to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovedUser {
    pub user_id: String,
    pub user_name: String,
}

/// One outstanding request, as `hermesd pairing list` shows it. The code itself is never
/// known after issue; `code` holds the first 8 hex digits of its hash ("legacy" for
/// entries without one), as in the reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingRequest {
    pub platform: String,
    pub code: String,
    pub user_id: String,
    pub user_name: String,
    pub age_minutes: i64,
}

/// One approved user.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovedListing {
    pub platform: String,
    pub user_id: String,
    pub user_name: String,
    pub approved_at: Option<f64>,
}

/// Why a pairing operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PairingError {
    #[error(
        "invalid platform name {0:?}: use lowercase letters, digits, '_' and '-', not starting with '_' or '-'"
    )]
    InvalidPlatform(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl PairingError {
    fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

impl From<files::ReadError> for PairingError {
    fn from(e: files::ReadError) -> Self {
        Self::io(format!("cannot read {}", e.path.display()), e.source)
    }
}

impl From<files::ReadError> for ApproveError {
    fn from(e: files::ReadError) -> Self {
        Self::Store(e.into())
    }
}

/// Why a code was not approved.
#[derive(Debug, thiserror::Error)]
pub enum ApproveError {
    #[error("no pending code on '{platform}' matches: never issued, or expired")]
    NotFound { platform: String },
    /// Too many failed approvals: nothing is approved until `until` (Unix seconds), even a
    /// valid code.
    #[error("approvals on '{platform}' are blocked after too many wrong codes")]
    LockedOut { platform: String, until: f64 },
    #[error(transparent)]
    Store(#[from] PairingError),
}

/// Where the store keeps its files, and the file names, for messages and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairingPaths {
    pub dir: PathBuf,
}

impl PairingPaths {
    pub fn pending(&self, platform: &str) -> PathBuf {
        self.dir.join(format!("{platform}-pending.json"))
    }

    pub fn approved(&self, platform: &str) -> PathBuf {
        self.dir.join(format!("{platform}-approved.json"))
    }

    pub fn rate_limits(&self) -> PathBuf {
        self.dir.join("_rate_limits.json")
    }
}

/// Checks a platform name before it becomes part of a file name.
pub fn validate_platform(platform: &str) -> Result<(), PairingError> {
    let ok = !platform.is_empty()
        && platform.len() <= 64
        && !platform.starts_with(['_', '-'])
        && platform
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(PairingError::InvalidPlatform(platform.to_owned()))
    }
}
