//! The few Graph API calls the adapter makes, and how Meta's answers map onto the contract's
//! send results. Errors are `{"error": {"message", "type", "code", "error_data": {"details"}}}`
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes>); the
//! codes that mean "too fast" become [`SendErrorKind::RateLimited`] with a wait, so the core
//! waits them out and sends again rather than giving the message up.

use std::time::Duration;

use hermes_adapter::{SendErrorKind, SendResult};
use reqwest::StatusCode;
use serde_json::Value;

use crate::settings::Settings;

/// Meta's code for a free-form message outside the 24-hour customer-service window.
pub const OUTSIDE_WINDOW: i64 = 131_047;

/// An answer from the Graph API that was not a success.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphError {
    pub status: u16,
    pub code: Option<i64>,
    pub message: String,
    pub retry_after: Option<Duration>,
}

impl GraphError {
    /// The contract's reading of this error.
    pub fn into_result(self, to: &str) -> SendResult {
        let code = self.code.unwrap_or_default();
        // How long each rate limit wants: Retry-After when a hop sent one; otherwise the
        // documented pace (pair rate: about one message per 6 s to one user; throughput is
        // per second; application and business-use-case limits reset within the hour and
        // are retried each minute).
        let wait = |default: u64| self.retry_after.unwrap_or(Duration::from_secs(default));
        let kind_and_text = match code {
            131_056 => return SendResult::rate_limited(wait(6)),
            130_429 => return SendResult::rate_limited(wait(1)),
            4 | 80_007 | 613 => return SendResult::rate_limited(wait(60)),
            _ if self.status == 429 => return SendResult::rate_limited(wait(5)),
            OUTSIDE_WINDOW => (
                SendErrorKind::Forbidden,
                format!(
                    "not delivered: {to} is outside WhatsApp's 24-hour customer-service window \
                     (their last message is more than 24 hours old); Meta accepts only approved \
                     templates until they write again (Graph error 131047)"
                ),
            ),
            0 | 10 | 190 | 200..=299 | 131_005 => (
                SendErrorKind::Forbidden,
                format!(
                    "the access token was refused (Graph error {code}): {}",
                    self.message
                ),
            ),
            131_026 | 131_030 => (
                SendErrorKind::NotFound,
                format!(
                    "{to} cannot receive this message (Graph error {code}): {}",
                    self.message
                ),
            ),
            100 | 131_008 | 131_009 | 131_051 => (
                SendErrorKind::BadFormat,
                format!(
                    "Meta refused the message (Graph error {code}): {}",
                    self.message
                ),
            ),
            1 | 2 | 131_000 | 131_016 | 133_004 => (
                SendErrorKind::Transient,
                format!("Graph error {code}: {}", self.message),
            ),
            _ if self.status >= 500 => (
                SendErrorKind::Transient,
                format!("HTTP {}: {}", self.status, self.message),
            ),
            _ => (
                SendErrorKind::Unknown,
                format!(
                    "Graph error {code} (HTTP {}): {}",
                    self.status, self.message
                ),
            ),
        };
        SendResult::failed(kind_and_text.0, kind_and_text.1)
    }
}

/// The Graph API client of one phone number.
#[derive(Clone, Debug)]
pub struct Graph {
    client: reqwest::Client,
    settings: Settings,
}

/// A call's outcome: the JSON answer, or why not.
pub type Answer = Result<Value, Failure>;

#[derive(Debug)]
pub enum Failure {
    Graph(GraphError),
    /// The request may have reached Meta (a timeout, or the connection broke after opening).
    Ambiguous(String),
    /// It never left (the connection could not be opened: refused, DNS).
    Network(String),
}

impl Failure {
    pub fn into_result(self, to: &str) -> SendResult {
        match self {
            Failure::Graph(e) => e.into_result(to),
            Failure::Ambiguous(e) => SendResult::failed(SendErrorKind::Ambiguous, e),
            Failure::Network(e) => SendResult::failed(SendErrorKind::Transient, e),
        }
    }
}

