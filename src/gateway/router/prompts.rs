//! Approval and clarify prompts from a running turn to the chat it serves. The agent's
//! tools ask through process-wide callbacks carrying the session id; the router finds the
//! slot running that session, sends the prompt (buttons where the platform has them) and
//! waits for `/approve`, `/deny`, a button, a plain word, or the clarify answer — from the
//! person whose turn asked, or an allowed user (`authority.rs`).

use std::sync::{Arc, Weak};

use futures_util::FutureExt;
use hermes_adapter::{Button, SessionSource};
use tokio::sync::oneshot;

use crate::agent::UserPrompts;
use crate::gateway::router::authority::Pending;
use crate::gateway::router::responder::Responder;
use crate::gateway::router::slot::Slot;
use crate::gateway::router::slot_table::SlotTable;
use crate::gateway::routing::RoutingIndex;
use crate::tools::approval::{ApprovalDecision, ApprovalRequest};
use crate::tools::clarify::{ClarifyError, ClarifyRequest};

/// Longest command shown in an approval prompt (Hermes caps the preview at 3800).
const COMMAND_PREVIEW_CHARS: usize = 3800;

/// Where a turn's questions go: the slot running the asking session, and its chat.
pub(super) struct PromptDesk {
    pub slots: Arc<SlotTable>,
    pub routing: Arc<RoutingIndex>,
    pub responder: Arc<Responder>,
}

/// The agent's prompt callbacks, asking through `desk` while it lives (the router holds
/// it; the agent holds only these callbacks).
pub(super) fn user_prompts(desk: Weak<PromptDesk>) -> UserPrompts {
    let for_approval = desk.clone();
    let approval: crate::tools::approval::ApprovalPrompt = Arc::new(move |request| {
        let desk = for_approval.clone();
        async move {
            match desk.upgrade() {
                Some(desk) => desk.ask_approval(request).await,
                None => ApprovalDecision::Deny,
            }
        }
        .boxed()
    });
    let clarify: crate::tools::clarify::ClarifyCallback = Arc::new(move |request| {
        let desk = desk.clone();
        async move {
            match desk.upgrade() {
                Some(desk) => desk.ask_clarify(request).await,
                None => Err(ClarifyError::ShuttingDown),
            }
        }
        .boxed()
    });
    UserPrompts {
        approval: Some(approval),
        clarify: Some(clarify),
    }
}

pub fn approval_text(request: &ApprovalRequest) -> String {
    let command: String = request
        .command
        .chars()
        .take(COMMAND_PREVIEW_CHARS)
        .collect();
    format!(
        "⚠️ Command Approval Required\n\n```\n{command}\n```\nReason: {}\n\n\
         Reply /approve (once), /approve session, /approve always, or /deny.",
        request.description
    )
}

fn approval_buttons(allow_permanent: bool) -> Vec<Button> {
    let mut buttons = vec![
        Button {
            label: "✅ Allow Once".into(),
            data: "/approve".into(),
        },
        Button {
            label: "✅ Session".into(),
            data: "/approve session".into(),
        },
    ];
    if allow_permanent {
        buttons.push(Button {
            label: "✅ Always".into(),
            data: "/approve always".into(),
        });
    }
    buttons.push(Button {
        label: "❌ Deny".into(),
        data: "/deny".into(),
    });
    buttons
}

impl PromptDesk {
    /// The slot running `session_id` and where its prompts go.
    fn slot_running(&self, session_id: &str) -> Option<(Arc<Slot>, SessionSource)> {
        self.slots.find_map(|slot| {
            let state = slot.lock();
            let running = state.running.as_ref()?;
            let agent_session = self.routing.get(&slot.key).map(|e| e.session_id);
            let matches = agent_session.as_deref() == Some(session_id)
                || running.source.chat_id == session_id;
            matches.then(|| (slot.clone(), running.source.clone()))
        })
    }

    async fn ask_approval(&self, request: ApprovalRequest) -> ApprovalDecision {
        let Some((slot, source)) = self.slot_running(&request.session_id) else {
            tracing::warn!(session_id = %request.session_id, "approval requested outside a chat turn; denied");
            return ApprovalDecision::Deny;
        };
        let (tx, rx) = oneshot::channel();
        slot.lock().approval = Some(Pending::new(tx, source.user_id.clone()));
        let text = approval_text(&request);
        self.responder
            .send_prompt(&source, &text, approval_buttons(request.allow_permanent))
            .await;
        rx.await.unwrap_or(ApprovalDecision::Deny)
    }

    async fn ask_clarify(&self, request: ClarifyRequest) -> Result<String, ClarifyError> {
        let Some((slot, source)) = self.slot_running(&request.session_id) else {
            return Err(ClarifyError::NoChat);
        };
        let (tx, rx) = oneshot::channel();
        slot.lock().clarify = Some(Pending::new(tx, source.user_id.clone()));
        let choices = request.choices.clone().unwrap_or_default();
        let mut text = format!("❓ {}", request.question);
        for (i, choice) in choices.iter().enumerate() {
            text.push_str(&format!("\n{}. {choice}", i + 1));
        }
        let buttons = choices
            .iter()
            .filter(|c| c.len() <= 64 && !c.starts_with('/'))
            .map(|c| Button {
                label: c.clone(),
                data: c.clone(),
            })
            .collect();
        self.responder.send_prompt(&source, &text, buttons).await;
        rx.await
            .map_err(|_| ClarifyError::Cancelled)
            .map(|answer| resolve_choice(&answer, &choices))
    }
}

/// A reply of `2` picks the second choice; anything else is the answer as typed.
fn resolve_choice(answer: &str, choices: &[String]) -> String {
    answer
        .trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| choices.get(i).cloned())
        .unwrap_or_else(|| answer.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_answers_pick_choices() {
        let choices = vec!["red".to_owned(), "blue".to_owned()];
        assert_eq!(resolve_choice(" 2 ", &choices), "blue");
        assert_eq!(resolve_choice("green", &choices), "green");
        assert_eq!(resolve_choice("3", &choices), "3");
    }
}
