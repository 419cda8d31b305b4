//! Putting work into a slot: an idle session gets a worker; a busy one applies the
//! busy-input mode (interrupt / queue / steer) with Hermes's acknowledgement texts, at most
//! one ack per session per 30 s. Control commands and plain-word approval answers are
//! handled at once even while a turn runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_adapter::{MessageEvent, SessionSource};

use super::authority::{check_answer, log_refusal};
use super::commands::Command;
use super::commands::answers::{approval_word, decision_text};
use super::handles::{LiveCell, Paused};
use super::live::Live;
use super::slot::{Job, QUEUE_CAP, Slot, SlotState};
use super::{API_PLATFORM, steer};
use crate::config::BusyInputMode;
use crate::gateway::metrics::GatewayMetrics;
use crate::tools::context::Authority;

/// At most one busy acknowledgement per session in this window (`_BUSY_ACK_COOLDOWN`).
pub const BUSY_ACK_COOLDOWN: Duration = Duration::from_secs(30);

/// What happened to an event that arrived while its session was busy.
enum BusyAction {
    Queued,
    Interrupted,
    Steered,
}

/// The busy rules: where a journaled event (or an API request) goes in its session's
/// slot. They decide and update the slot; the router carries out the [`Placement`].
pub(super) struct BusyRules {
    pub live: Arc<LiveCell>,
    pub metrics: Arc<GatewayMetrics>,
    pub paused: Paused,
}

/// What the router does with a job the busy rules placed.
pub(super) enum Placement {
    /// In the queue of a slot whose worker is running: nothing more to do.
    Queued,
    /// In the queue of a slot no worker drains: the router starts one.
    StartWorker,
    /// Answered at once with the text (an approval's answer, a refusal, a full queue, a
    /// steer's acknowledgement).
    Answer(Job, String),
    /// Closed without a reply (a paused platform, a clarify answer).
    Ignore(Job),
    /// A command run at once, beside the running turn.
    CommandNow(Job, Command),
    /// Queued behind (or interrupting) the running turn; the sender is told so.
    Acknowledge(SessionSource, String),
}

