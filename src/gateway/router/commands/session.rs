//! The commands that work on the conversation itself: `/new`, `/resume`, `/title`, `/undo`,
//! `/retry` and `/sessions`. Switching into another session or listing other chats' needs
//! an allowed user; a guest's `/new` acts only on their own turn.

use std::sync::Arc;

use hermes_adapter::MessageEvent;

use super::control::stop_quietly;
use super::{CommandCtx, Reply};
use crate::agent::new_session_id;
use crate::gateway::router::Router;
use crate::gateway::router::authority::Gate;
use crate::gateway::router::slot::Slot;

/// Who may run `/new`, `/resume` or `/sessions`.
pub(super) fn gate(name: &str) -> Gate {
    match name {
        "resume" => Gate::AllowedUsersOnly(
            "it switches this chat into another session, whose history may be someone else's",
        ),
        "sessions" => Gate::AllowedUsersOnly("it lists the sessions of other chats"),
        // `/new` interrupts the running turn before it clears the session.
        _ => Gate::OwnTurn,
    }
}

pub(super) async fn apply(ctx: &CommandCtx<'_>) -> Reply {
    let (router, slot, event, args) = (
        ctx.router,
        ctx.slot,
        &ctx.job.event,
        ctx.command.args.as_str(),
    );
    Reply::Text(match ctx.command.name.as_str() {
        "new" => new_session(router, slot, event, args).await,
        "resume" => resume_command(router, slot, event, args).await,
        "title" => title_command(router, &slot.key, &event.source, args).await,
        "undo" => undo_command(router, slot, args).await,
        "retry" => return retry_command(router, slot).await,
        _ => sessions_text(router, event).await,
    })
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
        return crate::gateway::router::turn::failure::store_error_text(
            &e,
            "starting a new session",
        );
    }
    let events = router.live().events.clone();
    let context = crate::gateway::event_hooks::chat_context(&event.source, &slot.key);
    events.emit("session:end", context.clone());
    events.emit("session:reset", context);
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
        Err(reason) => Err(reason.to_string()),
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
        Err(e) => {
            return crate::gateway::router::turn::failure::store_error_text(
                &e,
                "a session command",
            );
        }
    };
    if let Some(old) = router.sessions.current_session_id(&slot.key)
        && old != target
        && let Err(e) = router.store.end_session(&old, "session_switch").await
    {
        tracing::warn!(error = %e, "cannot end the session switched away from");
    }
    if let Err(e) = router.store.reopen_session(&target).await {
        return crate::gateway::router::turn::failure::store_error_text(&e, "a session command");
    }
    slot.lock().agent = None;
    if let Err(e) = router
        .sessions
        .repoint(&slot.key, &event.source, &target, false)
        .await
    {
        return crate::gateway::router::turn::failure::store_error_text(&e, "a session command");
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
        Err(e) => {
            return crate::gateway::router::turn::failure::store_error_text(
                &e,
                "a session command",
            );
        }
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
            crate::gateway::router::turn::title::rename_session_thread(
                &router.responder,
                source,
                &title,
            )
            .await;
            format!("✏️ Session title set: **{title}**")
        }
        Err(e) => crate::gateway::router::turn::failure::store_error_text(&e, "setting a title"),
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
        Err(e) => {
            return crate::gateway::router::turn::failure::store_error_text(
                &e,
                "a session command",
            );
        }
    };
    slot.lock().agent = None;
    let preview: String = first_text.chars().take(80).collect();
    format!(
        "↩️ Undid {count} turn(s) ({removed} message(s)).\nBacked up to: \"{preview}\"\nCopy/edit the text above and send it to re-prompt from here."
    )
}

/// `/retry`: removes the last exchange and runs its user text again as this event's turn.
async fn retry_command(router: &Router, slot: &Arc<Slot>) -> Reply {
    let none = || Reply::Text("No previous message to retry.".to_owned());
    let Some((session_id, turns)) = user_turns(router, &slot.key).await else {
        return none();
    };
    let Some((from_id, text)) = turns.last().cloned() else {
        return none();
    };
    if let Err(e) = router.store.truncate_messages(&session_id, from_id).await {
        return Reply::Text(crate::gateway::router::turn::failure::store_error_text(
            &e, "/retry",
        ));
    }
    slot.lock().agent = None;
    Reply::Turn(text)
}

pub(super) async fn sessions_text(router: &Router, event: &MessageEvent) -> String {
    let sessions = match router
        .store
        .recent_sessions(Some(&event.source.platform), 10)
        .await
    {
        Ok(sessions) => sessions,
        Err(e) => {
            return crate::gateway::router::turn::failure::store_error_text(
                &e,
                "a session command",
            );
        }
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
