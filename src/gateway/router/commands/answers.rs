//! Answers to a question a running turn waits on: the plain words that answer an approval,
//! the replies that confirm an answer, and the refusal of an answer its sender may not
//! give, decided before the event is recorded.

use hermes_adapter::MessageEvent;

use super::Command;
use crate::gateway::router::Router;
use crate::gateway::router::authority::{check_answer, log_refusal};
use crate::tools::approval::ApprovalDecision;
use crate::tools::context::Authority;

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

pub(in crate::gateway::router) fn decision_text(decision: ApprovalDecision) -> &'static str {
    match decision {
        ApprovalDecision::Once => "✅ Approved once.",
        ApprovalDecision::Session => "✅ Approved for this session.",
        ApprovalDecision::Always => "✅ Approved permanently.",
        ApprovalDecision::Deny => "❌ Denied.",
    }
}

/// The refusal for a guest's answer to a question pending in its session that they may
/// not answer — `/approve` or `/deny` (typed, or a button's data), a plain approval
/// word, or a clarify answer (typed or a choice button) — decided before the event is
/// recorded: the adapter then treats a click as refused, so the prompt keeps its buttons
/// for the person who may answer it. The slot's own checks (`busy.rs`, `commands/`)
/// cover events taken up from another instance's journal.
pub(in crate::gateway::router) fn refused_answer(
    router: &Router,
    event: &MessageEvent,
    authority: Authority,
) -> Option<String> {
    if authority.is_trusted() {
        return None;
    }
    let command = Command::parse(event);
    let approval_answer = match &command {
        Some(command) => match (command.name.as_str(), command.args.trim()) {
            ("deny", _) => Some(ApprovalDecision::Deny),
            ("approve", "always" | "all") => Some(ApprovalDecision::Always),
            ("approve", "session") => Some(ApprovalDecision::Session),
            ("approve", _) => Some(ApprovalDecision::Once),
            _ => return None,
        },
        None => approval_word(&event.text),
    };
    let slot = router.slots.get(&router.session_key(event))?;
    let state = slot.lock();
    let (asker, decision, what) = match (&state.approval, &state.clarify, approval_answer) {
        (Some(pending), _, Some(decision)) => (pending.asker.clone(), Some(decision), "approval"),
        (_, Some(pending), _) if command.is_none() => (pending.asker.clone(), None, "question"),
        _ => return None,
    };
    drop(state);
    let refusal = check_answer(asker.as_deref(), &event.source, authority, decision).err()?;
    log_refusal(&event.source, what, "may not answer this question");
    Some(refusal.text(what))
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
}