impl BusyRules {
    /// Places `job` in `slot` (see the module docs).
    pub(super) fn place(&self, slot: &Slot, job: Job) -> Placement {
        let mut state = slot.lock();
        state.last_active = Some(Instant::now());
        let is_api = job.event.source.platform == API_PLATFORM;
        let command = if is_api {
            None
        } else {
            Command::parse(&job.event)
        };
        if command.is_none() && !is_api && self.paused.contains(&job.event.source.platform) {
            return Placement::Ignore(job);
        }
        // A pending approval or clarify question takes plain answers even mid-turn.
        if command.is_none() && !is_api {
            if let Some(pending) = &state.approval
                && let Some(decision) = approval_word(&job.event.text)
            {
                let allowed = check_answer(
                    pending.asker.as_deref(),
                    &job.event.source,
                    job.authority,
                    Some(decision),
                );
                if let Err(refusal) = allowed {
                    log_refusal(&job.event.source, "approval answer", "not the asker");
                    return Placement::Answer(job, refusal.text("approval"));
                }
                if let Some(pending) = state.approval.take() {
                    let _ = pending.answer.send(decision);
                }
                return Placement::Answer(job, decision_text(decision).to_owned());
            }
            if let Some(pending) = &state.clarify {
                let allowed = check_answer(
                    pending.asker.as_deref(),
                    &job.event.source,
                    job.authority,
                    None,
                );
                if let Err(refusal) = allowed {
                    log_refusal(&job.event.source, "clarify answer", "not the asker");
                    return Placement::Answer(job, refusal.text("question"));
                }
                if let Some(pending) = state.clarify.take() {
                    let _ = pending.answer.send(job.event.text.clone());
                }
                return Placement::Ignore(job);
            }
        }
        // While a turn runs every command is answered at once (control commands act on the
        // turn; the rest explain they must wait).
        if let Some(command) = &command
            && (state.running.is_some() || state.approval.is_some())
        {
            let command = command.clone();
            return Placement::CommandNow(job, command);
        }
        // An idle slot, or a command that waits for the turn boundary: into the queue.
        if (state.running.is_none() && state.queue.is_empty()) || command.is_some() {
            state.enqueue(job, &self.metrics.router_queue_depth);
            return match state.claim_worker() {
                true => Placement::StartWorker,
                false => Placement::Queued,
            };
        }
        if state.queue.len() >= QUEUE_CAP {
            return Placement::Answer(job, steer::full_text());
        }
        // A guest's message never steers or interrupts someone else's turn: steering would
        // hand the guest's words to a turn holding the other person's tools.
        let foreign_guest = job.authority == Authority::Guest
            && state.running.as_ref().is_some_and(|running| {
                job.event.source.user_id.is_none()
                    || running.source.user_id != job.event.source.user_id
            });
        let live = self.live.get();
        let mode = if is_api || foreign_guest {
            BusyInputMode::Queue
        } else {
            live.config.display.busy_input_mode
        };
        let action = match (mode, state.running.as_ref()) {
            // Steering passes text only: a message whose files are still to be fetched
            // waits for its own turn instead.
            (BusyInputMode::Steer, Some(running)) if job.event.pending_media.is_empty() => {
                if !steer::push_steer(running, &job.event.text) {
                    return Placement::Answer(job, steer::full_text());
                }
                BusyAction::Steered
            }
            (BusyInputMode::Interrupt, Some(running)) => {
                running.cancel.cancel();
                BusyAction::Interrupted
            }
            _ => BusyAction::Queued,
        };
        let detail = busy_detail(&live, &state, &job.event);
        let ack_due = !is_api
            && state
                .last_ack
                .is_none_or(|t| t.elapsed() >= BUSY_ACK_COOLDOWN);
        if ack_due {
            state.last_ack = Some(Instant::now());
        }
        let ack = ack_text(&action, &detail);
        match action {
            // The steered text joins the running turn; its reply is the ack.
            BusyAction::Steered => Placement::Answer(job, ack),
            BusyAction::Queued | BusyAction::Interrupted => {
                let source = job.event.source.clone();
                state.enqueue(job, &self.metrics.router_queue_depth);
                match ack_due {
                    true => Placement::Acknowledge(source, ack),
                    false => Placement::Queued,
                }
            }
        }
    }
}

/// ` (N min elapsed)` when `busy_ack_detail` is on for the platform.
fn busy_detail(live: &Live, state: &SlotState, event: &MessageEvent) -> String {
    let display = &live.config.display;
    let enabled = display
        .platforms
        .get(&event.source.platform)
        .and_then(|p| p.busy_ack_detail)
        .unwrap_or(display.busy_ack_detail);
    let Some(running) = state.running.as_ref().filter(|_| enabled) else {
        return String::new();
    };
    let minutes = running.started.elapsed().as_secs() / 60;
    if minutes > 0 {
        format!(" ({minutes} min elapsed)")
    } else {
        String::new()
    }
}

fn ack_text(action: &BusyAction, detail: &str) -> String {
    match action {
        BusyAction::Steered => format!(
            "⏩ Passed to the running task{detail}; it will see your message after its next tool call."
        ),
        BusyAction::Queued => {
            format!("⏳ Queued{detail}: I'll answer this when the current task is done.")
        }
        BusyAction::Interrupted => {
            format!("⚡ Stopping the current task{detail} to answer this message.")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_texts_name_the_action_and_carry_the_detail() {
        assert_eq!(
            ack_text(&BusyAction::Interrupted, ""),
            "⚡ Stopping the current task to answer this message."
        );
        assert_eq!(
            ack_text(&BusyAction::Queued, " (2 min elapsed)"),
            "⏳ Queued (2 min elapsed): I'll answer this when the current task is done."
        );
        assert!(ack_text(&BusyAction::Steered, " (1 min)").contains("task (1 min);"));
    }
}
