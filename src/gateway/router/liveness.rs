//! What the liveness probe (the systemd watchdog and `/health`) asks the router: the
//! problems that mean the daemon can no longer answer and should be restarted — the state.db
//! writer thread is gone, or a turn is still idle past its budget (`agent.gateway_timeout`)
//! plus the grace its cancellation gets ([`crate::gateway::router::turn::budget`] cancels it at the budget),
//! without waiting on the user: its cancellation is stuck.

use std::time::Duration;

use super::slot_table::SlotTable;
use super::turn::budget::stuck;
use crate::config::AgentConfig;
use crate::state::Store;

/// Every reason the daemon cannot answer right now; empty when it can.
pub(super) fn liveness_problems(
    store: &Store,
    settings: &AgentConfig,
    slots: &SlotTable,
) -> Vec<String> {
    let mut problems = Vec::new();
    if !store.writer_alive() {
        problems.push("the state.db writer thread is not running".to_owned());
    }
    let budget = settings.gateway_timeout_secs;
    if budget > 0 {
        let stuck = turns_running_longer_than(slots, Duration::from_secs(budget));
        if !stuck.is_empty() {
            problems.push(format!(
                "{} session(s) idle past the {budget} s turn budget (agent.gateway_timeout) and not winding down: {}",
                stuck.len(),
                stuck.join(", ")
            ));
        }
    }
    problems
}

/// Session keys whose turn has been idle longer than `budget` plus the cancellation's
/// grace while not waiting for an approval or a clarify answer (waiting on a person is
/// not being stuck).
fn turns_running_longer_than(slots: &SlotTable, budget: Duration) -> Vec<String> {
    slots.keys_where(|slot| {
        let state = slot.lock();
        state.approval.is_none()
            && state.clarify.is_none()
            && state
                .running
                .as_ref()
                .is_some_and(|running| stuck(running.activity.idle(), budget))
    })
}
