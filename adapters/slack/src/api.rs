//! A thin Slack Web API client on reqwest: one POST per call, Bearer auth, and every
//! failure classified once ([`ApiError`]) so sends map to the core's `SendErrorKind`s.

use std::time::Duration;

use hermes_adapter::{SendErrorKind, SendResult};
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use serde_json::Value;

use hermes_adapter::Secret;

/// Bound on one Web API call: short enough that a hung request is reported (as
/// ambiguous) rather than stalling a turn. File transfers have their own bound.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on one file download or upload: a large file on a slow link takes minutes, and an
/// upload cut short by the Web API bound would fail as ambiguous after it was sent.
pub const TRANSFER_TIMEOUT: Duration = Duration::from_secs(600);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a Web API call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// HTTP 429 or `ok:false, error:ratelimited`.
    #[error("rate limited (retry after {retry_after:?})")]
    RateLimited { retry_after: Option<Duration> },
    /// `ok:false` with Slack's error code.
    #[error("slack error {0}")]
    Slack(String),
    /// A non-success HTTP status.
    #[error("http status {0}")]
    Status(u16),
    /// The request never reached Slack (connection refused, DNS, TLS).
    #[error("connection failed: {0}")]
    Connect(String),
    /// The request was written but no answer arrived (timeout, reset, garbled body).
    #[error("no answer after sending: {0}")]
    Ambiguous(String),
}

/// Slack's error codes for a token that will never work.
const AUTH_ERRORS: [&str; 6] = [
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "not_allowed_token_type",
];

impl ApiError {
    /// A bad or revoked token: retrying cannot help.
    pub fn is_auth_failure(&self) -> bool {
        matches!(self, ApiError::Slack(code) if AUTH_ERRORS.contains(&code.as_str()))
    }

    pub fn kind(&self) -> SendErrorKind {
        match self {
            ApiError::RateLimited { .. } => SendErrorKind::RateLimited,
            ApiError::Slack(code) => slack_error_kind(code),
            ApiError::Status(413) => SendErrorKind::TooLong,
            ApiError::Status(401 | 403) => SendErrorKind::Forbidden,
            ApiError::Status(404) => SendErrorKind::NotFound,
            ApiError::Status(s) if *s >= 500 => SendErrorKind::Transient,
            ApiError::Status(_) => SendErrorKind::Unknown,
            ApiError::Connect(_) => SendErrorKind::Transient,
            ApiError::Ambiguous(_) => SendErrorKind::Ambiguous,
        }
    }

    pub fn into_send_result(self) -> SendResult {
        let mut result = SendResult::failed(self.kind(), self.to_string());
        if let ApiError::RateLimited { retry_after } = self {
            result.retry_after = retry_after;
        }
        result
    }
}

/// Maps an `ok:false` code to what the core needs to know.
pub fn slack_error_kind(code: &str) -> SendErrorKind {
    match code {
        "msg_too_long" | "msg_blocks_too_long" => SendErrorKind::TooLong,
        "channel_not_found" | "thread_not_found" | "message_not_found" | "user_not_found"
        | "file_not_found" => SendErrorKind::NotFound,
        "not_in_channel"
        | "is_archived"
        | "channel_is_archived"
        | "restricted_action"
        | "cant_update_message"
        | "cant_delete_message"
        | "edit_window_closed"
        | "missing_scope"
        | "ekm_access_denied"
        | "team_access_not_granted" => SendErrorKind::Forbidden,
        code if AUTH_ERRORS.contains(&code) => SendErrorKind::Forbidden,
        "ratelimited" | "rate_limited" => SendErrorKind::RateLimited,
        "invalid_blocks"
        | "invalid_blocks_format"
        | "invalid_attachments"
        | "no_text"
        | "invalid_arguments"
        | "too_many_attachments"
        | "markdown_text_conflict" => SendErrorKind::BadFormat,
        "internal_error" | "fatal_error" | "service_unavailable" | "request_timeout" => {
            SendErrorKind::Transient
        }
        _ => SendErrorKind::Unknown,
    }
}

/// Which token a call carries.
#[derive(Debug, Clone, Copy)]
pub enum Token {
    Bot,
    App,
}

/// The Web API client shared by the socket loop and outbound sends.
#[derive(Debug, Clone)]
pub struct WebApi {
    http: reqwest::Client,
    net: hermes_adapter::net::Net,
    base: String,
    bot_token: Secret,
    app_token: Secret,
    request_timeout: Duration,
    transfer_timeout: Duration,
}

