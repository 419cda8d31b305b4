//! Calls to the search and extraction services the operator configured: one error type whose
//! text tells the model what happened (bad key, rate limit, outage, an answer that is not the
//! documented JSON) without echoing keys or long bodies, and no retries (a rate limit is
//! reported at once, never hammered).

use std::time::Duration;

use serde_json::Value;

/// Why a backend call failed; the Display text is the `error` the model reads.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("{service} refused the API key (HTTP {status})")]
    Unauthorized { service: &'static str, status: u16 },
    #[error("{service} is rate-limiting requests (HTTP {status}){}; not retried", retry_hint(.retry_after))]
    RateLimited {
        service: &'static str,
        status: u16,
        retry_after: Option<String>,
    },
    #[error("{service} answered HTTP {status}: {detail}")]
    Status {
        service: &'static str,
        status: u16,
        detail: String,
    },
    #[error("{service} answered something that is not its documented JSON: {detail}")]
    Malformed {
        service: &'static str,
        detail: String,
    },
    #[error("{service} did not answer in time")]
    Timeout { service: &'static str },
    #[error("{service} could not be reached: {detail}")]
    Network {
        service: &'static str,
        detail: String,
    },
}

fn retry_hint(retry_after: &Option<String>) -> String {
    retry_after
        .as_deref()
        .map(|s| format!(", retry after {s}"))
        .unwrap_or_default()
}

/// A client for the configured services (the configured proxy and CA certificates apply).
pub fn backend_client(
    settings: &super::WebSettings,
    timeout: Duration,
) -> Result<reqwest::Client, BackendError> {
    settings
        .net
        .http_client()
        .timeout(settings.timeout.unwrap_or(timeout))
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| BackendError::Network {
            service: "web backend",
            detail: e.to_string(),
        })
}

/// Sends `request` and returns its JSON body, mapping each documented failure.
pub async fn send_json(
    service: &'static str,
    request: reqwest::RequestBuilder,
) -> Result<Value, BackendError> {
    let response = request.send().await.map_err(|e| transport(service, &e))?;
    let status = response.status().as_u16();
    let retry_after = ["retry-after", "x-ratelimit-reset"]
        .iter()
        .find_map(|h| response.headers().get(*h))
        .and_then(|v| v.to_str().ok())
        .map(|v| v.chars().take(40).collect::<String>());
    let body = response.text().await.map_err(|e| transport(service, &e))?;
    match status {
        200..=299 => serde_json::from_str(&body).map_err(|e| BackendError::Malformed {
            service,
            detail: e.to_string(),
        }),
        401 | 403 if service != "SearXNG" => Err(BackendError::Unauthorized { service, status }),
        429 | 432 | 433 => Err(BackendError::RateLimited {
            service,
            status,
            retry_after,
        }),
        _ => Err(BackendError::Status {
            service,
            status,
            detail: detail(&body),
        }),
    }
}

/// The service's own error message (`error`, `message` or `detail`, at any depth: Tavily
/// nests it as `detail.error`, Brave as `error.detail`), cut short and with token shapes
/// masked.
fn detail(body: &str) -> String {
    fn find(value: &Value) -> Option<String> {
        match value {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => ["message", "error", "detail"]
                .iter()
                .find_map(|k| o.get(*k).and_then(find)),
            _ => None,
        }
    }
    let text = serde_json::from_str::<Value>(body)
        .ok()
        .as_ref()
        .and_then(|v| v.as_object().and_then(|_| find(v)))
        .unwrap_or_else(|| body.to_owned());
    let mut short: String = text.chars().take(300).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    crate::logging::mask_token_shapes(&short).into_owned()
}

fn transport(service: &'static str, error: &reqwest::Error) -> BackendError {
    if error.is_timeout() {
        BackendError::Timeout { service }
    } else {
        BackendError::Network {
            service,
            detail: hermes_adapter::net::error_chain(error),
        }
    }
}
