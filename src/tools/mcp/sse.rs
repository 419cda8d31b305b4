//! The legacy HTTP+SSE transport (MCP protocol 2024-11-05, "HTTP with SSE"), which rmcp no
//! longer ships a client for: a long-lived `GET` event stream whose first `endpoint` event
//! names the URL to `POST` each JSON-RPC message to; the server's messages come back as
//! `message` events on the stream
//! (https://modelcontextprotocol.io/specification/2024-11-05/basic/transports#http-with-sse).
//!
//! The stream is parsed by `sse-stream` (the parser rmcp itself uses); requests go through
//! the same rustls/proxy client as Streamable HTTP. Implemented as an rmcp [`Transport`], so
//! the session, cancellation and notifications are rmcp's as for the other transports.

use std::borrow::Cow;
use std::pin::Pin;

use futures_util::{Stream, StreamExt};
use reqwest13::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest13::{Client, Url};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use sse_stream::{Sse, SseStream};

type Events = Pin<Box<dyn Stream<Item = Result<Sse, sse_stream::Error>> + Send>>;

/// Why the SSE session failed.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("{0}")]
    Http(#[from] reqwest13::Error),
    #[error("the server answered {0}")]
    Status(reqwest13::StatusCode),
    #[error("the event stream ended before its `endpoint` event")]
    NoEndpoint,
    #[error("the `endpoint` event names no usable URL: {0}")]
    BadEndpoint(String),
    #[error("cannot encode the message: {0}")]
    Encode(#[from] serde_json::Error),
}

/// One open SSE session.
pub struct SseTransport {
    client: Client,
    headers: HeaderMap,
    /// Where messages are posted (from the `endpoint` event).
    endpoint: Url,
    events: Option<Events>,
}

impl SseTransport {
    /// Opens the event stream at `url` and waits for its `endpoint` event.
    pub async fn connect(client: Client, url: &str, headers: HeaderMap) -> Result<Self, SseError> {
        let base = Url::parse(url).map_err(|e| SseError::BadEndpoint(e.to_string()))?;
        let response = client
            .get(base.clone())
            .headers(headers.clone())
            .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
            .send()
            .await?;
        if !response.status().is_success() {
            return Err(SseError::Status(response.status()));
        }
        let mut events: Events = Box::pin(SseStream::from_bytes_stream(response.bytes_stream()));
        let endpoint = loop {
            match events.next().await {
                Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                    let target = event.data.unwrap_or_default();
                    break base
                        .join(target.trim())
                        .map_err(|e| SseError::BadEndpoint(format!("{target}: {e}")))?;
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Err(SseError::NoEndpoint),
            }
        };
        // Messages go back to the server that opened the stream, never elsewhere: an
        // endpoint on another origin would receive our headers (credentials, often).
        if endpoint.origin() != base.origin() {
            return Err(SseError::BadEndpoint(format!(
                "{endpoint} is not on the origin of {base}"
            )));
        }
        Ok(Self {
            client,
            headers,
            endpoint,
            events: Some(events),
        })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn name() -> Cow<'static, str> {
        "sse".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request = serde_json::to_vec(&item).map(|body| {
            self.client
                .post(self.endpoint.clone())
                .headers(self.headers.clone())
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body)
        });
        async move {
            let response = request?.send().await?;
            // The answer to a message comes on the stream; the POST only says "accepted".
            if response.status().is_success() {
                Ok(())
            } else {
                Err(SseError::Status(response.status()))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let events = self.events.as_mut();
        async move {
            let events = events?;
            loop {
                let event = match events.next().await? {
                    Ok(event) => event,
                    Err(error) => {
                        tracing::warn!(%error, "MCP SSE stream failed");
                        return None;
                    }
                };
                // Unnamed events are `message` events (the SSE default).
                if !matches!(event.event.as_deref(), None | Some("message")) {
                    continue;
                }
                let Some(data) = event.data else { continue };
                match serde_json::from_str(&data) {
                    Ok(message) => return Some(message),
                    Err(error) => {
                        tracing::warn!(%error, "MCP SSE event is not a JSON-RPC message; skipped");
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Dropping the stream closes the connection; the server ends the session.
        self.events = None;
        Ok(())
    }
}
