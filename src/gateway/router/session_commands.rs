//! The commands that work on the conversation itself: `/new`, `/resume`, `/title`, `/undo`,
//! `/retry`, `/status`, `/usage`, `/sessions`.

use std::sync::Arc;

use hermes_adapter::MessageEvent;

use super::Router;
use super::slot::Slot;
use crate::agent::new_session_id;
use crate::gateway::routing::iso_utc;

pub(super) fn agent_home(router: &Router) -> std::path::PathBuf {
    router.home.path().to_path_buf()
}

/// `/new [name]`: interrupts and clears, ends the current session (`session_reset`) and
/// starts a fresh one.
pub(super) async fn new_session(
    router: &Router,
    slot: &Arc<Slot>,
    event: &MessageEvent,
    name: &str,
) -> String {
    if slot.lock().running.is_some() {
        let _ = stop_quietly(router, slot);
    }
    if let Some(old) = router.sessions.current_session_id(&slot.key)
        && let Err(e) = router.store.end_session(&old, "session_reset").await
    {
        tracing::warn!(error = %e, "cannot end the old session");
    }
    slot.lock().agent = None;
    let session_id = new_session_id();
    if let Err(e) = router
        .sessions
        .repoint(&slot.key, &event.source, &session_id, true)
        .await
    {
        return super::failure::store_error_text(&e, "starting a new session");
    }
    let name = name.trim();
    if name.is_empty() {
        return "✨ Session reset! Starting fresh.".to_owned();
    }
    // The row must exist before it can carry a title.
    let created = match &router.live().agent {
        Ok(deps) => crate::agent::Agent::create(
            deps.clone(),
            session_id.clone(),
            &event.source.platform,
            event.source.user_id.clone(),
        )
        .await
        .map(|agent| slot.lock().agent = Some(agent))
        .map_err(|e| e.to_string()),
        Err(reason) => Err(reason.clone()),
    };
    match created {
        Ok(()) => match router
            .store
            .set_session_title(&session_id, Some(name))
            .await
        {
            Ok(()) => format!("✨ New session started: {name}"),
            Err(e) => format!("✨ Session reset! Starting fresh.\n⚠️ Title rejected: {e}"),
        },
        Err(e) => {
            format!("✨ Session reset! Starting fresh.\n⚠️ {e} — session started untitled.")
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

/// `/resume [title]`: lists named sessions, or switches to one.
pub(super) async fn resume_command(
    router: &Router,
    slot: &Arc<Slot>,
    event: &MessageEvent,
    args: &str,
) -> String {
    let name = args.trim().trim_matches('"');
    if name.is_empty() {
        return named_sessions_text(router, &event.source.platform).await;
    }
    let target = match router.store.resolve_session_by_title(name).await {
        Ok(Some(id)) => id,
        Ok(None) => {
            return format!(
                "No session is called '**{name}**'.\n`/resume` on its own lists the ones you can go back to."
            );
        }
        Err(e) => return super::failure::store_error_text(&e, "a session command"),
    };
    if let Some(old) = router.sessions.current_session_id(&slot.key)
        && old != target
        && let Err(e) = router.store.end_session(&old, "session_switch").await
    {
        tracing::warn!(error = %e, "cannot end the session switched away from");
    }
    if let Err(e) = router.store.reopen_session(&target).await {
        return super::failure::store_error_text(&e, "a session command");
    }
    slot.lock().agent = None;
    if let Err(e) = router
        .sessions
        .repoint(&slot.key, &event.source, &target, false)
        .await
    {
        return super::failure::store_error_text(&e, "a session command");
    }
    let session = router.store.get_session(&target).await.ok().flatten();
    let title = session
        .as_ref()
        .and_then(|s| s.title.clone())
        .unwrap_or_else(|| name.to_owned());
    match session.map(|s| s.message_count) {
        Some(1) => format!("↻ Resumed session **{title}** (1 message). Conversation restored."),
        Some(n) => {
            format!("↻ Resumed session **{title}** ({n} messages). Conversation restored.")
        }
        None => format!("↻ Resumed session **{title}**. Conversation restored."),
    }
}

pub(super) async fn named_sessions_text(router: &Router, platform: &str) -> String {
    let sessions = router
        .store
        .recent_sessions(Some(platform), 50)
        .await
        .unwrap_or_default();
    let named: Vec<String> = sessions
        .iter()
        .filter_map(|s| s.session.title.as_ref())
        .take(10)
        .map(|t| format!("• **{t}**"))
        .collect();
    if named.is_empty() {
        return "No session has a name yet.\n`/title My Session` names this one; `/resume My Session` brings it back later.".to_owned();
    }
    format!(
        "📚 Named sessions:\n{}\n\nUsage: `/resume <session name>`",
        named.join("\n")
    )
}

/// `/title [name]`: shows or sets the current session's title; a thread the platform
/// opened for this conversation is renamed after it.
pub(super) async fn title_command(
    router: &Router,
    key: &str,
    source: &hermes_adapter::SessionSource,
    args: &str,
) -> String {
    let Some(session_id) = router.sessions.current_session_id(key) else {
        return "No session yet — send a message first.".to_owned();
    };
    let name = args.trim();
    if name.is_empty() {
        let title = router
            .store
            .get_session(&session_id)
            .await
            .ok()
            .flatten()
            .and_then(|s| s.title);
        return match title {
            Some(title) => format!("📌 Session: `{session_id}`\nTitle: **{title}**"),
            None => {
                format!("📌 Session: `{session_id}`\nNo title set. Usage: `/title My Session Name`")
            }
        };
    }
    match router.store.get_session(&session_id).await {
        Ok(Some(_)) => {}
        Ok(None) => return "Session not found in database.".to_owned(),
        Err(e) => return super::failure::store_error_text(&e, "a session command"),
    }
    match router
        .store
        .set_session_title(&session_id, Some(name))
        .await
    {
        Ok(()) => {
            let title = router
                .store
                .get_session(&session_id)
                .await
                .ok()
                .flatten()
                .and_then(|s| s.title)
                .unwrap_or_else(|| name.to_owned());
            super::title::rename_session_thread(router, source, &title).await;
            format!("✏️ Session title set: **{title}**")
        }
        Err(e) => super::failure::store_error_text(&e, "setting a title"),
    }
}

/// The message ids of the user messages in the current session, oldest first, and the
/// session id.
pub(super) async fn user_turns(router: &Router, key: &str) -> Option<(String, Vec<(i64, String)>)> {
    let session_id = router.sessions.current_session_id(key)?;
    let messages = router.store.get_messages(&session_id).await.ok()?;
    let turns = messages
        .iter()
        .filter(|m| m.role == "user")
        .map(|m| {
            let text = match &m.content {
                Some(crate::state::Content::Text(t)) => t.clone(),
                Some(other) => serde_json::to_string(other).unwrap_or_default(),
                None => String::new(),
            };
            (m.id, text)
        })
        .collect();
    Some((session_id, turns))
}

/// `/undo [N]`: removes the last N exchanges.
pub(super) async fn undo_command(router: &Router, slot: &Arc<Slot>, args: &str) -> String {
    let count = match args.trim() {
        "" => 1,
        n => match n.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => return format!("Invalid count \"{n}\" — use /undo or /undo N."),
        },
    };
    let Some((session_id, turns)) = user_turns(router, &slot.key).await else {
        return "Nothing to undo.".to_owned();
    };
    if turns.is_empty() {
        return "Nothing to undo.".to_owned();
    }
    let count = count.min(turns.len());
    let (from_id, first_text) = turns[turns.len() - count].clone();
    let removed = match router.store.truncate_messages(&session_id, from_id).await {
        Ok(n) => n,
        Err(e) => return super::failure::store_error_text(&e, "a session command"),
    };
    slot.lock().agent = None;
    let preview: String = first_text.chars().take(80).collect();
    format!(
        "↩️ Undid {count} turn(s) ({removed} message(s)).\nBacked up to: \"{preview}\"\nCopy/edit the text above and send it to re-prompt from here."
    )
}

/// `/retry`: removes the last exchange and returns its user text to run again.
pub(super) async fn retry_command(router: &Router, slot: &Arc<Slot>) -> Result<String, String> {
    let none = || "No previous message to retry.".to_owned();
    let (session_id, turns) = user_turns(router, &slot.key).await.ok_or_else(none)?;
    let (from_id, text) = turns.last().cloned().ok_or_else(none)?;
    router
        .store
        .truncate_messages(&session_id, from_id)
        .await
        .map_err(|e| super::failure::store_error_text(&e, "/retry"))?;
    slot.lock().agent = None;
    Ok(text)
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
        let model = super::model_command::session_model(router, &slot.key)
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
        Err(e) => super::failure::store_error_text(&e, "reading usage"),
    }
}

pub(super) async fn sessions_text(router: &Router, event: &MessageEvent) -> String {
    let sessions = match router
        .store
        .recent_sessions(Some(&event.source.platform), 10)
        .await
    {
        Ok(sessions) => sessions,
        Err(e) => return super::failure::store_error_text(&e, "a session command"),
    };
    if sessions.is_empty() {
        return "No sessions yet.".to_owned();
    }
    let lines: Vec<String> = sessions
        .iter()
        .map(|s| {
            let label = s.session.title.clone().unwrap_or_else(|| s.preview.clone());
            format!("• `{}` {label}", s.session.id)
        })
        .collect();
    format!("🗂 Recent sessions:\n{}", lines.join("\n"))
}
