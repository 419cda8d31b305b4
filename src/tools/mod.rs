//! The tool runtime: the registry the agent loop dispatches through, toolsets, the built-in
//! tools (terminal, files, memory, todo, clarify, session search, delegation), the tools of
//! the user's MCP servers (`mcp/`) and the dangerous-command approval gate, ported from the
//! Python Hermes `tools/` package.
//!
//! Every tool returns a JSON string for the model; no error escapes as anything else (see
//! [`registry::ToolRegistry::dispatch`]). Tools receive their dependencies in a [`ToolCtx`]
//! and never read the process environment.

pub mod ansi;
pub mod approval;
pub mod backend;
pub mod builtin;
pub mod clarify;
mod clarify_request;
mod coerce;
pub mod context;
pub mod cronjob;
pub mod delegate;
mod entry;
pub(crate) use crate::process::env;
pub mod error;
pub mod files;
pub mod fnmatch;
pub mod local;
pub mod mcp;
pub mod memory;
pub mod output;
pub mod overlay;
pub mod paths;
pub mod process_registry;
pub mod process_tool;
pub mod registry;
pub mod sensitive;
pub mod session_search;
pub mod skills;
pub mod terminal;
mod terminal_result;
mod terminal_sandboxed;
mod terminal_script;
pub(crate) mod threats;
pub mod timefmt;
pub mod todo;
pub mod toolsets;
pub mod tts;
pub mod tts_entry;
pub mod web;
mod web_entry;

pub use builtin::builtin_registry;
pub use context::{ToolCtx, ToolLimits};
pub use error::ToolError;
pub use overlay::ToolOverlay;
pub use registry::{AGENT_LEVEL_TOOLS, CheckFn, Handler, ToolEntry, ToolRegistry};

/// `{"error": message}` — the Python `tool_error()` helper.
pub fn tool_error(message: impl Into<String>) -> String {
    serde_json::json!({ "error": message.into() }).to_string()
}
