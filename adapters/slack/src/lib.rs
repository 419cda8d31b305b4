//! hermesd's Slack adapter: Socket Mode for inbound events (no public URL needed) and the
//! Web API for replies, on our own thin client (reqwest + tokio-tungstenite, rustls/ring).
//!
//! The adapter translates protocol only. Inbound, it gates messages the way the Hermes
//! reference does (mentions, bots, allowed and free-response channels, thread memory),
//! hands each event to the core and acknowledges the envelope only after the core recorded
//! it. Outbound, it performs exactly one Web API attempt per operation and maps Slack's
//! answer onto the core's `SendErrorKind`s; retries, chunking and authorization are the
//! core's.
#![forbid(unsafe_code)]

mod adapter;
mod api;
mod assistant;
mod commands;
mod connection;
mod dead_letter;
mod files;
mod gating;
mod inbound;
mod interactive;
mod lanes;
mod memory;
pub mod mrkdwn;
mod outbound;
mod pending;
mod rich_text;
mod settings;
mod socket_mode;

pub use adapter::{MESSAGE_LIMIT, SlackAdapter};
pub use api::slack_error_kind;
pub use commands::GATEWAY_KNOWN_COMMANDS;
pub use connection::Tunables;
/// The contract's one credential wrapper, re-exported for callers that build settings.
pub use hermes_adapter::Secret;
pub use settings::{AllowBots, DEFAULT_API_BASE_URL, Settings};
