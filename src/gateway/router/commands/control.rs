//! The commands that steer the running turn: `/stop` interrupts it and drops the queue,
//! `/queue` adds a turn after it, `/steer` hands it text after its next tool call. A guest
//! may stop or steer only a turn they started.

use std::sync::Arc;

use super::{CommandCtx, Reply};
use crate::gateway::router::Router;
use crate::gateway::router::authority::Gate;
use crate::gateway::router::slot::{Job, Slot};

/// Who may run `/stop` or `/steer`: on a guest's own turn only (`/new` shares the rule).
pub(super) fn gate() -> Gate {
    Gate::OwnTurn
}

pub(super) fn apply(ctx: &CommandCtx<'_>) -> Reply {
    let (router, slot, job, args) = (ctx.router, ctx.slot, ctx.job, ctx.command.args.as_str());
    let reply = match ctx.command.name.as_str() {
        "stop" => Some(stop(router, slot)),
        "queue" => queue_command(router, slot, job, args),
        _ => steer_command(router, slot, job, args),
    };
    // `None`: the text became a queued turn that will answer the event.
    reply.map_or(Reply::Later, Reply::Text)
}

/// `/stop`: interrupts the running turn and discards what was queued behind it.
pub(super) fn stop(router: &Router, slot: &Arc<Slot>) -> String {
    let discarded: Vec<Job> = {
        let mut state = slot.lock();
        let Some(running) = state.running.as_mut() else {
            return "No active task to stop.".to_owned();
        };
        running.stopped = true;
        running.cancel.cancel();
        state.approval.take();
        state.clarify.take();
        state.discard_queue(&router.metrics.router_queue_depth)
    };
    if !discarded.is_empty() {
        let router = router.arc();
        tokio::spawn(async move {
            for job in &discarded {
                router.responder.answer_silently(job).await;
            }
        });
    }
    "⚡ Stopped. You can continue this session.".to_owned()
}

/// `/queue <prompt>`: a turn of its own after the current one.
pub(super) fn queue_command(
    router: &Router,
    slot: &Arc<Slot>,
    job: &Job,
    args: &str,
) -> Option<String> {
    let text = args.trim();
    if text.is_empty() {
        return Some("Usage: /queue <prompt>".to_owned());
    }
    let mut event = job.event.clone();
    event.text = text.to_owned();
    let mut state = slot.lock();
    let busy = state.running.is_some();
    state.enqueue(
        Job {
            event,
            resumed: false,
            api: None,
            authority: job.authority,
        },
        &router.metrics.router_queue_depth,
    );
    let depth = state.queue.len();
    let start = state.claim_worker();
    drop(state);
    if start {
        router.start_worker(slot);
    }
    if busy {
        let ack = if depth <= 1 {
            "Queued for the next turn.".to_owned()
        } else {
            format!("Queued for the next turn. ({depth} queued)")
        };
        let router = router.arc();
        let source = job.event.source.clone();
        tokio::spawn(async move { router.responder.send_direct(&source, &ack).await });
    }
    None
}

/// `/steer <prompt>`: delivered after the running turn's next tool call.
pub(super) fn steer_command(
    router: &Router,
    slot: &Arc<Slot>,
    job: &Job,
    args: &str,
) -> Option<String> {
    let text = args.trim();
    if text.is_empty() {
        return Some("Usage: /steer <prompt>".to_owned());
    }
    let state = slot.lock();
    match state.running.as_ref() {
        Some(running) => {
            if !crate::gateway::router::steer::push_steer(running, text) {
                return Some(crate::gateway::router::steer::full_text());
            }
            let preview: String = text.chars().take(60).collect();
            let more = if text.chars().count() > 60 { "..." } else { "" };
            Some(format!(
                "⏩ Passed to the running task, after its next tool call: '{preview}{more}'"
            ))
        }
        None => {
            drop(state);
            // Nothing runs: the text becomes an ordinary turn.
            queue_command(router, slot, job, text)
        }
    }
}

/// Cancels the running turn and drops the queue without a reply of its own.
pub(super) fn stop_quietly(router: &Router, slot: &Arc<Slot>) -> usize {
    let mut state = slot.lock();
    if let Some(running) = state.running.as_mut() {
        running.stopped = true;
        running.cancel.cancel();
    }
    let discarded = state.discard_queue(&router.metrics.router_queue_depth);
    drop(state);
    let count = discarded.len();
    let router = router.arc();
    tokio::spawn(async move {
        for job in &discarded {
            router.responder.answer_silently(job).await;
        }
    });
    count
}
