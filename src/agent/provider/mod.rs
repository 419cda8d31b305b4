//! Model providers: our own thin clients for the three API modes (OpenAI-compatible chat
//! completions, Anthropic Messages, OpenAI Responses), streaming or not, behind one
//! [`ModelClient`] that walks the fallback chain.
//!
//! A call flows `ModelClient::complete` → `prepared` (alternation rules, system prompt) →
//! `policy` around `call` → `wire` (per-mode request/parse, in `chat_completions`,
//! `anthropic_messages`, `codex_responses`) → `transport` (HTTP, timeouts, status kinds) and
//! `sse` (event-stream parsing).

mod anthropic_messages;
mod call;
mod chat_completions;
mod client;
mod codex_responses;
mod endpoint;
mod error;
mod mode;
mod models_list;
mod parts;
mod policy;
mod prepared;
mod sampling;
mod settings;
mod sse;
mod transport;
mod types;
mod wire;

pub use anthropic_messages::DEFAULT_MAX_TOKENS as ANTHROPIC_DEFAULT_MAX_TOKENS;
pub use client::{ModelChoice, ModelClient};
pub use endpoint::{Endpoint, EntryError, auxiliary_endpoint};
pub use error::{Attempt, ProviderError};
pub use mode::{ApiMode, KnownProvider, canonical_provider, known_provider, resolve_api_mode};
pub use models_list::{LISTING_TTL, ListingError, unverified_switch_allowed};
pub use settings::HttpSettings;
pub use sse::{SseEvent, SseParser};
pub use types::{FinishReason, ModelReply, ModelRequest, StreamDelta, Usage};
