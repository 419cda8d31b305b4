//! `/status` and `/usage`: what the session and the gateway are doing, read-only.

use std::sync::Arc;

use hermes_adapter::MessageEvent;

use super::{CommandCtx, Reply};
use crate::gateway::router::Router;
use crate::gateway::router::slot::Slot;
use crate::gateway::routing::iso_utc;

pub(super) async fn apply(ctx: &CommandCtx<'_>) -> Reply {
    Reply::Text(match ctx.command.name.as_str() {
        "status" => status_text(ctx.router, ctx.slot, &ctx.job.event).await,
        _ => usage_text(ctx.router, &ctx.slot.key).await,
    })
}

pub(super) async fn status_text(router: &Router, slot: &Arc<Slot>, event: &MessageEvent) -> String {
    let (running, queued) = {
        let state = slot.lock();
        (state.running.is_some(), state.queue.len())
    };
    let mut lines = vec!["📊 **Hermes Gateway Status**".to_owned()];
    if let Some(session_id) = router.sessions.current_session_id(&slot.key) {
        lines.push(format!("**Session ID:** `{session_id}`"));
        if let Ok(Some(session)) = router.store.get_session(&session_id).await {
            if let Some(title) = session.title {
                lines.push(format!("**Title:** {title}"));
            }
            lines.push(format!("**Created:** {}", iso_utc(session.started_at)));
            lines.push(format!(
                "**Cumulative API tokens (re-sent each call):** {}",
                session.input_tokens + session.output_tokens
            ));
        }
    }
    if let Ok(deps) = &router.live().agent {
        let model = router
            .sessions
            .model_choice(&slot.key)
            .filter(|c| deps.client.endpoints().iter().any(|e| c.served_by(e)))
            .map(|c| c.model)
            .unwrap_or_else(|| deps.model_name());
        lines.push(format!("**Model:** `{model}`"));
    }
    let state = if running { "Yes ⚡" } else { "No" };
    lines.push(format!("**Agent Running:** {state}"));
    if queued > 0 {
        lines.push(format!("**Queued follow-ups:** {queued}"));
    }
    let mut platforms: Vec<&String> = router.responder.platforms.keys().collect();
    platforms.sort();
    let names: Vec<&str> = platforms.iter().map(|s| s.as_str()).collect();
    lines.push(format!("**Connected Platforms:** {}", names.join(", ")));
    lines.push(format!(
        "**Uptime:** {}s · **Platform:** {}",
        router.started.elapsed().as_secs(),
        event.source.platform
    ));
    lines.join("\n")
}

pub(super) async fn usage_text(router: &Router, key: &str) -> String {
    let Some(session_id) = router.sessions.current_session_id(key) else {
        return "No usage yet — send a message first.".to_owned();
    };
    match router.store.get_session(&session_id).await {
        Ok(Some(s)) => format!(
            "📊 **Session Token Usage**\nInput: {}\nOutput: {}\nCache read: {}\nCache write: {}\nAPI calls: {}{}",
            s.input_tokens,
            s.output_tokens,
            s.cache_read_tokens,
            s.cache_write_tokens,
            s.api_call_count,
            s.estimated_cost_usd
                .map(|c| format!("\nEstimated cost: ${c:.4}"))
                .unwrap_or_default()
        ),
        Ok(None) => "No usage yet — send a message first.".to_owned(),
        Err(e) => crate::gateway::router::turn::failure::store_error_text(&e, "reading usage"),
    }
}
