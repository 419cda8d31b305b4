//! The REST client: one HTTP attempt per call against `api_base_url` (a REST proxy shared
//! by several processes or a test fake may stand in for Discord), with Discord's error
//! bodies classified into the core's [`SendErrorKind`]s. Errors never carry the token or
//! request URLs (interaction tokens travel in URLs).

use std::time::Duration;

use hermes_adapter::SendErrorKind;
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::model::{Channel, Message, User};
use crate::settings::Token;

/// A failed REST call, classified.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{route}: {message}")]
pub struct RestError {
    pub route: String,
    pub status: Option<u16>,
    /// Discord's JSON error code (10008 Unknown Message, 50035 Invalid Form Body, ...).
    pub code: Option<u64>,
    pub message: String,
    pub kind: SendErrorKind,
    pub retry_after: Option<Duration>,
}

impl RestError {
    pub fn is_unauthorized(&self) -> bool {
        self.status == Some(401)
    }
}

#[derive(Clone)]
pub struct RestClient {
    http: reqwest::Client,
    base: String,
    token: Token,
}

impl std::fmt::Debug for RestClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestClient")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// A file to upload as a multipart attachment.
#[derive(Debug, Clone)]
pub struct Upload {
    pub file_name: String,
    pub bytes: Vec<u8>,
}

impl RestClient {
    pub fn new(base: &str, token: Token, timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .tcp_nodelay(true)
            .user_agent("DiscordBot (https://github.com/hermesd, 0.1) hermesd")
            .build()
            .unwrap_or_default();
        Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token,
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, RestError> {
        let value = self.call_raw(method, path, body, None).await?;
        serde_json::from_value(value).map_err(|e| RestError {
            route: path.to_owned(),
            status: None,
            code: None,
            message: format!("unexpected response shape: {e}"),
            kind: SendErrorKind::Unknown,
            retry_after: None,
        })
    }

    async fn call_raw(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        files: Option<&[Upload]>,
    ) -> Result<Value, RestError> {
        let route = format!("{method} {}", route_of(path));
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .header("authorization", format!("Bot {}", self.token.expose()));
        match (body, files) {
            (body, Some(files)) => {
                let mut form = reqwest::multipart::Form::new();
                if let Some(body) = body {
                    form = form.text("payload_json", body.to_string());
                }
                for (index, file) in files.iter().enumerate() {
                    let part = reqwest::multipart::Part::bytes(file.bytes.clone())
                        .file_name(file.file_name.clone());
                    form = form.part(format!("files[{index}]"), part);
                }
                request = request.multipart(form);
            }
            (Some(body), None) => request = request.json(body),
            (None, None) => {}
        }
        let response = request
            .send()
            .await
            .map_err(|e| transport_error(&route, &method, e))?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| transport_error(&route, &method, e))?;
        let json: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        if status.is_success() {
            return Ok(json);
        }
        Err(classify(route, status, &headers, &json))
    }

    pub async fn get_me(&self) -> Result<User, RestError> {
        self.call(Method::GET, "/users/@me", None).await
    }

    /// `GET /gateway/bot` → the gateway URL.
    pub async fn gateway_url(&self) -> Result<String, RestError> {
        let value: Value = self.call(Method::GET, "/gateway/bot", None).await?;
        value["url"]
            .as_str()
            .filter(|url| !url.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| RestError {
                route: "GET /gateway/bot".into(),
                status: None,
                code: None,
                message: "the answer has no url".into(),
                kind: SendErrorKind::Unknown,
                retry_after: None,
            })
    }

    pub async fn create_message(
        &self,
        channel_id: &str,
        body: &Value,
        files: &[Upload],
    ) -> Result<Message, RestError> {
        let path = format!("/channels/{channel_id}/messages");
        let value = if files.is_empty() {
            self.call_raw(Method::POST, &path, Some(body), None).await?
        } else {
            self.call_raw(Method::POST, &path, Some(body), Some(files))
                .await?
        };
        decode(&path, value)
    }

    pub async fn edit_message(
        &self,
        channel_id: &str,
        message_id: &str,
        body: &Value,
    ) -> Result<Message, RestError> {
        let path = format!("/channels/{channel_id}/messages/{message_id}");
        self.call(Method::PATCH, &path, Some(body)).await
    }

    pub async fn delete_message(
        &self,
        channel_id: &str,
        message_id: &str,
    ) -> Result<(), RestError> {
        let path = format!("/channels/{channel_id}/messages/{message_id}");
        self.call_raw(Method::DELETE, &path, None, None)
            .await
            .map(drop)
    }

