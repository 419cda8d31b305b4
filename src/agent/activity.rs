//! When a turn last showed a sign of life (a model call starting or returning, a streamed
//! token, a tool starting or finishing): the gateway's turn budget (`agent.gateway_timeout`)
//! counts idle time from here, as Hermes's inactivity timeout does, so a long turn that
//! keeps working is never cut off.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A shared clock of the last activity; clones see the same clock.
#[derive(Debug, Clone)]
pub struct Activity(Arc<Mutex<Instant>>);

impl Default for Activity {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(Instant::now())))
    }
}

impl Activity {
    pub fn touch(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// How long since the last touch (or since the clock was made).
    pub fn idle(&self) -> Duration {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).elapsed()
    }
}
