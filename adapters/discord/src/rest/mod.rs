//! The REST client: one HTTP attempt per call against `api_base_url` (a REST proxy shared
//! by several processes or a test fake may stand in for Discord), with Discord's error
//! bodies classified into the core's [`SendErrorKind`]s. Errors never carry the token or
//! request URLs (interaction tokens travel in URLs).

use std::time::Duration;

use hermes_adapter::SendErrorKind;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::model::{Channel, Member, Message, User};

mod errors;
mod limits;

use crate::settings::Token;
use errors::{classify, route_of, transport_error};

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
    /// Attachment downloads: no total deadline of the REST kind (a large file on a slow
    /// link takes longer than any API call should), but a stall between reads ends it.
    downloads: reqwest::Client,
    base: String,
    token: Token,
    limits: std::sync::Arc<limits::Limits>,
}

impl std::fmt::Debug for RestClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestClient")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// A download that receives nothing for this long is abandoned.
const DOWNLOAD_STALL: Duration = Duration::from_secs(30);
/// The most one attachment download may take.
const DOWNLOAD_TOTAL: Duration = Duration::from_secs(600);

/// How long a read keeps waiting out 429s before the error is handed back (a limit
/// that stays for minutes is an outage, not flow control).
const READ_RETRY_BUDGET: Duration = Duration::from_secs(300);

/// Which page of a channel's history to read
/// (<https://discord.com/developers/docs/resources/message#get-channel-messages>).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// The newest messages.
    Latest,
    /// The newest messages older than this id.
    Before(u64),
    /// The oldest messages newer than this id.
    After(u64),
}

/// A file to upload as a multipart attachment.
#[derive(Debug, Clone)]
pub struct Upload {
    pub file_name: String,
    pub bytes: Vec<u8>,
    /// The part's media type (`audio/ogg` for voice messages); `None` lets Discord guess.
    pub content_type: Option<&'static str>,
}

impl RestClient {
    pub fn new(
        net: &hermes_adapter::net::Net,
        base: &str,
        token: Token,
        timeout: Duration,
    ) -> Self {
        let http = net
            .http_client()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .tcp_nodelay(true)
            .user_agent("DiscordBot (https://github.com/hermesd, 0.1) hermesd")
            .build()
            .unwrap_or_default();
        // Attachments come from Discord's CDN through the same proxy and trust as REST.
        let downloads = net
            .http_client()
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .read_timeout(DOWNLOAD_STALL)
            .timeout(DOWNLOAD_TOTAL)
            .tcp_nodelay(true)
            .build()
            .unwrap_or_default();
        Self {
            http,
            downloads,
            base: base.trim_end_matches('/').to_owned(),
            token,
            limits: Default::default(),
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

    /// One call; a read (GET) answered 429 is waited out and sent again, since a read is
    /// safe to repeat and its callers (history scans, channel lookups) have no later retry
    /// of their own: a skipped history page is a missed message. Writes are handed back
    /// as `RateLimited` for the core's delivery retry. Nothing is held while waiting.
    async fn call_raw(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        files: Option<&[Upload]>,
    ) -> Result<Value, RestError> {
        let mut waited = Duration::ZERO;
        loop {
            match self.attempt(method.clone(), path, body, files).await {
                Err(error)
                    if method == Method::GET
                        && error.kind == SendErrorKind::RateLimited
                        && waited < READ_RETRY_BUDGET =>
                {
                    let wait = error.retry_after.unwrap_or(Duration::from_secs(1));
                    tracing::debug!(platform = "discord", route = %error.route, wait_ms = wait.as_millis() as u64, "read rate limited; waiting it out");
                    tokio::time::sleep(wait).await;
                    waited += wait;
                }
                other => return other,
            }
        }
    }

    async fn attempt(
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
                    let mut part = reqwest::multipart::Part::bytes(file.bytes.clone())
                        .file_name(file.file_name.clone());
                    if let Some(media_type) = file.content_type {
                        part = part.mime_str(media_type).map_err(|e| RestError {
                            route: route.clone(),
                            status: None,
                            code: None,
                            message: format!("bad media type: {e}"),
                            kind: SendErrorKind::BadFormat,
                            retry_after: None,
                        })?;
                    }
                    form = form.part(format!("files[{index}]"), part);
                }
                request = request.multipart(form);
            }
            (Some(body), None) => request = request.json(body),
            (None, None) => {}
        }
        let permit = self.limits.permit(&method, path).await;
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                if let Some(permit) = permit {
                    permit.complete(None);
                }
                return Err(transport_error(&route, &method, e));
            }
        };
        let status = response.status();
        let headers = response.headers().clone();
        if let Some(permit) = permit {
            permit.complete(limits::bucket_headers(&headers));
        }
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

    /// `GET /gateway/bot` → the gateway URL and the `session_start_limit` object.
    pub async fn gateway_bot(&self) -> Result<(String, Value), RestError> {
        let value: Value = self.call(Method::GET, "/gateway/bot", None).await?;
        let limit = value["session_start_limit"].clone();
        value["url"]
            .as_str()
            .filter(|url| !url.is_empty())
            .map(|url| (url.to_owned(), limit))
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

    /// `GET /guilds/{guild}/members/{user}` (roles of a history message's author).
    pub async fn get_member(&self, guild_id: &str, user_id: &str) -> Result<Member, RestError> {
        self.call(
            Method::GET,
            &format!("/guilds/{guild_id}/members/{user_id}"),
            None,
        )
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

    /// Up to `limit` (≤ 100) messages of one page of history, newest first.
    pub async fn list_messages(
        &self,
        channel_id: &str,
        limit: usize,
        page: Page,
    ) -> Result<Vec<Message>, RestError> {
        let mut path = format!(
            "/channels/{channel_id}/messages?limit={}",
            limit.clamp(1, 100)
        );
        match page {
            Page::Latest => {}
            Page::Before(id) => path.push_str(&format!("&before={id}")),
            Page::After(id) => path.push_str(&format!("&after={id}")),
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

    /// `PATCH /webhooks/{app}/{token}/messages/@original`: for a deferred component
    /// update, the message the component is on.
    pub async fn edit_original_response(
        &self,
        application_id: &str,
        token: &str,
        body: &Value,
    ) -> Result<(), RestError> {
        let path = format!("/webhooks/{application_id}/{token}/messages/@original");
        self.call_raw(Method::PATCH, &path, Some(body), None)
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
            .downloads
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
