//! The system prompt: who the agent is (`SOUL.md`, else our default identity), guidance on
//! using its tools (picked by toolset, model family and config, see `guidance`), which skills
//! it can load, a note about the chat platform, the project's context file, what it remembers (MEMORY.md, USER.md) and where
//! it works. Built once per conversation and stored with the session, so every turn sends
//! the same bytes (provider prompt caches depend on it). Layered like Hermes's: the parts
//! that change least come first.

pub mod context_files;
pub mod guidance;

use std::path::Path;

use crate::tools::memory::{MemoryStore, Target};

const IDENTITY: &str = "You are Hermes, a helpful, capable assistant reached through a \
messaging gateway. You can use tools to run commands, read and edit files, search past \
conversations, keep a to-do list and remember facts across sessions. Use tools when they \
help; ask a clarifying question when the request is ambiguous; be concise in chat.";

const PROJECT_HEADING: &str = "# Project context\n\n\
These files from the project you are working in describe how work is done there; follow them.";

/// What goes into one session's system prompt.
#[derive(Debug)]
pub struct PromptSources<'a> {
    /// The Hermes home (SOUL.md).
    pub home: &'a Path,
    pub memory: &'a MemoryStore,
    /// The working directory (context files are looked up from here).
    pub cwd: &'a Path,
    /// The cap on each context file, in characters.
    pub context_cap: usize,
    /// The skills index block, when the agent has skills and the tools to load them.
    pub skills_index: Option<String>,
    /// The tool-use and model-family guidance blocks, in order.
    pub guidance: Vec<&'static str>,
    /// The note about the platform the conversation happens on.
    pub platform_hint: Option<String>,
}

pub fn build(sources: &PromptSources<'_>) -> String {
    let mut parts: Vec<String> = Vec::new();
    parts.push(
        context_files::soul(sources.home, sources.context_cap)
            .unwrap_or_else(|| IDENTITY.to_owned()),
    );
    parts.extend(sources.guidance.iter().map(|block| (*block).to_owned()));
    if let Some(index) = &sources.skills_index {
        parts.push(index.clone());
    }
    if let Some(hint) = &sources.platform_hint {
        parts.push(hint.clone());
    }
    if let Some(project) = context_files::project(sources.cwd, sources.context_cap) {
        parts.push(format!("{PROJECT_HEADING}\n\n{project}"));
    }
    for target in [Target::Memory, Target::User] {
        if let Some(block) = sources.memory.format_for_system_prompt(target) {
            parts.push(block);
        }
    }
    parts.push(format!("Working directory: {}", sources.cwd.display()));
    parts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The prompt for one API request: the session's stored prompt with the caller's own
/// `system` text after it (Hermes layers it on per request and never stores it).
pub fn with_request_system(stored: &str, request_system: Option<&str>) -> String {
    match request_system.map(str::trim).filter(|s| !s.is_empty()) {
        Some(extra) => format!("{stored}\n\n{extra}").trim().to_owned(),
        None => stored.to_owned(),
    }
}

/// The text layered onto every request of a turn: the operator's `agent.system_prompt`
/// and then the caller's own `system` (either may be empty).
pub fn layered_system(operator: &str, caller: Option<&str>) -> Option<String> {
    let parts: Vec<&str> = [Some(operator), caller]
        .into_iter()
        .flatten()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources<'a>(
        home: &'a Path,
        memory: &'a MemoryStore,
        index: Option<String>,
    ) -> PromptSources<'a> {
        PromptSources {
            home,
            memory,
            cwd: home,
            context_cap: 20_000,
            skills_index: index,
            guidance: Vec::new(),
            platform_hint: None,
        }
    }

    #[test]
    fn soul_replaces_the_identity_and_parts_come_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let home = crate::home::HermesHome::at(dir.path());
        let memory = MemoryStore::new(&home, 2200, 1375);
        let plain = build(&sources(dir.path(), &memory, None));
        assert!(plain.starts_with("You are Hermes"), "{plain}");
        std::fs::write(dir.path().join("SOUL.md"), "You are Ada.\n").unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "Run make test.").unwrap();
        let prompt = build(&sources(dir.path(), &memory, Some("## Skills\nidx".into())));
        assert!(
            prompt.starts_with("You are Ada.\n\n## Skills\nidx\n\n# Project context"),
            "{prompt}"
        );
        assert!(!prompt.contains("You are Hermes"));
        assert!(prompt.contains("## AGENTS.md\n\nRun make test."));
        assert!(prompt.ends_with(&format!("Working directory: {}", dir.path().display())));
        assert_eq!(
            prompt,
            build(&sources(dir.path(), &memory, Some("## Skills\nidx".into())))
        );
    }

    #[test]
    fn guidance_follows_the_identity_and_the_platform_note_follows_the_skills() {
        let dir = tempfile::tempdir().unwrap();
        let home = crate::home::HermesHome::at(dir.path());
        let memory = MemoryStore::new(&home, 2200, 1375);
        std::fs::write(dir.path().join("AGENTS.md"), "Run make test.").unwrap();
        let mut src = sources(dir.path(), &memory, Some("## Skills\nidx".into()));
        src.guidance = vec!["# One", "# Two"];
        src.platform_hint = Some("On Telegram.".into());
        let prompt = build(&src);
        assert!(
            prompt.contains("help; ask a clarifying question when the request is ambiguous; be concise in chat.\n\n# One\n\n# Two\n\n## Skills\nidx\n\nOn Telegram.\n\n# Project context"),
            "{prompt}"
        );
    }

    #[test]
    fn the_request_system_text_goes_after_the_stored_prompt() {
        assert_eq!(
            with_request_system("base", Some(" be brief ")),
            "base\n\nbe brief"
        );
        assert_eq!(with_request_system("base", Some("  ")), "base");
        assert_eq!(with_request_system("base", None), "base");
    }
}
