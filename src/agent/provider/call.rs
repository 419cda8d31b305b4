//! One HTTP call to one endpoint: send, then read a JSON reply or an event stream, under the
//! request and stall timeouts. Retries and fallbacks are the client's business.

use std::pin::pin;

use super::client::HttpSettings;
use super::endpoint::Endpoint;
use super::error::ProviderError;
use super::prepared::Prepared;
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
    if !prepared.stream {
        let body = tokio::time::timeout(settings.request_timeout, async {
            read_body(send(client, settings, request, key).await?, settings).await
        })
        .await
        .map_err(|_| transport::timeout(settings.request_timeout))??;
        return Ok(wire::parse(endpoint.mode, &body)?.into_reply(endpoint));
    }

    let response = send(client, settings, request, key).await?;
    if !is_event_stream(&response) {
        // Some servers ignore `stream: true`; their whole reply is then one delta.
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
        return Ok(parts.into_reply(endpoint));
    }

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
    Ok(reader.finish()?.into_reply(endpoint))
}
