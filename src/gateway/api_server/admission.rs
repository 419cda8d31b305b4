//! What a chat completion must pass before it may take one of the `max_concurrent_runs`
//! slots: a valid key (checked by the handler first), a body that arrives whole within
//! `body_timeout_seconds` and under the byte limit, and a message list within
//! `max_messages` and `max_request_chars`. Nothing here holds a run slot, so a client that
//! is slow, unauthenticated or oversized cannot keep a paying client out.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;

use super::errors::openai_error;
use crate::config::ApiServerConfig;

/// The per-request bounds, from the validated `api_server` config.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// The whole body must arrive within this long of the request head.
    pub body_timeout: Duration,
    /// The largest body in bytes.
    pub max_body_bytes: usize,
    /// The most entries `messages` may hold.
    pub max_messages: usize,
    /// The most characters of message content (all roles together).
    pub max_chars: usize,
}

impl RequestLimits {
    pub fn from_config(config: &ApiServerConfig) -> Self {
        Self {
            body_timeout: Duration::from_secs(config.body_timeout_seconds),
            max_body_bytes: super::MAX_REQUEST_BYTES,
            max_messages: config.max_messages,
            max_chars: config.max_request_chars,
        }
    }
}

/// Why a request was turned away before it was parsed or run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "The request body did not arrive within {seconds} s. Send the whole body promptly, or \
         ask the operator to raise platforms.api_server.body_timeout_seconds."
    )]
    SlowBody { seconds: u64 },
    #[error("Request body too large (limit {limit} bytes).")]
    BodyTooLarge { limit: usize },
    #[error(
        "The request has {count} messages; this server accepts at most {limit} \
         (platforms.api_server.max_messages). Send fewer messages, e.g. a summary of the \
         older ones."
    )]
    TooManyMessages { count: usize, limit: usize },
    #[error(
        "The messages hold {count} characters; this server accepts at most {limit} per request \
         (platforms.api_server.max_request_chars). Shorten or summarise the conversation."
    )]
    TooManyChars { count: usize, limit: usize },
    #[error("The request body could not be read: the connection failed while it was sent.")]
    BodyBroken,
}

impl Refusal {
    /// The OpenAI error envelope for this refusal.
    pub fn response(&self) -> Response {
        let (status, code) = match self {
            Self::SlowBody { .. } => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            Self::BodyTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
            Self::TooManyMessages { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "too_many_messages"),
            Self::TooManyChars { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "request_too_long"),
            Self::BodyBroken => (StatusCode::BAD_REQUEST, "body_unreadable"),
        };
        let param = matches!(
            self,
            Self::TooManyMessages { .. } | Self::TooManyChars { .. }
        )
        .then_some("messages");
        openai_error(
            status,
            &self.to_string(),
            "invalid_request_error",
            param,
            Some(code),
        )
    }
}

/// Refuses at once a body whose announced `Content-Length` is over the limit: there is no
/// point waiting for it.
pub fn check_declared_length(headers: &HeaderMap, limits: &RequestLimits) -> Result<(), Refusal> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(length) if length > limits.max_body_bytes as u64 => Err(Refusal::BodyTooLarge {
            limit: limits.max_body_bytes,
        }),
        _ => Ok(()),
    }
}

/// Reads the whole body, refusing one that is too slow or too large. The size is checked
/// as the bytes come, so an oversized body is refused without being held in memory.
pub async fn read_body(body: Body, limits: &RequestLimits) -> Result<Bytes, Refusal> {
    let collect = async {
        let mut stream = body.into_data_stream();
        let mut collected = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|_| Refusal::BodyBroken)?;
            if collected.len() + chunk.len() > limits.max_body_bytes {
                return Err(Refusal::BodyTooLarge {
                    limit: limits.max_body_bytes,
                });
            }
            collected.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(collected))
    };
    match tokio::time::timeout(limits.body_timeout, collect).await {
        Ok(result) => result,
        Err(_) => Err(Refusal::SlowBody {
            seconds: limits.body_timeout.as_secs(),
        }),
    }
}

/// Logs a refusal for the operator (a client mistake, so a warning, not an error).
pub fn log_refusal(refusal: &Refusal) {
    let reason = match refusal {
        Refusal::SlowBody { .. } => "body_timeout",
        Refusal::BodyTooLarge { .. } => "body_too_large",
        Refusal::TooManyMessages { .. } => "max_messages",
        Refusal::TooManyChars { .. } => "max_request_chars",
        Refusal::BodyBroken => "body_unreadable",
    };
    tracing::warn!(reason, "API server refused a chat completion: {refusal}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_body_bytes: usize) -> RequestLimits {
        RequestLimits {
            body_timeout: Duration::from_millis(200),
            max_body_bytes,
            max_messages: 10,
            max_chars: 100,
        }
    }

    #[test]
    fn an_announced_length_over_the_limit_is_refused_before_reading() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, "6".parse().unwrap());
        assert_eq!(
            check_declared_length(&headers, &limits(5)),
            Err(Refusal::BodyTooLarge { limit: 5 })
        );
        headers.insert(header::CONTENT_LENGTH, "5".parse().unwrap());
        assert_eq!(check_declared_length(&headers, &limits(5)), Ok(()));
    }

    #[tokio::test]
    async fn a_body_under_the_limit_is_read_whole() {
        let body = read_body(Body::from("hello"), &limits(5)).await;
        assert_eq!(body.as_deref(), Ok(&b"hello"[..]));
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused() {
        let body = read_body(Body::from("hello!"), &limits(5)).await;
        assert_eq!(body, Err(Refusal::BodyTooLarge { limit: 5 }));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_ends_is_refused_after_the_timeout() {
        let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
        sender.send(Ok(Bytes::from_static(b"{"))).await.unwrap();
        let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|item| (item, receiver))
        });
        let body = read_body(Body::from_stream(stream), &limits(1000)).await;
        assert_eq!(body, Err(Refusal::SlowBody { seconds: 0 }));
        drop(sender);
    }

    #[test]
    fn refusals_name_the_key_that_would_allow_the_request() {
        let text = Refusal::TooManyMessages {
            count: 11,
            limit: 10,
        }
        .to_string();
        assert!(text.contains("platforms.api_server.max_messages"), "{text}");
        let text = Refusal::TooManyChars {
            count: 101,
            limit: 100,
        }
        .to_string();
        assert!(
            text.contains("platforms.api_server.max_request_chars"),
            "{text}"
        );
    }
}
