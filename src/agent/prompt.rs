//! The system prompt: who the agent is, what it remembers (MEMORY.md, USER.md) and where it
//! works. Built once per conversation so it stays stable (prompt caching depends on it).

use std::path::Path;

use crate::tools::memory::{MemoryStore, Target};

const IDENTITY: &str = "You are Hermes, a helpful, capable assistant reached through a \
messaging gateway. You can use tools to run commands, read and edit files, search past \
conversations, keep a to-do list and remember facts across sessions. Use tools when they \
help; ask a clarifying question when the request is ambiguous; be concise in chat.";

pub fn build(memory: &MemoryStore, cwd: &Path) -> String {
    let mut prompt = String::from(IDENTITY);
    for target in [Target::Memory, Target::User] {
        if let Some(block) = memory.format_for_system_prompt(target) {
            prompt.push_str("\n\n");
            prompt.push_str(&block);
        }
    }
    prompt.push_str(&format!("\n\nWorking directory: {}", cwd.display()));
    prompt
}