impl Graph {
    pub fn new(settings: Settings) -> Self {
        let client = settings
            .net
            .http_client()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        Self { client, settings }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    fn redact(&self, text: &str) -> String {
        self.settings.access_token.redact(text)
    }

    /// `POST /{version}/{phone-number-id}/messages` with `body`.
    pub async fn post_message(&self, body: &Value) -> Answer {
        let url = self
            .settings
            .graph_url(&format!("{}/messages", self.settings.phone_number_id));
        let request = self.client.post(url).json(body);
        self.call(request).await
    }

    /// `POST /{version}/{phone-number-id}/media` (multipart), answering the media id.
    pub async fn upload(&self, name: &str, mime: &str, bytes: Vec<u8>) -> Result<String, Failure> {
        let part = reqwest::multipart::Part::bytes(bytes)
            .file_name(name.to_owned())
            .mime_str(mime)
            .map_err(|e| Failure::Network(e.to_string()))?;
        let form = reqwest::multipart::Form::new()
            .text("messaging_product", "whatsapp")
            .text("type", mime.to_owned())
            .part("file", part);
        let url = self
            .settings
            .graph_url(&format!("{}/media", self.settings.phone_number_id));
        let answer = self.call(self.client.post(url).multipart(form)).await?;
        answer
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| Failure::Network("the upload answer has no media id".into()))
    }

    /// `GET /{version}/{media-id}` then the short-lived URL it names, both with the token.
    pub async fn download(
        &self,
        media_id: &str,
        max_bytes: usize,
    ) -> Result<(Vec<u8>, String), String> {
        if media_id.is_empty()
            || !media_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            return Err("a malformed media id".into());
        }
        let meta = self
            .call(self.client.get(self.settings.graph_url(media_id)))
            .await
            .map_err(|e| format!("{e:?}"))?;
        let url = meta
            .get("url")
            .and_then(Value::as_str)
            .ok_or("no download URL")?;
        let mime = meta
            .get("mime_type")
            .and_then(Value::as_str)
            .unwrap_or("application/octet-stream")
            .to_owned();
        if let Some(size) = meta.get("file_size").and_then(Value::as_u64)
            && size as usize > max_bytes
        {
            return Err(format!("{size} bytes is over the {max_bytes}-byte limit"));
        }
        let response = self
            .client
            .get(url)
            .bearer_auth(self.settings.access_token.expose())
            .send()
            .await
            .map_err(|e| self.redact(&e.to_string()))?;
        if !response.status().is_success() {
            return Err(format!("the media URL answered {}", response.status()));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.redact(&e.to_string()))?;
        if bytes.len() > max_bytes {
            return Err(format!(
                "{} bytes is over the {max_bytes}-byte limit",
                bytes.len()
            ));
        }
        Ok((bytes.to_vec(), mime))
    }

    async fn call(&self, request: reqwest::RequestBuilder) -> Answer {
        let response = match request
            .bearer_auth(self.settings.access_token.expose())
            .send()
            .await
        {
            Ok(response) => response,
            // Only a connection that never opened proves the request never left; a timeout
            // or a connection broken mid-exchange may follow a message Meta accepted.
            Err(e) if e.is_connect() => {
                return Err(Failure::Network(self.redact(&e.to_string())));
            }
            Err(e) => return Err(Failure::Ambiguous(self.redact(&e.to_string()))),
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status == StatusCode::OK || status.is_success() {
            return Ok(body);
        }
        let error = body.get("error").cloned().unwrap_or_default();
        let details = error
            .get("error_data")
            .and_then(|d| d.get("details"))
            .and_then(Value::as_str);
        let message = details
            .or_else(|| error.get("message").and_then(Value::as_str))
            .unwrap_or("no error text")
            .to_owned();
        Err(Failure::Graph(GraphError {
            status: status.as_u16(),
            code: error
                .get("code")
                .and_then(|c| c.as_i64().or_else(|| c.as_str()?.parse().ok())),
            message: self.redact(&message),
            retry_after,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(status: u16, code: i64) -> GraphError {
        GraphError {
            status,
            code: Some(code),
            message: "m".into(),
            retry_after: None,
        }
    }

    #[test]
    fn meta_codes_map_to_the_contract() {
        assert_eq!(
            error(400, 131_056).into_result("1").retry_after,
            Some(Duration::from_secs(6))
        );
        assert_eq!(
            error(400, 130_429).into_result("1").kind(),
            Some(SendErrorKind::RateLimited)
        );
        let waited = GraphError {
            retry_after: Some(Duration::from_secs(7)),
            ..error(429, 130_429)
        };
        assert_eq!(
            waited.into_result("1").retry_after,
            Some(Duration::from_secs(7))
        );
        let window = error(400, OUTSIDE_WINDOW).into_result("4915");
        assert_eq!(window.kind(), Some(SendErrorKind::Forbidden));
        assert!(window.error.unwrap().1.contains("24-hour"));
        assert_eq!(
            error(401, 190).into_result("1").kind(),
            Some(SendErrorKind::Forbidden)
        );
        assert_eq!(
            error(503, 131_016).into_result("1").kind(),
            Some(SendErrorKind::Transient)
        );
        assert_eq!(
            error(400, 100).into_result("1").kind(),
            Some(SendErrorKind::BadFormat)
        );
    }
}
