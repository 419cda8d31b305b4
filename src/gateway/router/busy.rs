//! Putting work into a slot: an idle session starts a worker; a busy one applies the
//! busy-input mode (interrupt / queue / steer) with Hermes's acknowledgement texts, at most
//! one ack per session per 30 s. Control commands and plain-word approval answers are
//! handled at once even while a turn runs.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use hermes_adapter::MessageEvent;

use super::authority::{check_answer, log_refusal};
use super::commands::Command;
use super::slot::{Job, QUEUE_CAP, Slot, SlotState};
use super::{API_PLATFORM, Router, steer};
use crate::config::BusyInputMode;
use crate::tools::approval::ApprovalDecision;
use crate::tools::context::Authority;

/// At most one busy acknowledgement per session in this window (`_BUSY_ACK_COOLDOWN`).
pub const BUSY_ACK_COOLDOWN: Duration = Duration::from_secs(30);

/// Plain words that answer a pending approval (Hermes's lists).
pub fn approval_word(text: &str) -> Option<ApprovalDecision> {
    let word = text.trim().to_lowercase();
    match word.as_str() {
        "approve" | "yes" | "ok" | "okay" | "confirm" | "y" | "👍" | "once" => {
            Some(ApprovalDecision::Once)
        }
        "always" | "approve always" => Some(ApprovalDecision::Always),
        "session" | "approve session" => Some(ApprovalDecision::Session),
        "deny" | "no" | "reject" | "cancel" | "n" | "👎" => Some(ApprovalDecision::Deny),
        _ => None,
    }
}

/// What happened to an event that arrived while its session was busy.
enum BusyAction {
    Queued,
    Interrupted,
    Steered,
}

/// Routes a journaled event (or an API request) into its session's slot.
pub(super) fn dispatch(router: &Router, key: String, job: Job) {
    let slot = router.slots.get_or_create(&key);
    let mut state = slot.lock();
    state.last_active = Some(Instant::now());
    let is_api = job.event.source.platform == API_PLATFORM;
    let command = if is_api {
        None
    } else {
        Command::parse(&job.event)
    };
    if command.is_none() && !is_api && router.is_paused(&job.event.source.platform) {
        drop(state);
        spawn_ignore(router, job);
        return;
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
                drop(state);
                log_refusal(&job.event.source, "approval answer", "not the asker");
                spawn_answer(router, job, refusal.text("approval"));
                return;
            }
            let answer = state.approval.take();
            drop(state);
            if let Some(pending) = answer {
                let _ = pending.answer.send(decision);
            }
            spawn_answer(router, job, decision_text(decision).to_owned());
            return;
        }
        if let Some(pending) = &state.clarify {
            let allowed = check_answer(
                pending.asker.as_deref(),
                &job.event.source,
                job.authority,
                None,
            );
            if let Err(refusal) = allowed {
                drop(state);
                log_refusal(&job.event.source, "clarify answer", "not the asker");
                spawn_answer(router, job, refusal.text("question"));
                return;
            }
            let answer = state.clarify.take();
            drop(state);
            if let Some(pending) = answer {
                let _ = pending.answer.send(job.event.text.clone());
            }
            spawn_ignore(router, job);
            return;
        }
    }
    // While a turn runs every command is answered at once (control commands act on the
    // turn; the rest explain they must wait).
    if let Some(command) = &command
        && (state.running.is_some() || state.approval.is_some())
    {
        drop(state);
        spawn_command_now(router, slot.clone(), job, command.clone());
        return;
    }
    if state.running.is_none() && state.queue.is_empty() {
        state.enqueue(job, &router.metrics.router_queue_depth);
        ensure_worker(router, &slot, &mut state);
        return;
    }
    if command.is_some() {
        // A command that waits for the turn boundary keeps its place in the queue.
        state.enqueue(job, &router.metrics.router_queue_depth);
        ensure_worker(router, &slot, &mut state);
        return;
    }
    if state.queue.len() >= QUEUE_CAP {
        drop(state);
        spawn_answer(router, job, steer::full_text());
        return;
    }
    // A guest's message never steers or interrupts someone else's turn: steering would
    // hand the guest's words to a turn holding the other person's tools.
    let foreign_guest = job.authority == Authority::Guest
        && state.running.as_ref().is_some_and(|running| {
            job.event.source.user_id.is_none() || running.source.user_id != job.event.source.user_id
        });
    let mode = if is_api || foreign_guest {
        BusyInputMode::Queue
    } else {
        router.live().config.display.busy_input_mode
    };
    let action = match (mode, state.running.as_ref()) {
        // Steering passes text only: a message whose files are still to be fetched
        // waits for its own turn instead.
        (BusyInputMode::Steer, Some(running)) if job.event.pending_media.is_empty() => {
            if !steer::push_steer(running, &job.event.text) {
                drop(state);
                spawn_answer(router, job, steer::full_text());
                return;
            }
            BusyAction::Steered
        }
        (BusyInputMode::Interrupt, Some(running)) => {
            running.cancel.cancel();
            BusyAction::Interrupted
        }
        _ => BusyAction::Queued,
    };
    let detail = busy_detail(router, &state, &job.event);
    let ack_due = !is_api
        && state
            .last_ack
            .is_none_or(|t| t.elapsed() >= BUSY_ACK_COOLDOWN);
    if ack_due {
        state.last_ack = Some(Instant::now());
    }
    let ack = ack_text(&action, &detail);
    match action {
        BusyAction::Steered => {
            drop(state);
            // The steered text joins the running turn; its reply is the ack.
            spawn_answer(router, job, ack);
        }
        BusyAction::Queued | BusyAction::Interrupted => {
            let source = job.event.source.clone();
            state.enqueue(job, &router.metrics.router_queue_depth);
            drop(state);
            if ack_due {
                let router = router.arc();
                tokio::spawn(async move { router.responder.send_direct(&source, &ack).await });
            }
        }
    }
}

