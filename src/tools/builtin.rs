//! The registry of built-in tools.

use super::context::ToolLimits;
use super::registry::ToolRegistry;
use super::{clarify, files, process_tool, terminal};

/// Every built-in tool, with default limits.
pub fn builtin_registry() -> ToolRegistry {
    builtin_registry_with(&ToolLimits::default())
}

/// Every built-in tool; schema texts state the given limits.
pub fn builtin_registry_with(limits: &ToolLimits) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(terminal::entry(limits));
    registry.register(process_tool::entry());
    for entry in files::entries() {
        registry.register(entry);
    }
    registry.register(clarify::entry());
    registry
}
