//! Gateway slash commands as values, answered without the model. [`Command::parse`] reads
//! one from an event; the dispatcher here only decides whether it may run now (mid-turn,
//! who sent it) and hands it to its family's file, which applies it with an explicit
//! [`CommandCtx`]: `/model` lives in `model.rs`, `/sethome` in `platform.rs`, and so on.
//! Names, aliases and reply texts follow Hermes 0.19.

pub(in crate::gateway::router) mod answers;
mod approval;
pub mod background;
mod compress;
mod control;
mod cron;
mod info;
mod insights;
mod model;
mod model_listing;
mod personality;
mod platform;
mod reload_mcp;
mod session;
mod skill;
mod status;
mod voice;
mod yolo;

use std::sync::Arc;

use hermes_adapter::MessageEvent;

use super::authority::{Gate, allowed_users_only_text, log_refusal, not_your_turn_text};
use super::slot::{Job, Slot};
use crate::gateway::router::Router;
use crate::tools::context::Authority;

/// What a command leaves to the dispatcher.
pub(super) enum Reply {
    /// Answer the event with this text.
    Text(String),
    /// Run this text as the event's turn, which answers it.
    Turn(String),
    /// Nothing now: the command queued a turn that answers the event later.
    Later,
}

/// What a command may use: the router's parts, the session's slot, and the event that
/// carried the command.
pub(super) struct CommandCtx<'a> {
    pub router: &'a Router,
    pub slot: &'a Arc<Slot>,
    pub job: &'a Job,
    pub command: &'a Command,
}

/// A parsed command: canonical name (aliases resolved) and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub name: String,
    pub args: String,
}

impl Command {
    /// The command in `event`, if its text is one (`/name@bot args`), aliases resolved.
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

    /// Who may run this command (`authority.rs` says why there are gates at all). Each
    /// family decides for its own commands; everything else is open to anyone admitted.
    pub(in crate::gateway::router) fn gate(&self) -> Gate {
        let args = self.args.trim().to_lowercase();
        let name = self.name.as_str();
        match name {
            "restart" | "sethome" | "platform" => platform::gate(name, &args),
            "model" => model::gate(&args),
            "approve" => approval::gate(&args),
            "new" | "resume" | "sessions" => session::gate(name),
            "stop" | "steer" => control::gate(),
            "yolo" => yolo::gate(),
            "personality" => personality::gate(&args),
            "insights" => insights::gate(),
            "reload-mcp" => reload_mcp::gate(),
            "voice" => voice::gate(&args),
            _ => Gate::Open,
        }
    }
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
    (
        "background",
        "Run a prompt as a separate task (alias /bg) <prompt>",
    ),
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
    (
        "compress",
        "Summarise the conversation now [focus | here N]",
    ),
    ("personality", "List or choose a personality [name | none]"),
    (
        "yolo",
        "Run this session's dangerous commands without asking (toggle)",
    ),
    (
        "insights",
        "Usage over the last days [days] [--source platform]",
    ),
    (
        "reload-mcp",
        "Reconnect the MCP servers and re-read config.yaml",
    ),
    ("voice", "Spoken replies in this chat [on|off|tts|status]"),
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
    ("reload_mcp", "reload-mcp"),
    ("bg", "background"),
    ("start", "start"),
];

/// Commands that act on the running turn or only read state; the rest wait or are refused.
const MID_TURN: &[&str] = &[
    "stop",
    "new",
    "status",
    "queue",
    "steer",
    "approve",
    "deny",
    "help",
    "commands",
    "version",
    "whoami",
    "platform",
    "restart",
    "usage",
    "cron",
    "yolo",
    "insights",
    "background",
    "voice",
];

/// Hermes commands hermesd does not have yet; `/help` names them.
pub const NOT_AVAILABLE: &[(&str, &str)] = &[(
    "reasoning",
    "the model's reasoning effort is not sent to providers yet",
)];

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
    text.push_str("\n\nNot available in hermesd yet:");
    for (name, why) in NOT_AVAILABLE {
        text.push_str(&format!("\n/{name} — {why}"));
    }
    text.push_str("\n\nAnything else you send goes to the agent.");
    text
}

