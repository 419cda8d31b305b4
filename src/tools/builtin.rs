//! The registry of built-in tools. Agent-level tools (todo, memory, session_search,
//! delegate_task) are registered for their schemas; their handlers only return the stub
//! error Python's `handle_function_call` returns, because the agent loop intercepts them.

use serde_json::{Value, json};

use super::context::{ToolCtx, ToolLimits};
use super::delegate::DelegationLimits;
use super::error::ToolError;
use super::registry::{AGENT_LEVEL_TOOLS, ToolEntry, ToolRegistry, check_fn, handler};
use super::{
    clarify, cronjob, delegate, files, memory, process_tool, session_search, skills, terminal, todo,
};

fn agent_level(name: &'static str, toolset: &str, schema: Value, emoji: &str) -> ToolEntry {
    debug_assert!(AGENT_LEVEL_TOOLS.contains(&name));
    ToolEntry::new(
        name,
        toolset,
        schema,
        handler(move |_ctx: ToolCtx, _args: Value| async move {
            Ok::<_, ToolError>(
                json!({"error": format!("{name} runs inside the agent loop, not through the tool registry")}).to_string(),
            )
        }),
    )
    .with_emoji(emoji)
}

/// Every built-in tool, with default limits.
pub fn builtin_registry() -> ToolRegistry {
    builtin_registry_with(&ToolLimits::default(), &DelegationLimits::default())
}

/// Every built-in tool; schema texts state the given limits.
pub fn builtin_registry_with(limits: &ToolLimits, delegation: &DelegationLimits) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(terminal::entry(limits));
    registry.register(process_tool::entry());
    for entry in files::entries() {
        registry.register(entry);
    }
    registry.register(clarify::entry());
    for entry in skills::entries() {
        registry.register(entry);
    }
    registry.register(cronjob::entry());
    for entry in super::web_entry::entries() {
        registry.register(entry);
    }
    registry.register(super::tts_entry::entry());
    registry.register(agent_level("todo", "todo", todo::schema(), "📋"));
    registry.register(agent_level("memory", "memory", memory::schema(), "🧠"));
    registry.register(
        agent_level(
            "session_search",
            "session_search",
            session_search::schema(),
            "🔍",
        )
        .with_check(check_fn(|ctx: &ToolCtx| ctx.store.is_some())),
    );
    registry.register(agent_level(
        "delegate_task",
        "delegation",
        delegate::schema(delegation),
        "🔀",
    ));
    registry
}
