//! One HTTP call to one endpoint: send, then read a JSON reply or an event stream, under the
//! request and stall timeouts. Retries and fallbacks are the client's business.

use std::pin::pin;

use super::endpoint::Endpoint;
use super::error::ProviderError;
use super::parts::ReplyParts;
use super::prepared::Prepared;
use super::settings::HttpSettings;
use super::sse::SseParser;
use super::transport::{self, is_event_stream, next_chunk, read_body, send};
use super::types::{ModelReply, StreamDelta};
use super::wire::{self, StreamReader};

pub(crate) async fn call_endpoint(
    client: &reqwest::Client,
    settings: &HttpSettings,
    endpoint: &Endpoint,
    prepared: &Prepared<'_>,
    on_delta: &mut (dyn FnMut(StreamDelta) + Send),
) -> Result<ModelReply, ProviderError> {
    let request = wire::build(endpoint, prepared);
    let key = endpoint.api_key.as_ref();
    let parts = if prepared.stream {
        // The request timeout covers the wait for the headers; then the stall timeout rules.
        let response = send(client, settings, request, key).await?;
        read_reply(response, settings, endpoint, on_delta).await?
    } else {
        // Nothing is streamed to the caller: some proxies answer with a stream anyway.
        let mut ignore = |_: StreamDelta| {};
        tokio::time::timeout(settings.request_timeout, async {
            let response = send(client, settings, request, key).await?;
            read_reply(response, settings, endpoint, &mut ignore).await
        })
        .await
        .map_err(|_| transport::timeout(settings.request_timeout))??
    };
    Ok(parts.into_reply(endpoint))
}

/// Reads whichever the server sent: an event stream (deltas to `on_delta`) or one JSON body
/// (from servers that ignore `stream: true`; its text then arrives as one delta).
async fn read_reply(
    response: reqwest::Response,
    settings: &HttpSettings,
    endpoint: &Endpoint,
    on_delta: &mut (dyn FnMut(StreamDelta) + Send),
) -> Result<ReplyParts, ProviderError> {
    if is_event_stream(&response) {
        return read_events(response, settings, endpoint, on_delta).await;
    }
    let body = tokio::time::timeout(settings.request_timeout, read_body(response, settings))
        .await
        .map_err(|_| transport::timeout(settings.request_timeout))??;
    let parts = wire::parse(endpoint.mode, &body)?;
    if !parts.reasoning.is_empty() {
        on_delta(StreamDelta::Reasoning(parts.reasoning.clone()));
    }
    if !parts.content.is_empty() {
        on_delta(StreamDelta::Text(parts.content.clone()));
    }
    Ok(parts)
}

async fn read_events(
    response: reqwest::Response,
    settings: &HttpSettings,
    endpoint: &Endpoint,
    on_delta: &mut (dyn FnMut(StreamDelta) + Send),
) -> Result<ReplyParts, ProviderError> {
    let mut reader = StreamReader::new(endpoint.mode);
    let mut parser = SseParser::default();
    let mut chunks = pin!(response.bytes_stream());
    while !reader.is_done() {
        let Some(chunk) = next_chunk(&mut chunks, settings).await? else {
            if let Some(event) = std::mem::take(&mut parser).finish() {
                reader.event(&event, on_delta)?;
            }
            break;
        };
        let events = parser
            .push(&chunk)
            .map_err(|error| ProviderError::BadResponse(error.to_string()))?;
        for event in events {
            reader.event(&event, on_delta)?;
            if reader.is_done() {
                break;
            }
        }
    }
    reader.finish()
}
