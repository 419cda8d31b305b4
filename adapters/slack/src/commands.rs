//! `!cmd` → `/cmd`: Slack refuses typed slash commands inside threads ("/new is not
//! supported in threads"), so users type `!new` and the adapter rewrites it — only for
//! commands the gateway knows, so a casual "!nice work" stays text (reference
//! `_handle_slack_message`).

/// Hermes 0.19's `GATEWAY_KNOWN_COMMANDS` (names and aliases from `COMMAND_REGISTRY`).
pub const GATEWAY_KNOWN_COMMANDS: &[&str] = &[
    "agents",
    "approve",
    "background",
    "bg",
    "blueprint",
    "bp",
    "branch",
    "btw",
    "bundles",
    "codex-runtime",
    "codex_runtime",
    "commands",
    "compact",
    "compress",
    "curator",
    "debug",
    "deny",
    "fast",
    "footer",
    "fork",
    "goal",
    "help",
    "insights",
    "kanban",
    "learn",
    "memory",
    "moa",
    "model",
    "new",
    "personality",
    "platform",
    "profile",
    "q",
    "queue",
    "reasoning",
    "reload-mcp",
    "reload-skills",
    "reload_mcp",
    "reload_skills",
    "reset",
    "restart",
    "resume",
    "retry",
    "rollback",
    "sessions",
    "set-home",
    "sethome",
    "skills",
    "start",
    "status",
    "steer",
    "stop",
    "subgoal",
    "suggest",
    "suggestions",
    "tasks",
    "title",
    "topic",
    "topup",
    "undo",
    "update",
    "usage",
    "v",
    "verbose",
    "version",
    "voice",
    "whoami",
    "yolo",
];

/// Rewrites a leading `!known_command` to `/known_command`; anything else is unchanged.
pub fn rewrite_bang_command(text: &str) -> String {
    let Some(rest) = text.strip_prefix('!') else {
        return text.to_owned();
    };
    let first = rest.split_whitespace().next().unwrap_or("");
    let name = first.split('@').next().unwrap_or("").to_lowercase();
    if !name.is_empty() && !name.contains('/') && GATEWAY_KNOWN_COMMANDS.contains(&name.as_str()) {
        format!("/{rest}")
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_commands_are_rewritten() {
        assert_eq!(rewrite_bang_command("!new"), "/new");
        assert_eq!(rewrite_bang_command("!NEW my title"), "/NEW my title");
        assert_eq!(rewrite_bang_command("!stop@hermes"), "/stop@hermes");
        assert_eq!(rewrite_bang_command("!nice work"), "!nice work");
        assert_eq!(rewrite_bang_command("!"), "!");
        assert_eq!(rewrite_bang_command("hello !new"), "hello !new");
    }
}