    pub async fn trigger_typing(&self, channel_id: &str) -> Result<(), RestError> {
        let path = format!("/channels/{channel_id}/typing");
        self.call_raw(Method::POST, &path, None, None)
            .await
            .map(drop)
    }

    /// Starts a public thread from a message (the thread gets the message's id).
    pub async fn start_thread(
        &self,
        channel_id: &str,
        message_id: &str,
        name: &str,
    ) -> Result<Channel, RestError> {
        let path = format!("/channels/{channel_id}/messages/{message_id}/threads");
        let body = serde_json::json!({"name": name, "auto_archive_duration": 1440});
        self.call(Method::POST, &path, Some(&body)).await
    }

    pub async fn get_channel(&self, channel_id: &str) -> Result<Channel, RestError> {
        self.call(Method::GET, &format!("/channels/{channel_id}"), None)
            .await
    }

    pub async fn modify_channel(
        &self,
        channel_id: &str,
        body: &Value,
    ) -> Result<Channel, RestError> {
        self.call(
            Method::PATCH,
            &format!("/channels/{channel_id}"),
            Some(body),
        )
        .await
    }

    /// Up to `limit` (≤ 100) messages; with `after`, the oldest ones after that id.
    pub async fn list_messages(
        &self,
        channel_id: &str,
        limit: usize,
        after: Option<u64>,
    ) -> Result<Vec<Message>, RestError> {
        let mut path = format!(
            "/channels/{channel_id}/messages?limit={}",
            limit.clamp(1, 100)
        );
        if let Some(after) = after {
            path.push_str(&format!("&after={after}"));
        }
        let value = self.call_raw(Method::GET, &path, None, None).await?;
        // Skip (rather than fail on) a message the decoder cannot read.
        Ok(value
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|m| serde_json::from_value(m.clone()).ok())
                    .collect()
            })
            .unwrap_or_default())
    }

    pub async fn interaction_callback(
        &self,
        interaction_id: &str,
        token: &str,
        body: &Value,
    ) -> Result<(), RestError> {
        let path = format!("/interactions/{interaction_id}/{token}/callback");
        self.call_raw(Method::POST, &path, Some(body), None)
            .await
            .map(drop)
    }

    pub async fn delete_original_response(
        &self,
        application_id: &str,
        token: &str,
    ) -> Result<(), RestError> {
        let path = format!("/webhooks/{application_id}/{token}/messages/@original");
        self.call_raw(Method::DELETE, &path, None, None)
            .await
            .map(drop)
    }

    pub async fn bulk_overwrite_commands(
        &self,
        application_id: &str,
        commands: &Value,
    ) -> Result<(), RestError> {
        let path = format!("/applications/{application_id}/commands");
        self.call_raw(Method::PUT, &path, Some(commands), None)
            .await
            .map(drop)
    }

    /// Downloads an attachment (no Authorization header: CDN URLs need none, and the
    /// token must never go to another host), refusing more than `cap` bytes (0 = no cap).
    pub async fn download(&self, url: &str, cap: u64) -> Result<Vec<u8>, RestError> {
        let route = "GET attachment".to_owned();
        let mut response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| transport_error(&route, &Method::GET, e))?;
        if !response.status().is_success() {
            return Err(classify(
                route,
                response.status(),
                response.headers(),
                &Value::Null,
            ));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| transport_error(&route, &Method::GET, e))?
        {
            bytes.extend_from_slice(&chunk);
            if cap > 0 && bytes.len() as u64 > cap {
                return Err(RestError {
                    route,
                    status: None,
                    code: None,
                    message: format!("attachment larger than the {cap}-byte cap"),
                    kind: SendErrorKind::TooLong,
                    retry_after: None,
                });
            }
        }
        Ok(bytes)
    }
}

fn decode<T: DeserializeOwned>(path: &str, value: Value) -> Result<T, RestError> {
    serde_json::from_value(value).map_err(|e| RestError {
        route: path.to_owned(),
        status: None,
        code: None,
        message: format!("unexpected response shape: {e}"),
        kind: SendErrorKind::Unknown,
        retry_after: None,
    })
}

