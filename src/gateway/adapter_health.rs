//! Which adapters are up: a small registry the adapters' supervisors update and the admin
//! endpoint reads (`/ready`, per-adapter gauges in `/metrics`).

use std::collections::BTreeMap;
use std::sync::RwLock;

use hermes_adapter::Liveness;
use serde::Serialize;

/// An adapter's state as the supervisor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AdapterState {
    Starting,
    Live,
    /// Connected but not making progress (e.g. a silent long-poll).
    Degraded,
    Failed,
}

impl AdapterState {
    pub const ALL: [Self; 4] = [Self::Starting, Self::Live, Self::Degraded, Self::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Live => "live",
            Self::Degraded => "degraded",
            Self::Failed => "failed",
        }
    }
}

/// One adapter's entry; `last_error` is a redacted, human-readable message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AdapterStatus {
    pub state: AdapterState,
    pub last_error: Option<String>,
    pub restarts: u64,
}

#[derive(Debug)]
pub struct AdapterHealth {
    adapters: RwLock<BTreeMap<String, AdapterStatus>>,
    /// Bumped on every change, so watchers wait for events instead of polling.
    changes: tokio::sync::watch::Sender<u64>,
}

impl Default for AdapterHealth {
    fn default() -> Self {
        Self {
            adapters: RwLock::new(BTreeMap::new()),
            changes: tokio::sync::watch::channel(0).0,
        }
    }
}

impl AdapterHealth {
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits until `done` holds for the registry or `timeout` passes; returns whether it held.
    pub async fn wait_until(
        &self,
        timeout: std::time::Duration,
        done: impl Fn(&BTreeMap<String, AdapterStatus>) -> bool,
    ) -> bool {
        let mut changes = self.changes.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if done(&self.snapshot()) {
                return true;
            }
            if tokio::time::timeout_at(deadline, changes.changed())
                .await
                .is_err()
            {
                return done(&self.snapshot());
            }
        }
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Adds an enabled adapter in `Starting`; readiness waits for every registered adapter.
    pub fn register(&self, name: &str) {
        self.write()
            .entry(name.to_owned())
            .or_insert(AdapterStatus {
                state: AdapterState::Starting,
                last_error: None,
                restarts: 0,
            });
        self.changed();
    }

    /// Sets the state; an error replaces the last one, going `Live` keeps it for diagnosis.
    pub fn set(&self, name: &str, state: AdapterState, error: Option<&str>) {
        let mut adapters = self.write();
        let entry = adapters.entry(name.to_owned()).or_insert(AdapterStatus {
            state,
            last_error: None,
            restarts: 0,
        });
        entry.state = state;
        if let Some(error) = error {
            entry.last_error = Some(error.to_owned());
        }
        drop(adapters);
        self.changed();
    }

    /// A (re)start: `Starting`, except that an adapter restarted after a failure stays
    /// `Degraded` (with its error) until it is live again, so `/ready` never hides a failure
    /// behind "starting" while the restarted adapter is still failing.
    pub fn starting(&self, name: &str) {
        if self.state(name) != Some(AdapterState::Degraded) {
            self.set(name, AdapterState::Starting, None);
        }
    }

    pub fn state(&self, name: &str) -> Option<AdapterState> {
        self.adapters
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(name)
            .map(|s| s.state)
    }

    /// Maps the contract's progress reading onto `Live`/`Degraded`.
    pub fn observe(&self, name: &str, liveness: Liveness) {
        match liveness {
            Liveness::Live => self.set(name, AdapterState::Live, None),
            Liveness::Silent { for_ } => {
                let message = format!("no progress for {}s", for_.as_secs());
                self.set(name, AdapterState::Degraded, Some(&message));
            }
        }
    }

    pub fn record_restart(&self, name: &str) {
        if let Some(entry) = self.write().get_mut(name) {
            entry.restarts += 1;
        }
        self.changed();
    }

    pub fn snapshot(&self) -> BTreeMap<String, AdapterStatus> {
        self.adapters
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Ready means every registered adapter is live (and vacuously so with none).
    pub fn all_live(&self) -> bool {
        self.snapshot()
            .values()
            .all(|status| status.state == AdapterState::Live)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, AdapterStatus>> {
        self.adapters
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ready_only_when_every_adapter_is_live() {
        let health = AdapterHealth::new();
        health.register("telegram");
        health.register("discord");
        assert!(!health.all_live());
        health.observe("telegram", Liveness::Live);
        health.set("discord", AdapterState::Failed, Some("401 Unauthorized"));
        assert!(!health.all_live());
        health.record_restart("discord");
        health.set("discord", AdapterState::Live, None);
        assert!(health.all_live());
        let discord = &health.snapshot()["discord"];
        assert_eq!(discord.restarts, 1);
        assert_eq!(discord.last_error.as_deref(), Some("401 Unauthorized"));
        health.observe(
            "telegram",
            Liveness::Silent {
                for_: Duration::from_secs(90),
            },
        );
        assert_eq!(health.snapshot()["telegram"].state, AdapterState::Degraded);
        assert!(!health.all_live());
    }

    #[test]
    fn a_restart_after_a_failure_stays_degraded_until_live() {
        let health = AdapterHealth::new();
        health.register("slack");
        health.starting("slack");
        assert_eq!(health.state("slack"), Some(AdapterState::Starting));
        health.set("slack", AdapterState::Degraded, Some("no progress for 5s"));
        health.starting("slack");
        assert_eq!(health.state("slack"), Some(AdapterState::Degraded));
        assert_eq!(
            health.snapshot()["slack"].last_error.as_deref(),
            Some("no progress for 5s")
        );
        health.set("slack", AdapterState::Live, None);
        health.starting("slack");
        assert_eq!(health.state("slack"), Some(AdapterState::Starting));
    }
}