pub(crate) fn classify(error: reqwest::Error) -> ApiError {
    // reqwest's Display never includes headers, so the Bearer token cannot leak here.
    let connect = error.is_connect();
    // The whole chain: the reason (a refused certificate, a refused CONNECT) is at its end.
    let text = hermes_adapter::net::error_chain(&error.without_url());
    if connect {
        ApiError::Connect(text)
    } else {
        ApiError::Ambiguous(text)
    }
}

fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let value = response.headers().get(RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

impl WebApi {
    pub fn new(
        net: &hermes_adapter::net::Net,
        base: &str,
        bot_token: Secret,
        app_token: Secret,
    ) -> Self {
        let http = net
            .http_client()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .build()
            .expect("reqwest client with rustls");
        Self {
            http,
            net: net.clone(),
            base: base.trim_end_matches('/').to_owned(),
            bot_token,
            app_token,
            request_timeout: REQUEST_TIMEOUT,
            transfer_timeout: TRANSFER_TIMEOUT,
        }
    }

    /// The same client with other bounds for Web API calls and for file transfers.
    pub fn with_timeouts(mut self, request: Duration, transfer: Duration) -> Self {
        self.request_timeout = request;
        self.transfer_timeout = transfer;
        self
    }

    /// Proxies and TLS trust, for the Socket Mode connection.
    pub fn net(&self) -> &hermes_adapter::net::Net {
        &self.net
    }

    /// A GET (download) or POST (upload) of file bytes, bounded by the transfer timeout
    /// rather than the Web API one.
    pub fn transfer(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, url)
            .timeout(self.transfer_timeout)
            .bearer_auth(self.bot_token.expose())
    }

    fn request(&self, method: &str, token: Token) -> reqwest::RequestBuilder {
        let token = match token {
            Token::Bot => &self.bot_token,
            Token::App => &self.app_token,
        };
        self.http
            .post(format!("{}/{method}", self.base))
            .timeout(self.request_timeout)
            .bearer_auth(token.expose())
    }

    /// Calls `method` with a JSON body.
    pub async fn call(&self, method: &str, token: Token, body: &Value) -> Result<Value, ApiError> {
        let request = self
            .request(method, token)
            .header(CONTENT_TYPE, "application/json; charset=utf-8")
            .body(body.to_string());
        self.finish(request).await
    }

    /// Calls `method` with form fields (methods such as `files.getUploadURLExternal` accept
    /// no JSON).
    pub async fn call_form(
        &self,
        method: &str,
        fields: &[(&str, String)],
    ) -> Result<Value, ApiError> {
        let request = self.request(method, Token::Bot).form(fields);
        self.finish(request).await
    }

    async fn finish(&self, request: reqwest::RequestBuilder) -> Result<Value, ApiError> {
        let response = request.send().await.map_err(classify)?;
        let status = response.status();
        if status.as_u16() == 429 {
            return Err(ApiError::RateLimited {
                retry_after: retry_after(&response),
            });
        }
        if !status.is_success() {
            return Err(ApiError::Status(status.as_u16()));
        }
        let after = retry_after(&response);
        let body: Value = response.json().await.map_err(classify)?;
        if body.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(body);
        }
        let code = body
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown_error")
            .to_owned();
        if slack_error_kind(&code) == SendErrorKind::RateLimited {
            return Err(ApiError::RateLimited { retry_after: after });
        }
        Err(ApiError::Slack(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_false_codes_map_to_kinds() {
        let table = [
            ("msg_too_long", SendErrorKind::TooLong),
            ("channel_not_found", SendErrorKind::NotFound),
            ("thread_not_found", SendErrorKind::NotFound),
            ("not_in_channel", SendErrorKind::Forbidden),
            ("is_archived", SendErrorKind::Forbidden),
            ("ratelimited", SendErrorKind::RateLimited),
            ("invalid_blocks", SendErrorKind::BadFormat),
            ("invalid_auth", SendErrorKind::Forbidden),
            ("internal_error", SendErrorKind::Transient),
            ("something_new", SendErrorKind::Unknown),
        ];
        for (code, kind) in table {
            assert_eq!(slack_error_kind(code), kind, "{code}");
        }
    }
}
