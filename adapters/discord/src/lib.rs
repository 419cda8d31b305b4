//! The Discord adapter for hermesd.
//!
//! It speaks Discord's gateway (WebSocket) and REST API itself, on tokio-tungstenite and
//! reqwest, rather than through serenity: the gateway URL must come from configuration or
//! `GET /gateway/bot` and never fall back to another host, heartbeat ACKs must feed the
//! core's liveness, and RESUME / re-IDENTIFY must be under our control (ARCHITECTURE.md).
//! Inbound messages pass the reference's guild rules (`gating`) and reach the core as
//! `MessageEvent`s; outbound operations are one REST attempt each.
#![forbid(unsafe_code)]

mod adapter;
mod attachments;
mod backfill;
mod dead_letter;
mod directory;
pub mod gateway;
mod gating;
mod handover;
mod inbound;
mod inner;
mod interactions;
mod markdown;
pub mod model;
mod outbound;
mod place;
pub mod rest;
mod settings;
mod shards;
mod threads;
mod voice;

pub use adapter::DiscordAdapter;
pub use gating::auto_thread_name;
pub use markdown::escape_markdown;
pub use rest::RestError;
pub use settings::{AllowBots, BackfillSettings, Settings, SlashCommand, Token};
