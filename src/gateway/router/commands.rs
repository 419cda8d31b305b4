//! Gateway slash commands, answered without the model. Names, aliases and reply texts
//! follow Hermes 0.19 (`hermes_cli/commands.py`, `locales/en.yaml`). While a turn runs,
//! control commands act at once and the rest are refused with Hermes's busy text.

use std::sync::Arc;

use hermes_adapter::MessageEvent;

use super::Router;
use super::authority::{
    Gate, allowed_users_only_text, check_answer, gate, log_refusal, not_your_turn_text,
};
use super::busy::approval_reply;
use super::slot::{Job, Slot};
use crate::tools::approval::ApprovalDecision;
use crate::tools::context::Authority;

/// A parsed command: canonical name (aliases resolved) and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub name: String,
    pub args: String,
}

/// The gateway commands with their descriptions (also the menu platforms register).
pub const COMMANDS: &[(&str, &str)] = &[
    ("new", "Start a new session (alias /reset) [name]"),
    ("resume", "Resume a named session [title]"),
    ("title", "Show or set this session's title [name]"),
    ("retry", "Resend your last message"),
    ("undo", "Remove the last exchange [N]"),
    ("status", "Show session and gateway status"),
    ("stop", "Stop the running task"),
    ("queue", "Queue a message for the next turn (alias /q)"),
    ("steer", "Steer the running task after its next tool call"),
    ("approve", "Approve a pending command [session|always]"),
    ("deny", "Deny a pending command"),
    ("model", "Show or switch the model [name] [--global]"),
    ("usage", "Show this session's token usage"),
    ("whoami", "Show who you are to the gateway"),
    ("sethome", "Make this chat the platform's home channel"),
    ("sessions", "List recent sessions"),
    ("cron", "List this chat's scheduled jobs"),
    ("help", "Show help"),
    ("commands", "List commands [page]"),
    ("platform", "Pause, resume or list platforms"),
    ("restart", "Restart the gateway"),
    ("version", "Show the gateway version (alias /v)"),
];

const ALIASES: &[(&str, &str)] = &[
    ("reset", "new"),
    ("q", "queue"),
    ("set-home", "sethome"),
    ("set_home", "sethome"),
    ("v", "version"),
    ("start", "start"),
];

/// Commands that act on the running turn or only read state; the rest wait or are refused.
const MID_TURN: &[&str] = &[
    "stop", "new", "status", "queue", "steer", "approve", "deny", "help", "commands", "version",
    "whoami", "platform", "restart", "usage", "cron",
];

/// The command in `event`, if its text is one (`/name@bot args`).
pub fn parse(event: &MessageEvent) -> Option<Command> {
    let name = event.command()?;
    let name = ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map(|(_, canonical)| (*canonical).to_owned())
        .unwrap_or(name);
    Some(Command {
        name,
        args: event.command_args(),
    })
}

fn is_known(name: &str) -> bool {
    name == "start" || COMMANDS.iter().any(|(n, _)| *n == name)
}

pub fn unknown_text(name: &str) -> String {
    format!(
        "I don't know `/{name}`. /commands lists the commands; to send this to the agent as \
         ordinary text, send it again without the slash."
    )
}

pub fn help_text() -> String {
    let mut text = String::from("⚕ **Hermes commands**\n");
    for (name, description) in COMMANDS {
        text.push_str(&format!("\n/{name} — {description}"));
    }
    text.push_str("\n\nAnything else you send goes to the agent.");
    text
}

