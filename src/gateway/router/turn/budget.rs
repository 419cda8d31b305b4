//! The turn budget (`agent.gateway_timeout`, seconds, 0 = none): a turn idle that long — no
//! model call, token or tool event, and not waiting on the user for an approval or a clarify
//! answer — is cancelled through its cancellation token, as `/stop` does, and its event is
//! answered with [`TURN_TIMEOUT_NOTICE`]. Like Hermes, the budget counts inactivity, not
//! wall time: a long turn that keeps working runs on. The liveness probe reports only a turn
//! still idle [`CANCEL_GRACE`] past its budget, i.e. one whose cancellation is stuck.
//! `agent.gateway_timeout_warning` (below the budget, 0 = off) sends one warning first.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::gateway::router::responder::Responder;
use crate::gateway::router::slot::Slot;

/// How long a cancelled turn may take to wind down before the probe calls it stuck.
pub const CANCEL_GRACE: Duration = Duration::from_secs(60);

/// What the user reads when a turn ran out of its budget.
pub const TURN_TIMEOUT_NOTICE: &str = "⏱️ I stopped working on that: nothing happened for too long (agent.gateway_timeout). Please try again, or /reset to start over.";

/// Said once when a turn has idled `agent.gateway_timeout_warning` seconds (when that is
/// set and below the budget).
pub const TURN_IDLE_WARNING: &str = "⚠️ Nothing has happened on this for a while; if it stays quiet I'll stop it soon. You can keep waiting or /reset.";

/// Aborts the watchdog when the turn ends.
pub struct BudgetGuard(Option<JoinHandle<()>>);

impl Drop for BudgetGuard {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// Watches the running turn of `slot` against the configured budget.
pub(in crate::gateway::router) fn watch_turn_budget(
    settings: &crate::config::AgentConfig,
    responder: &Arc<Responder>,
    slot: &Arc<Slot>,
) -> BudgetGuard {
    let budget = settings.gateway_timeout_secs;
    if budget == 0 {
        return BudgetGuard(None);
    }
    let warning = match settings.gateway_timeout_warning_secs {
        0 => None,
        secs if secs >= budget => None,
        secs => Some(Duration::from_secs(secs)),
    };
    let budget = Duration::from_secs(budget);
    let check_every = (budget / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
    let slot = slot.clone();
    let responder = responder.clone();
    BudgetGuard(Some(tokio::spawn(async move {
        let mut warned = false;
        loop {
            tokio::time::sleep(check_every).await;
            let warn_to = {
                let state = slot.lock();
                let waiting = state.approval.is_some() || state.clarify.is_some();
                state.running.as_ref().and_then(|running| {
                    let due = !waiting
                        && !warned
                        && warning.is_some_and(|w| running.activity.idle() >= w);
                    due.then(|| running.source.clone())
                })
            };
            if let Some(source) = warn_to {
                // Once per turn, said outside the slot's lock.
                warned = true;
                responder.send_direct(&source, TURN_IDLE_WARNING).await;
            }
            let mut state = slot.lock();
            let waiting_on_user = state.approval.is_some() || state.clarify.is_some();
            let Some(running) = state.running.as_mut() else {
                return;
            };
            if waiting_on_user {
                // Waiting on a person is not idling (Hermes's approval and clarify
                // waits keep its activity clock going too).
                running.activity.touch();
                continue;
            }
            let idle = running.activity.idle();
            if idle >= budget {
                running.timed_out = true;
                running.cancel.cancel();
                tracing::error!(session_key = %slot.key, idle_s = idle.as_secs(), budget_s = budget.as_secs(), "turn idle past its budget (agent.gateway_timeout); cancelled");
                return;
            }
        }
    })))
}

/// Whether a turn idle for `idle` is stuck: past its budget and the cancellation's grace.
pub fn stuck(idle: Duration, budget: Duration) -> bool {
    idle > budget + CANCEL_GRACE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_turn_idle_past_budget_and_grace_is_stuck() {
        let budget = Duration::from_secs(1);
        assert!(
            !stuck(Duration::from_secs(2), budget),
            "cancelled, still winding down"
        );
        assert!(!stuck(budget + CANCEL_GRACE, budget));
        assert!(stuck(
            budget + CANCEL_GRACE + Duration::from_millis(1),
            budget
        ));
    }
}