/// Runs `command` (from `job`'s event) in `slot`: refuses what must wait for the turn or
/// what the sender may not do, then applies it and answers the event.
pub(in crate::gateway::router) async fn run_command(
    router: &Router,
    slot: &Arc<Slot>,
    job: Job,
    command: Command,
) {
    let busy = slot.lock().running.is_some();
    let name = command.name.as_str();
    if name == "start" {
        router.responder.answer_silently(&job).await;
        return;
    }
    if !is_known(name)
        && let Some(text) =
            skill::skill_turn_text(router, &slot.key, &job.event, name, &command.args)
    {
        if busy {
            router.responder.respond(&job, &wait_text(name)).await;
            return;
        }
        // The skill's instructions and the user's words run as this event's turn.
        run_as_turn(router, slot, job, text).await;
        return;
    }
    if let Some((_, why)) = NOT_AVAILABLE.iter().find(|(n, _)| *n == name) {
        router
            .responder
            .respond(
                &job,
                &format!("`/{name}` is not available in hermesd yet: {why}."),
            )
            .await;
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
            wait_text(name)
        };
        router.responder.respond(&job, &text).await;
        return;
    }
    if job.authority == Authority::Guest
        && let Some(refusal) = guest_refusal(slot, &job, &command)
    {
        router.responder.respond(&job, &refusal).await;
        return;
    }
    let mut context = crate::gateway::event_hooks::chat_context(&job.event.source, &slot.key);
    context["command"] = name.into();
    context["args"] = command.args.clone().into();
    router
        .live()
        .events
        .emit(&format!("command:{name}"), context);
    let ctx = CommandCtx {
        router,
        slot,
        job: &job,
        command: &command,
    };
    let reply = match name {
        "help" | "commands" | "version" | "whoami" => info::apply(&ctx),
        "stop" | "queue" | "steer" => control::apply(&ctx),
        "approve" | "deny" => approval::apply(&ctx),
        "status" | "usage" => status::apply(&ctx).await,
        "model" => model::apply(&ctx).await,
        "platform" | "restart" | "sethome" => platform::apply(&ctx),
        "cron" => cron::apply(&ctx).await,
        "compress" => compress::apply(&ctx).await,
        "personality" => personality::apply(&ctx).await,
        "yolo" => yolo::apply(&ctx),
        "insights" => insights::apply(&ctx).await,
        "reload-mcp" => reload_mcp::apply(&ctx),
        "background" => background::apply(&ctx).await,
        "voice" => voice::apply(&ctx),
        "new" | "resume" | "title" | "undo" | "retry" | "sessions" => session::apply(&ctx).await,
        _ => Reply::Text(unknown_text(name)),
    };
    match reply {
        Reply::Text(text) => router.responder.respond(&job, &text).await,
        Reply::Turn(text) => run_as_turn(router, slot, job, text).await,
        Reply::Later => {}
    }
}

fn wait_text(name: &str) -> String {
    format!("⏳ `/{name}` has to wait until the current turn ends (or use `/stop`).")
}

/// Runs `text` as the turn of the command's event (which it answers).
async fn run_as_turn(router: &Router, slot: &Arc<Slot>, job: Job, text: String) {
    let mut event = job.event;
    event.text = text;
    let job = Job {
        event,
        resumed: false,
        api: job.api,
        authority: job.authority,
    };
    router.run_turn(slot, job).await;
}

/// Why a guest may not run `command` here, if they may not (`authority.rs`); the
/// refusal is logged for the operator.
fn guest_refusal(slot: &Arc<Slot>, job: &Job, command: &Command) -> Option<String> {
    let source = &job.event.source;
    let name = command.name.as_str();
    match command.gate() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::SessionSource;

    fn event(text: &str) -> MessageEvent {
        MessageEvent::text("1", SessionSource::dm("telegram", "42", "42"), text)
    }

    #[test]
    fn aliases_resolve_to_canonical_names() {
        assert_eq!(Command::parse(&event("/reset x")).unwrap().name, "new");
        assert_eq!(Command::parse(&event("/q hi")).unwrap().args, "hi");
        assert_eq!(
            Command::parse(&event("/v@hermes_bot")).unwrap().name,
            "version"
        );
        assert!(Command::parse(&event("hello")).is_none());
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

    fn command(name: &str, args: &str) -> Command {
        Command {
            name: name.into(),
            args: args.into(),
        }
    }

    #[test]
    fn control_commands_need_an_allowed_user_and_chat_commands_stay_open() {
        for (name, args) in [
            ("restart", ""),
            ("sethome", ""),
            ("platform", "pause telegram"),
            ("platform", "resume discord"),
            ("model", "gpt-x --global"),
            ("approve", "always"),
            ("approve", "ALL"),
            ("resume", "my notes"),
            ("sessions", ""),
            ("yolo", ""),
            ("personality", "pirate"),
            ("personality", "none"),
            ("insights", "7"),
            ("reload-mcp", ""),
            ("voice", "on"),
            ("voice", "tts"),
            ("voice", "off"),
            ("voice", ""),
        ] {
            assert!(
                matches!(command(name, args).gate(), Gate::AllowedUsersOnly(_)),
                "/{name} {args}"
            );
        }
        for (name, args) in [
            ("help", ""),
            ("status", ""),
            ("usage", ""),
            ("approve", ""),
            ("approve", "session"),
            ("deny", ""),
            ("platform", "list"),
            ("model", "gpt-x"),
            ("cron", ""),
            ("whoami", ""),
            ("personality", ""),
            ("compress", "here 3"),
            ("voice", "status"),
        ] {
            assert_eq!(command(name, args).gate(), Gate::Open, "/{name} {args}");
        }
        assert_eq!(command("stop", "").gate(), Gate::OwnTurn);
        assert_eq!(command("steer", "go left").gate(), Gate::OwnTurn);
        assert_eq!(command("new", "").gate(), Gate::OwnTurn);
    }
}