pub(super) async fn run_command(router: &Router, slot: &Arc<Slot>, job: Job, command: Command) {
    let busy = slot.lock().running.is_some();
    let name = command.name.as_str();
    if name == "start" {
        router.responder.answer_silently(&job).await;
        return;
    }
    if !is_known(name)
        && let Some(text) = skill_turn_text(router, &slot.key, &job.event, name, &command.args)
    {
        if busy {
            router
                .responder
                .respond(
                    &job,
                    &format!(
                        "⏳ `/{name}` has to wait until the current turn ends (or use `/stop`)."
                    ),
                )
                .await;
            return;
        }
        // The skill's instructions and the user's words run as this event's turn.
        run_as_turn(router, slot, job, text).await;
        return;
    }
    if !is_known(name) {
        tracing::warn!(command = name, "unrecognized slash command");
        router.responder.respond(&job, &unknown_text(name)).await;
        return;
    }
    if busy && !MID_TURN.contains(&name) {
        let text = if name == "model" {
            "A turn is running: the model can change once it ends (or after /stop).".to_owned()
        } else {
            format!("⏳ `/{name}` has to wait until the current turn ends (or use `/stop`).")
        };
        router.responder.respond(&job, &text).await;
        return;
    }
    if job.authority == Authority::Guest
        && let Some(refusal) = guest_refusal(router, slot, &job, &command)
    {
        router.responder.respond(&job, &refusal).await;
        return;
    }
    let reply = match name {
        "help" => Some(help_text()),
        "commands" => Some(commands_text(router, &job.event, &command.args)),
        "version" => Some(format!(
            "hermesd {} (Hermes gateway compatible)",
            env!("CARGO_PKG_VERSION")
        )),
        "whoami" => Some(whoami_text(&job.event)),
        "stop" => Some(stop(router, slot)),
        "approve" | "deny" => Some(resolve_approval(router, slot, &job, name, &command.args)),
        "queue" => queue_command(router, slot, &job, &command.args),
        "steer" => steer_command(router, slot, &job, &command.args),
        "status" => Some(super::session_commands::status_text(router, slot, &job.event).await),
        "usage" => Some(super::session_commands::usage_text(router, &slot.key).await),
        "model" => {
            Some(super::model_command::model_command(router, slot, &job.event, &command.args).await)
        }
        "platform" => Some(platform_command(router, &command.args)),
        "restart" => Some(request_restart(router)),
        "sethome" => Some(set_home(router, &job.event)),
        "sessions" => Some(super::session_commands::sessions_text(router, &job.event).await),
        "cron" => Some(super::cron_command::cron_text(router, &job.event).await),
        "title" => Some(
            super::session_commands::title_command(
                router,
                &slot.key,
                &job.event.source,
                &command.args,
            )
            .await,
        ),
        "new" => Some(
            super::session_commands::new_session(router, slot, &job.event, &command.args).await,
        ),
        "resume" => Some(
            super::session_commands::resume_command(router, slot, &job.event, &command.args).await,
        ),
        "undo" => Some(super::session_commands::undo_command(router, slot, &command.args).await),
        "retry" => match super::session_commands::retry_command(router, slot).await {
            Ok(text) => {
                // The retried message runs as this event's turn and answers it.
                run_as_turn(router, slot, job, text).await;
                return;
            }
            Err(text) => Some(text),
        },
        _ => Some(unknown_text(name)),
    };
    // `None`: the command became a queued turn that will answer the event.
    if let Some(text) = reply {
        router.responder.respond(&job, &text).await;
    }
}

/// Runs `text` as the turn of the command's event (which it answers).
pub(super) async fn run_as_turn(router: &Router, slot: &Arc<Slot>, job: Job, text: String) {
    let mut event = job.event;
    event.text = text;
    let job = Job {
        event,
        resumed: false,
        api: job.api,
        authority: job.authority,
    };
    super::turn::run_turn(router, slot, job).await;
}

/// The turn text for `/name args` when `name` is one of the platform's skills.
pub(super) fn skill_turn_text(
    router: &Router,
    key: &str,
    event: &MessageEvent,
    name: &str,
    args: &str,
) -> Option<String> {
    let skills = router.platform_skills(&event.source.platform);
    let skill = crate::skills::command::find(&skills, name)?;
    // `${HERMES_SESSION_ID}`: the chat's current session (none before its first turn).
    let session = router
        .routing
        .get(key)
        .map(|entry| entry.session_id.clone());
    let fill = match &router.live().agent {
        Ok(deps) => deps.settings.skills.template_vars,
        Err(_) => true,
    };
    let vars = fill.then_some(session.as_deref());
    match crate::skills::command::invocation(skill, args, vars) {
        Ok(text) => Some(text),
        Err(e) => {
            tracing::warn!(skill = %skill.name, error = %e, "cannot read the skill");
            None
        }
    }
}

