//! One round of tool calls: a single call runs directly; several run concurrently with their
//! results returned in the original order; interactive tools (clarify) force the round to
//! run sequentially. The agent-level tools (todo, memory, session_search, delegate_task) are
//! handled here, with the agent's state, instead of through the registry.
//!
//! In a cluster, each call runs only while the turn's session hold can still be trusted
//! (`coord/trust.rs`); a hold whose trust ran short is waited for up to one lease time, and a
//! call still refused is not run and the turn stops as it does when its lease is lost. In a
//! journaled turn each call is marked as started just before it runs, so the hold's next
//! owner, resuming from the stored history, runs the stored calls that never started.

use std::time::{Duration, Instant};

use futures_util::future::{BoxFuture, join_all};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Agent;
use crate::agent::event_channel::{EventSink, emit};
use crate::agent::events::AgentEvent;
use crate::agent::message::ToolCall;
use crate::coord::{current_fence, current_trust};
use crate::state::{NewSession, StoreError};
use crate::tools::delegate::DelegateArgs;
use crate::tools::session_search::{SessionSearchArgs, session_search};
use crate::tools::{memory, todo, tool_error};

const PREVIEW_CHARS: usize = 80;
pub const INTERRUPTED_RESULT: &str = "interrupted by the user before the tool finished";

/// A tool call may start while more than this (beyond the trust margin) is left of its
/// session hold. A tool may run for minutes, longer than a lease, so a call cannot be
/// required to fit: a call that started in time may outlive the hold (docs/cluster.md).
const TOOL_CALL_NEEDS: Duration = Duration::ZERO;

/// Runs `calls` and returns one result string per call, in call order; a lease-lost error
/// when the turn's session hold could end before a call starts (that call is not run).
pub async fn run(
    agent: &Agent,
    calls: &[ToolCall],
    events: &EventSink,
    cancel: &CancellationToken,
) -> Result<Vec<String>, StoreError> {
    let registry = &agent.deps().registry;
    let sequential = calls.len() == 1 || calls.iter().any(|c| registry.is_interactive(&c.name));
    if sequential {
        let mut results = Vec::with_capacity(calls.len());
        for call in calls {
            hold_still_trusted(call).await?;
            mark_started(agent, call).await?;
            results.push(run_one(agent, call, events, cancel).await);
        }
        Ok(results)
    } else {
        join_all(calls.iter().map(|call| async move {
            hold_still_trusted(call).await?;
            mark_started(agent, call).await?;
            Ok(run_one(agent, call, events, cancel).await)
        }))
        .await
        .into_iter()
        .collect()
    }
}

/// In a journaled turn, records that `call` starts now (a failed write keeps it from
/// running: a resume would not know it ran).
async fn mark_started(agent: &Agent, call: &ToolCall) -> Result<(), StoreError> {
    if agent.marks_tool_starts {
        agent
            .deps()
            .store
            .mark_tool_started(agent.session_id(), &call.id)
            .await?;
    }
    Ok(())
}

/// Lets a tool call run only while the turn's session hold can be trusted to cover its start
/// (no hold: one instance owns the state, every call passes). A hold whose trust ran short
/// (this process was paused while a renewal was on its way) is waited for, up to one lease
/// time: a renewal the database confirms under the same token proves nobody else held the
/// session meanwhile, so the call runs here. Refusing at once instead would leave the
/// stored call without a result, and the next holder never runs such a call (it may have
/// run): the user's tool would not run at all. Refused when the hold is lost or no renewal
/// lands in time.
async fn hold_still_trusted(call: &ToolCall) -> Result<(), StoreError> {
    let Some(lease) = current_fence() else {
        return Ok(());
    };
    let trust = current_trust();
    let Err(fenced) = trust.may_act(TOOL_CALL_NEEDS) else {
        return Ok(());
    };
    tracing::info!(session_key = %lease.key, token = lease.token, tool = %call.name, %fenced,
        "tool call waits for the session lease's next renewal");
    if trust.wait_until_trusted(TOOL_CALL_NEEDS, lease.ttl).await {
        return Ok(());
    }
    tracing::warn!(session_key = %lease.key, token = lease.token, tool = %call.name,
        "tool call not run: the session lease could not be trusted again; the turn stops and the lease's next holder resumes it");
    Err(StoreError::LeaseLost {
        scope: lease.scope.as_str(),
        key: lease.key.clone(),
        token: lease.token,
    })
}

fn preview(arguments: &str) -> String {
    let value: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let text = ["command", "path", "query", "goal", "question", "pattern"]
        .iter()
        .find_map(|k| value.get(*k).and_then(Value::as_str))
        .map(str::to_owned)
        .unwrap_or_else(|| arguments.to_owned());
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    flat.chars().take(PREVIEW_CHARS).collect()
}