/// ` (N min elapsed)` when `busy_ack_detail` is on for the platform.
pub(super) fn busy_detail(router: &Router, state: &SlotState, event: &MessageEvent) -> String {
    let live = router.live();
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

/// Starts the slot's worker unless one is draining it already.
pub(super) fn ensure_worker(router: &Router, slot: &Arc<Slot>, state: &mut SlotState) {
    if state.worker {
        return;
    }
    state.worker = true;
    let router = router.arc();
    let slot = slot.clone();
    tokio::spawn(async move { drain(router, slot).await });
}

/// The worker: runs the slot's jobs in order, one at a time, then exits.
pub(super) async fn drain(router: Arc<Router>, slot: Arc<Slot>) {
    if let Some(cluster) = router.cluster.clone() {
        return super::cluster::drain_clustered(router, cluster, slot).await;
    }
    loop {
        let job = {
            let mut state = slot.lock();
            match state.dequeue(&router.metrics.router_queue_depth) {
                Some(job) => job,
                None => {
                    state.worker = false;
                    state.last_active = Some(Instant::now());
                    return;
                }
            }
        };
        let job = super::turn::pending_media::with_media_fetched(&router, job).await;
        let permit = router.turn_limit.clone().acquire_owned().await;
        let Ok(_permit) = permit else { return };
        run_job(&router, &slot, job).await;
    }
}

/// Runs one job, isolated: a panic anywhere in it (outside tool dispatch, which wraps
/// its own) is caught here, so the event is still answered, the slot no longer says
/// "running" and the worker goes on with the next job instead of dying with the slot
/// wedged.
pub(super) async fn run_job(router: &Router, slot: &Arc<Slot>, job: Job) {
    let event = job.event.clone();
    let api = job.api.clone();
    let authority = job.authority;
    let outcome = AssertUnwindSafe(run_job_inner(router, slot, job))
        .catch_unwind()
        .await;
    if let Err(panic) = outcome {
        let job = Job {
            event,
            resumed: false,
            api,
            authority,
        };
        super::turn::failure::turn_panicked(router, slot, &job, panic).await;
    }
}

pub(super) async fn run_job_inner(router: &Router, slot: &Arc<Slot>, job: Job) {
    let command = if job.event.source.platform == API_PLATFORM {
        None
    } else {
        Command::parse(&job.event)
    };
    match command {
        Some(command) => super::commands::run_command(router, slot, job, command).await,
        None => super::turn::run_turn(router, slot, job).await,
    }
}

pub(super) fn spawn_answer(router: &Router, job: Job, text: String) {
    let router = router.arc();
    tokio::spawn(async move { router.responder.respond(&job, &text).await });
}

pub(super) fn spawn_ignore(router: &Router, job: Job) {
    let router = router.arc();
    tokio::spawn(async move { router.responder.answer_silently(&job).await });
}

pub(super) fn spawn_command_now(router: &Router, slot: Arc<Slot>, job: Job, command: Command) {
    let router = router.arc();
    tokio::spawn(async move { super::commands::run_command(&router, &slot, job, command).await });
}

fn decision_text(decision: ApprovalDecision) -> &'static str {
    match decision {
        ApprovalDecision::Once => "✅ Approved once.",
        ApprovalDecision::Session => "✅ Approved for this session.",
        ApprovalDecision::Always => "✅ Approved permanently.",
        ApprovalDecision::Deny => "❌ Denied.",
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

pub(super) fn approval_reply(decision: ApprovalDecision) -> &'static str {
    decision_text(decision)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_resolve_approvals() {
        assert_eq!(approval_word(" Yes "), Some(ApprovalDecision::Once));
        assert_eq!(approval_word("👎"), Some(ApprovalDecision::Deny));
        assert_eq!(
            approval_word("approve always"),
            Some(ApprovalDecision::Always)
        );
        assert_eq!(approval_word("yes please run it"), None);
    }

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