pub(super) fn commands_text(router: &Router, event: &MessageEvent, args: &str) -> String {
    const PER_PAGE: usize = 20;
    let skills = router.platform_skills(&event.source.platform);
    let mut entries: Vec<(String, String)> = COMMANDS
        .iter()
        .map(|(n, d)| ((*n).to_owned(), (*d).to_owned()))
        .collect();
    for skill in &skills {
        if let Some(slug) = crate::skills::command::slug(&skill.name)
            && !is_known(&slug)
        {
            let description = match skill.short_description() {
                d if d.is_empty() => "Skill".to_owned(),
                d => format!("Skill: {d}"),
            };
            entries.push((slug, description));
        }
    }
    let pages = entries.len().div_ceil(PER_PAGE);
    let page = match args.trim() {
        "" => 1,
        n => match n.parse::<usize>() {
            Ok(n) if (1..=pages).contains(&n) => n,
            _ => return "Usage: `/commands [page]`".to_owned(),
        },
    };
    let mut text = format!("📋 Commands (page {page}/{pages})\n");
    for (name, description) in entries.iter().skip((page - 1) * PER_PAGE).take(PER_PAGE) {
        text.push_str(&format!("\n/{name} — {description}"));
    }
    text
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

/// Why a guest may not run `command` here, if they may not (`authority.rs`); the
/// refusal is logged for the operator.
pub(super) fn guest_refusal(
    _router: &Router,
    slot: &Arc<Slot>,
    job: &Job,
    command: &Command,
) -> Option<String> {
    let source = &job.event.source;
    let name = command.name.as_str();
    match gate(command) {
        Gate::Open => None,
        Gate::AllowedUsersOnly(why) => {
            log_refusal(source, name, "only allowed users may run this command");
            Some(allowed_users_only_text(name, why, &source.platform))
        }
        Gate::OwnTurn => {
            let state = slot.lock();
            let running = state.running.as_ref()?;
            let own = source.user_id.is_some() && running.source.user_id == source.user_id;
            if own {
                return None;
            }
            drop(state);
            log_refusal(source, name, "the running turn is someone else's");
            Some(not_your_turn_text(name))
        }
    }
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
        ApprovalDecision::Deny => approval_reply(decision).replace("Denied.", "Command denied."),
    }
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
    super::busy::ensure_worker(router, slot, &mut state);
    drop(state);
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
            if !super::steer::push_steer(running, text) {
                return Some(super::steer::full_text());
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

pub(super) fn request_restart(router: &Router) -> String {
    router
        .restart
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let router = router.arc();
    tokio::spawn(async move {
        // Let the reply go out before draining starts.
        tokio::task::yield_now().await;
        router.stop_requested.cancel();
    });
    "♻️ Restarting the gateway — running tasks finish first.".to_owned()
}

pub(super) fn platform_command(router: &Router, args: &str) -> String {
    let mut words = args.split_whitespace();
    let action = words.next().unwrap_or("list");
    let target = words.next().map(str::to_lowercase);
    let mut paused = router.paused.lock().unwrap_or_else(|e| e.into_inner());
    match (action, target) {
        ("list", _) => {
            let mut names: Vec<&String> = router.responder.platforms.keys().collect();
            names.sort();
            let lines: Vec<String> = names
                .iter()
                .map(|n| {
                    let state = if paused.contains(*n) {
                        "paused"
                    } else {
                        "active"
                    };
                    format!("• {n}: {state}")
                })
                .collect();
            format!("Platforms:\n{}", lines.join("\n"))
        }
        ("pause" | "resume", None) => format!("Usage: /platform {action} <name>"),
        ("pause" | "resume", Some(name)) if !router.responder.platforms.contains_key(&name) => {
            format!("Unknown platform `{name}`. Use /platform list.")
        }
        ("pause", Some(name)) => {
            paused.insert(name.clone());
            format!("⏸ {name} paused: its messages are ignored until /platform resume {name}.")
        }
        ("resume", Some(name)) => {
            paused.remove(&name);
            format!("▶ {name} resumed.")
        }
        _ => "Usage: /platform pause|resume|list [name]".to_owned(),
    }
}

pub(super) fn set_home(router: &Router, event: &MessageEvent) -> String {
    let platform = event.source.platform.to_uppercase();
    let path = home_env_path(router);
    let name = event
        .source
        .chat_name
        .clone()
        .unwrap_or_else(|| event.source.chat_id.clone());
    let saved = crate::gateway::pairing::save_env_value(
        &path,
        &format!("{platform}_HOME_CHANNEL"),
        &event.source.chat_id,
    );
    match saved {
        Ok(()) => format!(
            "✅ Home channel set to **{name}** (ID: {}).\nCron jobs and cross-platform \
             messages will be delivered here.",
            event.source.chat_id
        ),
        Err(e) => format!("Failed to save home channel: {e}"),
    }
}

pub(super) fn home_env_path(router: &Router) -> std::path::PathBuf {
    super::session_commands::agent_home(router).join(".env")
}

fn whoami_text(event: &MessageEvent) -> String {
    let source = &event.source;
    format!(
        "👤 **You:** {} (ID: {})\n**Platform:** {}\n**Chat:** {} ({})",
        source.user_name.as_deref().unwrap_or("unknown"),
        source.user_id.as_deref().unwrap_or("unknown"),
        source.platform,
        source.chat_id,
        source.chat_type.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::SessionSource;

    fn event(text: &str) -> MessageEvent {
        MessageEvent::text("1", SessionSource::dm("telegram", "42", "42"), text)
    }

    #[test]
    fn aliases_resolve_to_canonical_names() {
        assert_eq!(parse(&event("/reset x")).unwrap().name, "new");
        assert_eq!(parse(&event("/q hi")).unwrap().args, "hi");
        assert_eq!(parse(&event("/v@hermes_bot")).unwrap().name, "version");
        assert!(parse(&event("hello")).is_none());
    }

    #[test]
    fn unknown_commands_are_named_and_point_to_the_list() {
        assert!(!is_known("frobnicate"));
        let text = unknown_text("frobnicate");
        assert!(text.starts_with("I don't know `/frobnicate`."), "{text}");
        assert!(text.contains("/commands"), "{text}");
        for (name, _) in COMMANDS {
            assert!(is_known(name));
        }
    }
}
