//! The one place that picks a wire format by API mode: request building, reply parsing and
//! stream reading are dispatched from here.

use super::anthropic_messages::{self, AnthropicStream};
use super::chat_completions::{self, ChatStream};
use super::codex_responses::{self, ResponsesStream, bearer_headers};
use super::endpoint::Endpoint;
use super::error::ProviderError;
use super::mode::ApiMode;
use super::parts::ReplyParts;
use super::prepared::Prepared;
use super::sse::SseEvent;
use super::transport::WireRequest;
use super::types::StreamDelta;

pub(crate) fn build(endpoint: &Endpoint, prepared: &Prepared) -> WireRequest {
    let (headers, body) = match endpoint.mode {
        ApiMode::ChatCompletions => (
            bearer_headers(endpoint),
            chat_completions::body(endpoint, prepared),
        ),
        ApiMode::AnthropicMessages => (
            anthropic_messages::headers(endpoint),
            anthropic_messages::body(endpoint, prepared),
        ),
        ApiMode::CodexResponses => (
            bearer_headers(endpoint),
            codex_responses::body(endpoint, prepared),
        ),
    };
    WireRequest {
        url: endpoint.mode.request_url(&endpoint.base_url),
        headers,
        body,
    }
}

pub(crate) fn parse(mode: ApiMode, body: &[u8]) -> Result<ReplyParts, ProviderError> {
    match mode {
        ApiMode::ChatCompletions => chat_completions::parse(body),
        ApiMode::AnthropicMessages => anthropic_messages::parse(body),
        ApiMode::CodexResponses => codex_responses::parse(body),
    }
}

/// The stream reader of each mode.
#[derive(Debug)]
pub(crate) enum StreamReader {
    Chat(ChatStream),
    Anthropic(AnthropicStream),
    Responses(ResponsesStream),
}

impl StreamReader {
    pub fn new(mode: ApiMode) -> Self {
        match mode {
            ApiMode::ChatCompletions => Self::Chat(ChatStream::default()),
            ApiMode::AnthropicMessages => Self::Anthropic(AnthropicStream::default()),
            ApiMode::CodexResponses => Self::Responses(ResponsesStream::default()),
        }
    }

    pub fn event(
        &mut self,
        event: &SseEvent,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<(), ProviderError> {
        match self {
            Self::Chat(reader) => reader.event(event, on_delta),
            Self::Anthropic(reader) => reader.event(event, on_delta),
            Self::Responses(reader) => reader.event(event, on_delta),
        }
    }

    /// The reply is complete; later bytes are ignored.
    pub fn is_done(&self) -> bool {
        match self {
            Self::Chat(reader) => reader.is_done(),
            Self::Anthropic(reader) => reader.is_done(),
            Self::Responses(reader) => reader.is_done(),
        }
    }

    pub fn finish(self) -> Result<ReplyParts, ProviderError> {
        match self {
            Self::Chat(reader) => reader.finish(),
            Self::Anthropic(reader) => reader.finish(),
            Self::Responses(reader) => reader.finish(),
        }
    }
}
