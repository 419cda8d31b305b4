//! `/approve [session|always]` and `/deny`: the answer to the approval a running turn
//! waits on, from the person whose turn asked or an allowed user; only an allowed user may
//! approve a pattern for good.

use std::sync::Arc;

use super::answers::decision_text;
use super::{CommandCtx, Reply};
use crate::gateway::router::Router;
use crate::gateway::router::authority::{Gate, check_answer, log_refusal};
use crate::gateway::router::slot::{Job, Slot};
use crate::tools::approval::ApprovalDecision;

/// `/approve always` writes the command allowlist: allowed users only.
pub(super) fn gate(args: &str) -> Gate {
    let first = args.split_whitespace().next().unwrap_or("");
    if matches!(first, "always" | "all") {
        Gate::AllowedUsersOnly(
            "it approves the command's pattern permanently (written to command_allowlist)",
        )
    } else {
        Gate::Open
    }
}

pub(super) fn apply(ctx: &CommandCtx<'_>) -> Reply {
    Reply::Text(resolve_approval(
        ctx.router,
        ctx.slot,
        ctx.job,
        &ctx.command.name,
        &ctx.command.args,
    ))
}

pub(super) fn resolve_approval(
    _router: &Router,
    slot: &Arc<Slot>,
    job: &Job,
    name: &str,
    args: &str,
) -> String {
    let decision = if name == "deny" {
        ApprovalDecision::Deny
    } else {
        match args.trim().to_lowercase().as_str() {
            "session" => ApprovalDecision::Session,
            "always" | "all" => ApprovalDecision::Always,
            _ => ApprovalDecision::Once,
        }
    };
    let mut state = slot.lock();
    let Some(pending) = state.approval.as_ref() else {
        return if name == "deny" {
            "No pending command to deny.".to_owned()
        } else {
            "No pending command to approve.".to_owned()
        };
    };
    let allowed = check_answer(
        pending.asker.as_deref(),
        &job.event.source,
        job.authority,
        Some(decision),
    );
    if let Err(refusal) = allowed {
        drop(state);
        log_refusal(&job.event.source, name, "may not answer this approval");
        return refusal.text("approval");
    }
    let Some(pending) = state.approval.take() else {
        return "No pending command to approve.".to_owned();
    };
    drop(state);
    let _ = pending.answer.send(decision);
    match decision {
        ApprovalDecision::Once => "✅ Command approved. The agent is resuming...".to_owned(),
        ApprovalDecision::Session => {
            "✅ Command approved (pattern approved for this session). The agent is resuming..."
                .to_owned()
        }
        ApprovalDecision::Always => {
            "✅ Command approved (pattern approved permanently). The agent is resuming..."
                .to_owned()
        }
        ApprovalDecision::Deny => decision_text(decision).replace("Denied.", "Command denied."),
    }
}
