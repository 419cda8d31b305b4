//! A thin Bot API client: one HTTP POST per method, the `{"ok":..}` envelope decoded into a
//! result or an [`ApiError`] that keeps the HTTP status, Telegram's description and
//! `retry_after`, so every failure can be classified precisely.

mod client;
mod error;
pub mod types;

pub use client::BotApi;
pub use error::ApiError;