/// `/channels/123/messages?limit=5` → `/channels/{id}/messages` (for logs and errors;
/// interaction tokens are replaced too).
fn route_of(path: &str) -> String {
    let path = path.split('?').next().unwrap_or(path);
    let mut out: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        let after_id = out.last() == Some(&"{id}")
            && matches!(
                out.get(out.len().wrapping_sub(2)),
                Some(&"interactions") | Some(&"webhooks")
            );
        if !segment.is_empty() && segment.chars().all(|c| c.is_ascii_digit()) {
            out.push("{id}");
        } else if after_id {
            out.push("{token}");
        } else {
            out.push(segment);
        }
    }
    out.join("/")
}

fn transport_error(route: &str, method: &Method, error: reqwest::Error) -> RestError {
    // Connection refused / DNS / TLS before anything was written: safe to retry. A timeout
    // or a broken connection after the request went out may have been applied.
    let kind = if error.is_connect() || (*method == Method::GET) {
        SendErrorKind::Transient
    } else {
        SendErrorKind::Ambiguous
    };
    RestError {
        route: route.to_owned(),
        status: None,
        code: None,
        message: error.without_url().to_string(),
        kind,
        retry_after: None,
    }
}

fn header_seconds(headers: &reqwest::header::HeaderMap, name: &str) -> Option<f64> {
    headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok()
}

fn classify(
    route: String,
    status: StatusCode,
    headers: &reqwest::header::HeaderMap,
    body: &Value,
) -> RestError {
    let code = body["code"].as_u64();
    let mut message = body["message"].as_str().unwrap_or("").to_owned();
    if message.is_empty() {
        message = status.to_string();
    }
    let detail = body["errors"].to_string();
    let mut retry_after = None;
    let kind = match status.as_u16() {
        429 => {
            let seconds = body["retry_after"]
                .as_f64()
                .or_else(|| header_seconds(headers, "x-ratelimit-reset-after"))
                .or_else(|| header_seconds(headers, "retry-after"))
                .unwrap_or(1.0);
            retry_after = Some(Duration::from_secs_f64(seconds.clamp(0.0, 3600.0)));
            SendErrorKind::RateLimited
        }
        400 if detail.contains("BASE_TYPE_MAX_LENGTH") || detail.contains("fewer in length") => {
            SendErrorKind::TooLong
        }
        400 if code == Some(10008) || code == Some(10003) => SendErrorKind::NotFound,
        400 if code == Some(50035) => SendErrorKind::BadFormat,
        401 | 403 => SendErrorKind::Forbidden,
        404 => SendErrorKind::NotFound,
        500..=599 => SendErrorKind::Transient,
        _ => SendErrorKind::Unknown,
    };
    if detail != "null" {
        message = format!("{message} {detail}");
    }
    RestError {
        route,
        status: Some(status.as_u16()),
        code,
        message: format!("{} {message}", status.as_u16()),
        kind,
        retry_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn routes_hide_ids_and_interaction_tokens() {
        assert_eq!(
            route_of("/channels/12/messages?limit=3"),
            "/channels/{id}/messages"
        );
        assert_eq!(
            route_of("/interactions/55/aW50ZXJhY3Rpb24/callback"),
            "/interactions/{id}/{token}/callback"
        );
    }

    #[test]
    fn discord_errors_map_to_send_error_kinds() {
        let headers = reqwest::header::HeaderMap::new();
        let cases = [
            (
                429,
                json!({"retry_after": 1.5, "global": false}),
                SendErrorKind::RateLimited,
            ),
            (
                400,
                json!({"code": 50035, "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}}}),
                SendErrorKind::TooLong,
            ),
            (
                400,
                json!({"code": 50035, "errors": {"embeds": {}}}),
                SendErrorKind::BadFormat,
            ),
            (403, json!({"code": 50013}), SendErrorKind::Forbidden),
            (404, json!({"code": 10003}), SendErrorKind::NotFound),
            (503, Value::Null, SendErrorKind::Transient),
        ];
        for (status, body, kind) in cases {
            let error = classify(
                "r".into(),
                StatusCode::from_u16(status).unwrap(),
                &headers,
                &body,
            );
            assert_eq!(error.kind, kind, "{status} {body}");
        }
        let limited = classify(
            "r".into(),
            StatusCode::TOO_MANY_REQUESTS,
            &headers,
            &json!({"retry_after": 1.5}),
        );
        assert_eq!(limited.retry_after, Some(Duration::from_millis(1500)));
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "3".parse().unwrap());
        let from_header = classify(
            "r".into(),
            StatusCode::TOO_MANY_REQUESTS,
            &headers,
            &Value::Null,
        );
        assert_eq!(from_header.retry_after, Some(Duration::from_secs(3)));
    }
}
