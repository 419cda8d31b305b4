//! HTTP for one model call: send the request, classify a failure status (with `retry-after`),
//! read a JSON body or the chunks of a stream under their timeouts.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::error::{ProviderError, clean_message, error_body_message};
use super::settings::HttpSettings;
use crate::config::Secret;

/// A body larger than this is not a chat reply.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// A request ready to send: where, which headers, what JSON.
#[derive(Debug)]
pub(crate) struct WireRequest {
    pub url: String,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: serde_json::Value,
}

/// A header carrying a credential: marked sensitive so it never shows in debug output.
pub(crate) fn secret_header(name: HeaderName, value: &str) -> Option<(HeaderName, HeaderValue)> {
    let mut value = HeaderValue::from_str(value).ok()?;
    value.set_sensitive(true);
    Some((name, value))
}

/// Sends the request and returns the response once its status is a success; a failure status
/// becomes its error kind. Bounded by the request timeout (up to the response headers).
pub(crate) async fn send(
    client: &reqwest::Client,
    settings: &HttpSettings,
    request: WireRequest,
    key: Option<&Secret>,
) -> Result<reqwest::Response, ProviderError> {
    let mut builder = client.post(&request.url).json(&request.body);
    for (name, value) in request.headers {
        builder = builder.header(name, value);
    }
    let response = tokio::time::timeout(settings.request_timeout, builder.send())
        .await
        .map_err(|_| timeout(settings.request_timeout))?
        .map_err(|error| from_reqwest(&error, settings))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let headers = response.headers().clone();
    // The error body only adds a message; a slow or broken one must not hide the status.
    let body = tokio::time::timeout(Duration::from_secs(10), response.bytes())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    Err(status_error(status.as_u16(), &headers, &body, key))
}

/// Reads a whole (non-streamed) body.
pub(crate) async fn read_body(
    response: reqwest::Response,
    settings: &HttpSettings,
) -> Result<Bytes, ProviderError> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|error| from_reqwest(&error, settings))?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ProviderError::BadResponse(format!(
                "the response body is larger than {MAX_BODY_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(body))
}

/// Whether the server answered with an event stream (a stream request may get plain JSON
/// from servers that ignore `stream: true`).
pub(crate) fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.to_ascii_lowercase().starts_with("text/event-stream"))
}

/// The next chunk of a stream, or `None` at its end; a gap longer than the stall timeout is
/// a `timeout`.
pub(crate) async fn next_chunk(
    chunks: &mut (impl futures_util::Stream<Item = reqwest::Result<Bytes>> + Unpin),
    settings: &HttpSettings,
) -> Result<Option<Bytes>, ProviderError> {
    match tokio::time::timeout(settings.stall_timeout, chunks.next()).await {
        Err(_) => Err(ProviderError::Timeout {
            stalled: true,
            after: settings.stall_timeout,
        }),
        Ok(None) => Ok(None),
        Ok(Some(Err(error))) => Err(from_reqwest(&error, settings)),
        Ok(Some(Ok(chunk))) => Ok(Some(chunk)),
    }
}

pub(crate) fn timeout(after: Duration) -> ProviderError {
    ProviderError::Timeout {
        stalled: false,
        after,
    }
}

/// The error kind of a failure status.
pub(crate) fn status_error(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    key: Option<&Secret>,
) -> ProviderError {
    match status {
        429 => ProviderError::RateLimited {
            retry_after: retry_after(headers, SystemTime::now()),
        },
        401 | 403 => ProviderError::Auth { status },
        408 | 500..=599 => ProviderError::Server { status },
        _ => ProviderError::Rejected {
            status,
            message: clean_message(&error_body_message(body), key),
        },
    }
}

/// How long the server asks us to wait: OpenAI's `retry-after-ms`, else `retry-after` in
/// seconds (fractions accepted) or as an HTTP date.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    if let Some(millis) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Duration::try_from_secs_f64(millis / 1000.0).ok();
    }
    let value = text("retry-after")?;
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A transport failure: connect errors, resets and broken bodies are `connect`; reqwest's own
/// timeouts (the connect timeout) are `timeout`. The URL is left out of the message.
fn from_reqwest(error: &reqwest::Error, settings: &HttpSettings) -> ProviderError {
    if error.is_timeout() {
        return timeout(settings.connect_timeout);
    }
    let mut parts: Vec<String> = Vec::new();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        let text = if parts.is_empty() {
            match current.downcast_ref::<reqwest::Error>() {
                Some(reqwest_error) => reqwest_error_text(reqwest_error),
                None => current.to_string(),
            }
        } else {
            current.to_string()
        };
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        source = current.source();
    }
    ProviderError::Connect(clean_message(&parts.join(": "), None))
}

fn reqwest_error_text(error: &reqwest::Error) -> String {
    if error.is_connect() {
        "cannot connect".to_owned()
    } else if error.is_body() || error.is_decode() {
        "the connection broke while reading the response".to_owned()
    } else {
        "request failed".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let at = |pairs: &[(&'static str, &str)]| retry_after(&headers(pairs), now);
        assert_eq!(at(&[("retry-after", "7")]), Some(Duration::from_secs(7)));
        assert_eq!(
            at(&[("retry-after", "0.5")]),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            at(&[("retry-after-ms", "250"), ("retry-after", "9")]),
            Some(Duration::from_millis(250))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(at(&[("retry-after", &date)]), Some(Duration::from_secs(30)));
        assert_eq!(at(&[("retry-after", "soon")]), None);
        assert_eq!(at(&[("retry-after", "-3")]), None);
        assert_eq!(at(&[]), None);
    }

    #[test]
    fn statuses_map_to_kinds() {
        let none = HeaderMap::new();
        let kind = |status| status_error(status, &none, b"{}", None).kind();
        assert_eq!(kind(429), "rate_limited");
        assert_eq!(kind(401), "auth");
        assert_eq!(kind(403), "auth");
        assert_eq!(kind(500), "server");
        assert_eq!(kind(529), "server");
        assert_eq!(kind(400), "rejected");
        assert_eq!(kind(404), "rejected");
        let key = Secret::new("sk-secret-value");
        let error = status_error(
            400,
            &none,
            br#"{"error":{"message":"bad key sk-secret-value"}}"#,
            Some(&key),
        );
        assert_eq!(error.to_string(), "request refused (HTTP 400): bad key ***");
    }
}
