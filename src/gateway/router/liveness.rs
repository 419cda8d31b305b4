//! What the liveness probe (the systemd watchdog and `/health`) asks the router: the
//! problems that mean the daemon can no longer answer and should be restarted — the state.db
//! writer thread is gone, or a turn has been running past its budget
//! (`agent.gateway_timeout`) without waiting on the user.

use std::time::Duration;

use super::Router;

impl Router {
    /// Every reason the daemon cannot answer right now; empty when it can.
    pub fn liveness_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !self.store.writer_alive() {
            problems.push("the state.db writer thread is not running".to_owned());
        }
        let budget = self.live().config.agent.gateway_timeout_secs;
        if budget > 0 {
            let stuck = self.turns_running_longer_than(Duration::from_secs(budget));
            if !stuck.is_empty() {
                problems.push(format!(
                    "{} session(s) running past the {budget} s turn budget (agent.gateway_timeout): {}",
                    stuck.len(),
                    stuck.join(", ")
                ));
            }
        }
        problems
    }

    /// Session keys whose turn has run longer than `budget` while not waiting for an
    /// approval or a clarify answer (waiting on a person is not being stuck).
    fn turns_running_longer_than(&self, budget: Duration) -> Vec<String> {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let mut stuck: Vec<String> = slots
            .iter()
            .filter(|(_, slot)| {
                let state = slot.lock();
                state.approval.is_none()
                    && state.clarify.is_none()
                    && state
                        .running
                        .as_ref()
                        .is_some_and(|running| running.started.elapsed() > budget)
            })
            .map(|(key, _)| key.clone())
            .collect();
        stuck.sort();
        stuck
    }
}
