//! What a lease is, whatever keeps it: a holder's claim on `(scope, key)` until an expiry,
//! with a fencing token that grows with every new holder, so a holder that stalled past its
//! expiry can be refused by the token alone.

use std::time::Duration;

use super::error::CoordError;

/// What a lease guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaseScope {
    /// One turn at a time per session key.
    Session,
    /// One instance per ingress (the Telegram poller, a Discord shard).
    Ingress,
    /// An instance itself (key = its id): held while it runs, so the work it owns
    /// (obligations, cron runs) is taken over by others only once it has expired.
    Instance,
}

impl LeaseScope {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseScope::Session => "session",
            LeaseScope::Ingress => "ingress",
            LeaseScope::Instance => "instance",
        }
    }
}

/// A held lease, as of its last acquisition or renewal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub scope: LeaseScope,
    pub key: String,
    pub holder: String,
    /// The fencing token: higher than every earlier holder's token for this key.
    pub token: i64,
    /// The backend's time when this hold ends unless renewed, in microseconds since the Unix
    /// epoch (the database's clock when shared, so instances' clocks never matter).
    pub expires_at_micros: i64,
    /// The backend's time of this acquisition, in microseconds since the Unix epoch.
    pub acquired_at_micros: i64,
    /// The hold time asked for at the last acquisition or renewal.
    pub ttl: Duration,
}

impl Lease {
    /// The error for a request made under this lease after it was lost.
    pub fn lost(&self) -> CoordError {
        CoordError::LeaseLost {
            scope: self.scope.as_str(),
            key: self.key.clone(),
            token: self.token,
        }
    }
}
