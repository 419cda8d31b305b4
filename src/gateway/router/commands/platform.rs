//! The commands that change the daemon for every chat: `/platform pause|resume|list`,
//! `/restart` and `/sethome`. Listing is open; the rest need an allowed user.

use hermes_adapter::MessageEvent;

use super::{CommandCtx, Reply};
use crate::gateway::router::Router;
use crate::gateway::router::authority::Gate;

/// Who may run `/platform`, `/restart` or `/sethome`.
pub(super) fn gate(name: &str, args: &str) -> Gate {
    let first = args.split_whitespace().next().unwrap_or("");
    match name {
        "restart" => Gate::AllowedUsersOnly("it restarts the gateway for every chat"),
        "sethome" => Gate::AllowedUsersOnly(
            "it decides where scheduled jobs and cross-platform messages are delivered",
        ),
        "platform" if !matches!(first, "" | "list") => {
            Gate::AllowedUsersOnly("it pauses or resumes a whole platform for everyone")
        }
        _ => Gate::Open,
    }
}

pub(super) fn apply(ctx: &CommandCtx<'_>) -> Reply {
    Reply::Text(match ctx.command.name.as_str() {
        "platform" => platform_command(ctx.router, &ctx.command.args),
        "restart" => request_restart(ctx.router),
        _ => set_home(ctx.router, &ctx.job.event),
    })
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
    let mut paused = router.paused.lock();
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
    router.home.path().to_path_buf().join(".env")
}
