//! Where the operator's shell hooks (`crate::hooks::ShellHooks`) meet an agent turn, at the
//! points Hermes fires them:
//!
//! - `on_session_start` before the first turn of a new session, `pre_llm_call` before each
//!   turn's model loop (its context is added to the turn's user message in the requests
//!   only: the stored history and the system prompt stay as they were, so the prompt cache
//!   holds), `post_llm_call` after a turn that produced an answer and `on_session_end` after
//!   every turn (Hermes fires it at the end of each conversation run);
//! - `pre_tool_call` before a tool call — before any approval prompt, so a blocked call
//!   never asks the owner — and `post_tool_call` after it with its result, status and time.
//!
//! Sub-agents (delegate_task) fire the tool hooks too: their calls act like any other.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{Agent, AgentError, TurnOutcome};
use crate::agent::message::{ChatMessage, Role, ToolCall};
use crate::hooks::Payload;

/// What a blocked call's result says; the model reads it.
pub const BLOCKED_PREFIX: &str = "blocked by the operator's hook";
/// The most of a tool result handed to `post_tool_call`.
const RESULT_CHARS: usize = 16_000;

fn extra(fields: Value) -> Map<String, Value> {
    match fields {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

// Free functions, not `impl Agent`: the agent's methods stay in few files.

fn hook_payload(agent: &Agent, fields: Value) -> Payload {
    Payload {
        session_id: agent.session_id.clone(),
        cwd: agent.deps.settings.cwd.display().to_string(),
        extra: extra(fields),
        ..Payload::default()
    }
}

fn last_user_text(agent: &Agent) -> String {
    agent
        .history
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .and_then(|m| m.content.clone())
        .unwrap_or_default()
}

/// `on_session_start` (first turn) and `pre_llm_call`; keeps the hooks' context for this
/// turn's requests.
pub(super) async fn before_turn(agent: &mut Agent) {
    agent.turn_context = None;
    let hooks = std::sync::Arc::clone(&agent.deps.hooks);
    if hooks.is_empty() {
        return;
    }
    let first_turn = agent
        .history
        .iter()
        .filter(|m| m.role != Role::System)
        .count()
        == 1;
    let model = agent.model_name();
    if first_turn {
        let payload = hook_payload(agent, json!({"model": model, "platform": agent.platform}));
        hooks.notify("on_session_start", &payload).await;
    }
    let payload = hook_payload(
        agent,
        json!({
            "user_message": last_user_text(agent),
            "is_first_turn": first_turn,
            "model": model,
            "platform": agent.platform,
            "sender_id": agent.caller.user_id.clone().unwrap_or_default(),
        }),
    );
    agent.turn_context = hooks.context(&payload).await;
}

/// `post_llm_call` (when the turn answered) and `on_session_end`.
pub(super) async fn after_turn(agent: &mut Agent, outcome: &Result<TurnOutcome, AgentError>) {
    agent.turn_context = None;
    let hooks = std::sync::Arc::clone(&agent.deps.hooks);
    if hooks.is_empty() {
        return;
    }
    let model = agent.model_name();
    let completed = matches!(outcome, Ok(o) if !o.interrupted);
    if let Ok(done) = outcome
        && completed
    {
        let payload = hook_payload(
            agent,
            json!({
                "user_message": last_user_text(agent),
                "assistant_response": done.reply,
                "model": model,
                "platform": agent.platform,
            }),
        );
        hooks.notify("post_llm_call", &payload).await;
    }
    let interrupted = matches!(outcome, Ok(o) if o.interrupted);
    let payload = hook_payload(
        agent,
        json!({
            "completed": completed,
            "interrupted": interrupted,
            "model": model,
            "platform": agent.platform,
        }),
    );
    hooks.notify("on_session_end", &payload).await;
}

fn tool_payload(agent: &Agent, call: &ToolCall, fields: Value) -> Payload {
    let mut payload = hook_payload(agent, fields);
    payload.tool_name = Some(call.name.clone());
    payload.tool_input = serde_json::from_str(&call.arguments).ok();
    payload
        .extra
        .insert("tool_call_id".to_owned(), Value::String(call.id.clone()));
    payload
}

/// `pre_tool_call`: the tool result the model gets instead of running `call`, when a
/// hook blocks it.
pub(super) async fn blocked(agent: &Agent, call: &ToolCall) -> Option<String> {
    let reason = agent
        .deps
        .hooks
        .block_reason(&tool_payload(agent, call, json!({})))
        .await?;
    tracing::info!(session_id = %agent.session_id, tool = %call.name, %reason,
        "tool call blocked by a pre_tool_call hook");
    Some(crate::tools::tool_error(format!(
        "{BLOCKED_PREFIX}: {reason}"
    )))
}

/// `post_tool_call` with the call's result (`status`: ok, error or blocked).
pub(super) async fn after_tool(
    agent: &Agent,
    call: &ToolCall,
    result: &str,
    status: &str,
    took: Duration,
) {
    if !agent.deps.hooks.listens("post_tool_call") {
        return;
    }
    let result: String = result.chars().take(RESULT_CHARS).collect();
    let payload = tool_payload(
        agent,
        call,
        json!({
            "result": result,
            "status": status,
            "duration_ms": u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        }),
    );
    agent.deps.hooks.notify("post_tool_call", &payload).await;
}

/// The request's copy of the turn's user message with the hooks' context added.
pub(super) fn add_turn_context(messages: &mut [ChatMessage], context: Option<&str>) {
    let Some(context) = context else { return };
    if let Some(user) = messages.iter_mut().rev().find(|m| m.role == Role::User) {
        let text = user.content.take().unwrap_or_default();
        user.content = Some(format!("{text}\n\n{context}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_goes_to_the_last_user_message_only() {
        let mut messages = vec![
            ChatMessage::user("first"),
            ChatMessage::assistant("ok"),
            ChatMessage::user("second"),
            ChatMessage::assistant("calling"),
        ];
        add_turn_context(&mut messages, Some("Today is Friday"));
        assert_eq!(messages[0].content.as_deref(), Some("first"));
        assert_eq!(
            messages[2].content.as_deref(),
            Some("second\n\nToday is Friday")
        );
        add_turn_context(&mut messages, None);
        assert_eq!(
            messages[2].content.as_deref(),
            Some("second\n\nToday is Friday")
        );
    }
}
