//! The operator's hooks: commands of their own that hermesd runs at points of its work.
//!
//! - [`shell`]: the `hooks:` block of config.yaml (Hermes's shell hooks) — run around agent
//!   turns and tool calls with a JSON payload on stdin; a `pre_tool_call` hook may block the
//!   call, a `pre_llm_call` hook may add context to the turn ([`wire`] is the protocol).
//! - [`gateway_hooks`]: `$HERMES_HOME/hooks/<name>/HOOK.yaml` handlers told about gateway
//!   events (start-up, sessions, agent turns, slash commands).
//! - [`allowlist`]: the operator's consent, shared with Hermes; nothing runs without it.
//! - [`spawn`]: one run — no shell, no secrets in the environment, a bounded time.
//!
//! Hooks act with the operator's rights, so only the operator can add or approve one: the
//! config file, the hooks directory and the allowlist are out of reach of the agent's file
//! tools (`tools::sensitive`), and no chat command touches them.

pub mod allowlist;
pub mod gateway_hooks;
pub mod shell;
pub mod spawn;
pub mod wire;

pub use gateway_hooks::EventHooks;
pub use shell::{Consent, ShellHooks, consent_of};
pub use wire::{Answer, Payload};
