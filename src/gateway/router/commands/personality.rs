//! `/personality`: lists the personalities of config.yaml (`agent.personalities`, else the
//! top-level `personalities:`), or makes one of them `agent.system_prompt` — saved to
//! config.yaml by an in-place edit and in force from the next message of every chat, since
//! the text is layered onto each request rather than stored with a session. `none`,
//! `default` and `neutral` clear it. Choosing changes every chat: allowed users only.

use super::{CommandCtx, Reply};
use crate::config::personality::PersonalityConfig;
use crate::gateway::router::authority::Gate;

const CLEAR: &[&str] = &["none", "default", "neutral"];

pub(super) fn gate(args: &str) -> Gate {
    if args.trim().is_empty() {
        Gate::Open
    } else {
        Gate::AllowedUsersOnly("it changes the system prompt of every chat (agent.system_prompt)")
    }
}

pub(super) async fn apply(ctx: &CommandCtx<'_>) -> Reply {
    let live = ctx.router.live();
    let config = &live.config.personality;
    let args = ctx.command.args.trim().to_lowercase();
    if config.personalities.is_empty() {
        return Reply::Text(
            "No personalities are configured. Add some under `agent.personalities` in \
             config.yaml (a name and its prompt), then try again."
                .to_owned(),
        );
    }
    if args.is_empty() {
        return Reply::Text(listing(config));
    }
    let (name, prompt) = if CLEAR.contains(&args.as_str()) {
        (None, String::new())
    } else if let Some(personality) = config.get(&args) {
        (Some(args.clone()), personality.prompt.clone())
    } else {
        let mut names = vec!["`none`".to_owned()];
        names.extend(config.personalities.keys().map(|n| format!("`{n}`")));
        return Reply::Text(format!(
            "There is no personality called `{args}`. Choose one of: {}.",
            names.join(", ")
        ));
    };
    let path = ctx.router.home.config_yaml();
    let text = prompt.clone();
    let saved = tokio::task::spawn_blocking(move || save(&path, &text)).await;
    match saved {
        Ok(Ok(())) => {}
        Ok(Err(why)) => {
            tracing::warn!(error = %why, "/personality could not save agent.system_prompt");
            return Reply::Text(format!(
                "⚠️ Could not save the personality to config.yaml: {why}. Nothing changed."
            ));
        }
        Err(e) => {
            tracing::error!(error = %e, "/personality writer task failed");
            return Reply::Text("⚠️ Could not save the personality. Nothing changed.".into());
        }
    }
    crate::gateway::router::live::set_system_prompt(ctx.router, prompt);
    tracing::info!(
        personality = name.as_deref().unwrap_or("none"),
        "agent.system_prompt changed by /personality"
    );
    Reply::Text(match name {
        Some(name) => {
            format!("🎭 Personality set to **{name}**. It applies from the next message.")
        }
        None => "🎭 Personality cleared: the agent's own prompt applies from the next message."
            .to_owned(),
    })
}

fn listing(config: &PersonalityConfig) -> String {
    let mut lines = vec![
        "🎭 **Personalities**".to_owned(),
        "• `none`: no extra prompt".to_owned(),
    ];
    for (name, personality) in &config.personalities {
        let preview = personality
            .description
            .clone()
            .unwrap_or_else(|| short(&personality.prompt, 50));
        lines.push(format!("• `{name}`: {preview}"));
    }
    let current = config
        .personalities
        .iter()
        .find(|(_, p)| !config.system_prompt.is_empty() && p.prompt == config.system_prompt)
        .map(|(name, _)| name.as_str());
    lines.push(String::new());
    lines.push(match current {
        Some(name) => format!("In use: `{name}`. Change with `/personality <name>`."),
        None => "Choose with `/personality <name>`.".to_owned(),
    });
    lines.join("\n")
}

fn short(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > max || text.lines().count() > 1 {
        format!("{}…", line.chars().take(max).collect::<String>())
    } else {
        line.to_owned()
    }
}

/// Writes `agent.system_prompt` into config.yaml atomically, keeping the file's mode,
/// comments and layout.
fn save(path: &std::path::Path, prompt: &str) -> Result<(), String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let out =
        crate::config::model_edit::set_section_keys(&text, "agent", &[("system_prompt", prompt)])
            .map_err(|e| e.to_string())?;
    let mode = super::model::file_mode(path);
    crate::tools::approval::write_atomically(path, out.as_bytes(), mode)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choosing_is_for_allowed_users_and_listing_is_open() {
        assert!(matches!(gate(""), Gate::Open));
        assert!(matches!(gate("pirate"), Gate::AllowedUsersOnly(_)));
        assert!(matches!(gate("none"), Gate::AllowedUsersOnly(_)));
    }

    #[test]
    fn save_keeps_the_rest_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "# mine\nagent:\n  max_turns: 7\n").unwrap();
        save(&path, "Be terse.").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "# mine\nagent:\n  system_prompt: \"Be terse.\"\n  max_turns: 7\n"
        );
        save(&path, "").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("system_prompt: \"\""), "{text}");
    }
}
