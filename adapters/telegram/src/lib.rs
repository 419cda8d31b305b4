//! hermesd's Telegram adapter.
//!
//! It turns Bot API updates into `MessageEvent`s and the core's outbound operations into
//! Bot API calls. Updates arrive by long polling (default) or through a webhook router the
//! core mounts; either way an update is acknowledged to Telegram (offset advanced, or HTTP
//! 200) only after the core recorded the event carrying it. Group gating, split-paste and
//! album merging, MarkdownV2 rendering, attachment download and the command menu are
//! protocol, so they live here; authorization, dedupe, chunking and retries are the core's.
#![forbid(unsafe_code)]

mod adapter;
pub mod api;
mod commands;
mod dead_letter;
mod endpoints;
mod gating;
mod inbound;
mod intake;
mod markdown;
mod media;
mod media_limits;
mod migrations;
mod outbound;
mod pending;
mod polling;
mod settings;
mod webhook;
mod webhook_rules;

pub use adapter::{MESSAGE_LIMIT, TelegramAdapter};
pub use commands::{menu as command_menu, sanitize_name as sanitize_command_name};
pub use endpoints::Endpoints;
pub use gating::{BotIdentity, GENERAL_TOPIC};
/// The contract's one credential wrapper, re-exported for callers that build settings.
pub use hermes_adapter::Secret;
pub use markdown::{
    escape as escape_markdown_v2, strip as strip_markdown_v2, to_markdown_v2, to_plain,
};
pub use settings::{ReplyToMode, Settings, WebhookSettings};
pub use webhook::SECRET_HEADER;