async fn run_one(
    agent: &Agent,
    call: &ToolCall,
    events: &EventSink,
    cancel: &CancellationToken,
) -> String {
    let deps = agent.deps();
    emit(
        events,
        AgentEvent::ToolStarted {
            call_id: call.id.clone(),
            name: call.name.clone(),
            emoji: deps.registry.emoji(&call.name).to_owned(),
            preview: preview(&call.arguments),
        },
    );
    let started = Instant::now();
    // The operator's pre_tool_call hooks decide before the tool (and its approval) runs.
    let blocked = super::hook_points::blocked(agent, call).await;
    let result = match &blocked {
        Some(refusal) => refusal.clone(),
        None => tokio::select! {
            biased;
            _ = cancel.cancelled() => tool_error(INTERRUPTED_RESULT),
            result = execute(agent, call, events, cancel) => result,
        },
    };
    // The agent-level tools do not pass the registry's masking; mask them here too.
    let result = crate::logging::mask_secrets(&result);
    let ok = !result.trim_start().starts_with("{\"error\"");
    let status = match (&blocked, ok) {
        (Some(_), _) => "blocked",
        (None, true) => "ok",
        (None, false) => "error",
    };
    super::hook_points::after_tool(agent, call, &result, status, started.elapsed()).await;
    emit(
        events,
        AgentEvent::ToolFinished {
            call_id: call.id.clone(),
            name: call.name.clone(),
            ok,
            elapsed: started.elapsed(),
        },
    );
    result
}

async fn execute(
    agent: &Agent,
    call: &ToolCall,
    events: &EventSink,
    cancel: &CancellationToken,
) -> String {
    let deps = agent.deps();
    let session_id = agent.session_id();
    // A tool withheld from this turn's requester is refused even when the model names it
    // without having been offered it.
    if let Err(refusal) = deps.check_caller_may_use(agent.caller(), &call.name) {
        return tool_error(refusal.to_string());
    }
    let agent_level = ["todo", "memory", "session_search", "delegate_task"];
    if !agent_level.contains(&call.name.as_str()) {
        let mut ctx = deps.tool_ctx(session_id, cancel.child_token());
        ctx.platform = Some(agent.platform().to_owned());
        ctx.caller = agent.caller().clone();
        ctx.sandbox = deps.sandbox_for(&ctx.caller);
        return deps
            .registry
            .dispatch(&call.name, &call.arguments, ctx)
            .await;
    }
    let args: Value = match serde_json::from_str(if call.arguments.trim().is_empty() {
        "{}"
    } else {
        &call.arguments
    }) {
        Ok(args) => args,
        Err(e) => return tool_error(format!("Invalid JSON arguments for {}: {e}", call.name)),
    };
    match call.name.as_str() {
        "todo" => todo::todo_tool(Some(&deps.todos(session_id, agent.history())), &args),
        "memory" => memory::memory_tool(Some(&deps.memory), &args),
        "session_search" => {
            session_search(
                &deps.store,
                &SessionSearchArgs::from_json(&args),
                Some(session_id),
            )
            .await
        }
        _ => delegate(agent, &args, events, cancel).await,
    }
}

/// Runs each delegated task in a sub-agent with its own isolated history and a capped
/// budget, in a child session tagged `_delegate_from` like Hermes's.
fn delegate<'a>(
    agent: &'a Agent,
    args: &'a Value,
    events: &'a EventSink,
    cancel: &'a CancellationToken,
) -> BoxFuture<'a, String> {
    Box::pin(async move {
        let deps = agent.deps();
        let parsed = match DelegateArgs::parse(args, &deps.delegation) {
            Ok(parsed) => parsed,
            Err(error) => return error.tool_result(),
        };
        let runs = parsed
            .tasks
            .iter()
            .enumerate()
            .map(|(index, task)| async move {
                let child_id = crate::agent::session_id::new_session_id();
                let mut session = NewSession::new(child_id.clone(), "tool");
                session.parent_session_id = Some(agent.session_id().to_owned());
                session.model = Some(deps.model_name());
                session.model_config = Some(json!({"_delegate_from": agent.session_id()}));
                if let Err(e) = deps.store.create_session(session).await {
                    return json!({"task_index": index, "status": "failed", "error": e.to_string()});
                }
                let mut child = Agent::sub_agent(
                    std::sync::Arc::clone(agent.deps_arc()),
                    child_id.clone(),
                    crate::agent::deps::DELEGATE_MAX_TURNS,
                    agent.depth() + 1,
                    agent.tool_platform(),
                );
                // The child acts for the same person, with the same tools withheld.
                child.set_caller(agent.caller().clone());
                emit(
                    events,
                    AgentEvent::Status(format!("delegating: {}", task.goal)),
                );
                let prompt = match &task.context {
                    Some(context) => format!("{}\n\nContext:\n{context}", task.goal),
                    None => task.goal.clone(),
                };
                // Nobody shows a child's progress: with its display gone at once, the child's
                // events are discarded as they come instead of piling up for its whole run.
                let (sink, display) = crate::agent::event_channel::event_channel();
                drop(display);
                let outcome = child.run_turn(&prompt, &sink, &cancel.child_token()).await;
                let _ = deps.store.end_session(&child_id, "delegate_complete").await;
                match outcome {
                    Ok(outcome) if !outcome.interrupted => json!({
                        "task_index": index, "status": "completed", "summary": outcome.reply,
                        "session_id": child_id, "iterations": outcome.iterations,
                    }),
                    Ok(_) => json!({"task_index": index, "status": "interrupted"}),
                    Err(e) => {
                        json!({"task_index": index, "status": "failed", "error": e.to_string()})
                    }
                }
            });
        let results = join_all(runs).await;
        json!({"results": results}).to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::preview;

    #[test]
    fn previews_pick_the_telling_argument() {
        assert_eq!(preview(r#"{"command": "ls -la\n/tmp"}"#), "ls -la /tmp");
        assert_eq!(preview(r#"{"other": 1}"#), r#"{"other": 1}"#);
        assert_eq!(
            preview(&format!(r#"{{"path": "{}"}}"#, "a".repeat(200))).len(),
            80
        );
    }
}
