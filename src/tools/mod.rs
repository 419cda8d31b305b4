//! The tool runtime: the registry the agent loop dispatches through, toolsets, the built-in
//! tools (terminal, files, memory, todo, clarify, session search, delegation) and the
//! dangerous-command approval gate, ported from the Python Hermes `tools/` package.
//!
//! Every tool returns a JSON string for the model; no error escapes as anything else (see
//! [`registry::ToolRegistry::dispatch`]). Tools receive their dependencies in a [`ToolCtx`]
//! and never read the process environment.

pub mod ansi;
pub mod approval;
pub mod fnmatch;
