//! When a turn last showed a sign of life (a model call starting or returning, a streamed
//! token, a tool starting or finishing): the gateway's turn budget (`agent.gateway_timeout`)
//! counts idle time from here, as Hermes's inactivity timeout does, so a long turn that
//! keeps working is never cut off. A tool still running counts as activity throughout (Hermes's
//! terminal touches the clock while its command runs); each tool has its own timeout.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A shared clock of the last activity; clones see the same clock.
#[derive(Debug, Clone, Default)]
pub struct Activity(Arc<Mutex<Clock>>);

#[derive(Debug)]
struct Clock {
    last: Instant,
    tools_running: usize,
}

impl Default for Clock {
    fn default() -> Self {
        Self {
            last: Instant::now(),
            tools_running: 0,
        }
    }
}

impl Activity {
    fn clock(&self) -> std::sync::MutexGuard<'_, Clock> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn touch(&self) {
        self.clock().last = Instant::now();
    }

    /// A tool started (`true`) or finished (`false`); either is activity.
    pub fn tool(&self, started: bool) {
        let mut clock = self.clock();
        clock.last = Instant::now();
        clock.tools_running = if started {
            clock.tools_running + 1
        } else {
            clock.tools_running.saturating_sub(1)
        };
    }

    /// How long since the last touch (or since the clock was made); zero while a tool runs.
    pub fn idle(&self) -> Duration {
        let clock = self.clock();
        if clock.tools_running > 0 {
            Duration::ZERO
        } else {
            clock.last.elapsed()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_tool_is_never_idle() {
        let activity = Activity::default();
        activity.tool(true);
        assert_eq!(activity.idle(), Duration::ZERO);
        activity.tool(false);
        activity.tool(false);
        assert_eq!(activity.clock().tools_running, 0, "never below zero");
    }
}
