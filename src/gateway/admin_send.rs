//! `POST /send` on the admin listener: a message from the operator's scripts (`hermesd
//! send`) into a chat, through the running gateway's delivery ledger — so it goes out once,
//! in the chat's order with the replies, waiting out the platform's rate limits — and
//! `GET /send/{id}` to learn how it went, `GET /send/targets` for where it can go.
//!
//! The message is recorded as a delivery obligation (session key `send:<platform>:<chat>`,
//! message ref the caller's idempotency key) and handed to the chat's lane, the path a
//! scheduled job's output takes. The obligation id hashes the key with the text, so a
//! client that retries with the same key finds the same row and nothing is sent twice.
//!
//! Only the operator may call it: every path here needs the admin token (or the API key) as
//! a Bearer token, reads included (see `admin_guard.rs`). `MEDIA:/path` tags in the text
//! are delivered as attachments by the same code that delivers the agent's replies.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;

use super::router::Router as GatewayRouter;
use crate::state::{NewObligation, Obligation};

/// The longest text accepted, in bytes: far above any chat message (the deliverer splits
/// long text into the platform's chunks), far below what would strain the ledger.
pub const MAX_SEND_BYTES: usize = 64 * 1024;
/// The longest idempotency key accepted.
const MAX_KEY_CHARS: usize = 128;
/// The prefix of the session key of every message sent this way.
const SESSION_PREFIX: &str = "send:";

/// The body of `POST /send`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendRequest {
    pub platform: String,
    /// Absent or empty: the platform's home channel.
    #[serde(default)]
    pub chat_id: Option<String>,
    #[serde(default)]
    pub thread_id: Option<String>,
    pub text: String,
    /// Chosen by the client, the same for every retry of one message.
    pub idempotency_key: String,
}

/// Where a request's message goes once it is checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SendTarget {
    pub platform: String,
    pub chat_id: String,
    pub thread_id: Option<String>,
}

/// Why a request is refused; each becomes a status and a sentence.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendRefusal {
    #[error("the message text is empty")]
    EmptyText,
    #[error("the message text is {0} bytes; at most {MAX_SEND_BYTES} are accepted")]
    TooLong(usize),
    #[error(
        "idempotency_key must be 1 to {MAX_KEY_CHARS} characters of letters, digits, '-', '_' \
         or '.'"
    )]
    BadKey,
    #[error("platform '{platform}' is not running in this gateway; running: {}", list(.running))]
    NotRunning {
        platform: String,
        running: Vec<String>,
    },
    #[error(
        "no chat given and {platform} has no home channel; name the chat (--to {platform}:<chat>) \
         or set {upper}_HOME_CHANNEL",
        upper = .platform.to_uppercase()
    )]
    NoHomeChannel { platform: String },
    #[error("{0} must not contain control characters")]
    BadId(&'static str),
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

impl SendRefusal {
    fn status(&self) -> StatusCode {
        match self {
            Self::TooLong(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::NotRunning { .. } => StatusCode::CONFLICT,
            Self::NoHomeChannel { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::EmptyText | Self::BadKey | Self::BadId(_) => StatusCode::BAD_REQUEST,
        }
    }
}

fn trimmed(value: Option<&str>) -> Option<String> {
    value
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// Checks a request against the running platforms and resolves its chat: an absent chat is
/// the platform's home channel (`home`), whose thread applies unless one is given.
pub fn resolve_target(
    request: &SendRequest,
    running: &[String],
    home: impl Fn(&str) -> Option<(String, Option<String>)>,
) -> Result<SendTarget, SendRefusal> {
    if request.text.trim().is_empty() {
        return Err(SendRefusal::EmptyText);
    }
    if request.text.len() > MAX_SEND_BYTES {
        return Err(SendRefusal::TooLong(request.text.len()));
    }
    let key = &request.idempotency_key;
    let key_ok = !key.is_empty()
        && key.chars().count() <= MAX_KEY_CHARS
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !key_ok {
        return Err(SendRefusal::BadKey);
    }
    let platform = request.platform.trim().to_ascii_lowercase();
    if !running.contains(&platform) {
        return Err(SendRefusal::NotRunning {
            platform: request
                .platform
                .chars()
                .filter(|c| !c.is_control())
                .take(64)
                .collect(),
            running: running.to_vec(),
        });
    }
    let thread = trimmed(request.thread_id.as_deref());
    let (chat_id, thread_id) = match trimmed(request.chat_id.as_deref()) {
        Some(chat) => (chat, thread),
        None => {
            let (chat, home_thread) = home(&platform).ok_or(SendRefusal::NoHomeChannel {
                platform: platform.clone(),
            })?;
            (chat, thread.or(home_thread))
        }
    };
    if chat_id.chars().any(char::is_control) {
        return Err(SendRefusal::BadId("chat_id"));
    }
    if thread_id
        .as_deref()
        .is_some_and(|t| t.chars().any(char::is_control))
    {
        return Err(SendRefusal::BadId("thread_id"));
    }
    Ok(SendTarget {
        platform,
        chat_id,
        thread_id,
    })
}

/// What the handlers use: the running gateway (none while it starts).
#[derive(Debug, Clone)]
struct SendState {
    router: Option<Arc<GatewayRouter>>,
}

/// The routes, for the admin listener's guard to wrap (every one needs the admin token:
/// `admin_guard::always_needs_token`).
pub fn routes<S: Clone + Send + Sync + 'static>(router: Option<Arc<GatewayRouter>>) -> Router<S> {
    Router::new()
        .route("/send", post(send))
        .route("/send/targets", get(targets))
        .route("/send/{id}", get(status))
        .with_state(SendState { router })
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

fn not_running() -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the gateway is still starting; try again",
    )
}

/// The running platforms a message can go to: the chat platforms (the webhook platform
/// takes events in; it has no chat of its own to send to).
fn chat_platforms(router: &GatewayRouter) -> Vec<String> {
    let mut names = router.platform_names();
    names.retain(|name| name != hermes_adapter::WEBHOOK_PLATFORM);
    names
}

/// What the client is told about a recorded message: never its text.
fn report(obligation: &Obligation) -> serde_json::Value {
    json!({
        "id": obligation.obligation_id,
        "state": obligation.state.as_str(),
        "platform": obligation.platform,
        "chat_id": obligation.chat_id,
        "thread_id": obligation.thread_id,
        "attempts": obligation.attempts,
        "last_error": obligation.last_error,
    })
}

async fn send(State(state): State<SendState>, body: axum::body::Bytes) -> Response {
    let Some(router) = state.router.clone() else {
        return not_running();
    };
    let request: SendRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("the body is not a send request: {e}"),
            );
        }
    };
    let config = router.live().config.clone();
    let running = chat_platforms(&router);
    let target = match resolve_target(&request, &running, |p| {
        super::cron::home_channel(&config, p)
    }) {
        Ok(target) => target,
        Err(refusal) => {
            let mut body = json!({ "error": refusal.to_string() });
            if let SendRefusal::NotRunning { running, .. } = &refusal {
                body["running"] = json!(running);
            }
            return (refusal.status(), Json(body)).into_response();
        }
    };
    let obligation = NewObligation {
        session_key: format!("{SESSION_PREFIX}{}:{}", target.platform, target.chat_id),
        message_ref: request.idempotency_key.clone(),
        platform: target.platform.clone(),
        chat_id: target.chat_id.clone(),
        thread_id: target.thread_id.clone(),
        content: request.text,
    };
    let store = router.store();
    // A retry of a message already recorded finds its row and is answered with it as it
    // is: it is on its lane or settled, and handing it over again could only repeat work.
    let (id, new) = match store.create_obligation_if_new(obligation).await {
        Ok(created) => created,
        Err(e) => {
            tracing::error!(error = %e, "cannot record a message sent through the admin API");
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the message could not be recorded",
            );
        }
    };
    let repeated = !new;
    if new {
        tracing::info!(platform = %target.platform, chat_id = %target.chat_id,
            obligation_id = %id, "message from the admin API recorded for delivery");
        router.send_recorded(&target.platform, &target.chat_id, vec![id.clone()]);
    }
    let code = if repeated {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let now = match store.get_obligation(&id).await {
        Ok(Some(row)) => report(&row),
        _ => json!({ "id": id, "state": "pending" }),
    };
    let mut body = now;
    body["repeated"] = json!(repeated);
    (code, Json(body)).into_response()
}

/// `GET /send/{id}`: the state of a message sent this way (replies are not shown here).
async fn status(State(state): State<SendState>, Path(id): Path<String>) -> Response {
    let Some(router) = state.router.clone() else {
        return not_running();
    };
    match router.store().get_obligation(&id).await {
        Ok(Some(row)) if row.session_key.starts_with(SESSION_PREFIX) => {
            (StatusCode::OK, Json(report(&row))).into_response()
        }
        Ok(_) => error(
            StatusCode::NOT_FOUND,
            "no message sent through the admin API has this id",
        ),
        Err(e) => {
            tracing::error!(error = %e, "cannot read the delivery ledger");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the ledger cannot be read",
            )
        }
    }
}

/// `GET /send/targets`: the running chat platforms and their home channels.
async fn targets(State(state): State<SendState>) -> Response {
    let Some(router) = state.router.clone() else {
        return not_running();
    };
    let config = router.live().config.clone();
    let platforms: Vec<serde_json::Value> = chat_platforms(&router)
        .into_iter()
        .map(|name| {
            let home = super::cron::home_channel(&config, &name)
                .map(|(chat_id, thread_id)| json!({ "chat_id": chat_id, "thread_id": thread_id }));
            json!({ "platform": name, "home_channel": home })
        })
        .collect();
    (StatusCode::OK, Json(json!({ "platforms": platforms }))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(platform: &str, chat: Option<&str>, thread: Option<&str>) -> SendRequest {
        SendRequest {
            platform: platform.to_owned(),
            chat_id: chat.map(str::to_owned),
            thread_id: thread.map(str::to_owned),
            text: "hello".to_owned(),
            idempotency_key: "k-1".to_owned(),
        }
    }

    fn running() -> Vec<String> {
        vec!["discord".to_owned(), "telegram".to_owned()]
    }

    fn home(platform: &str) -> Option<(String, Option<String>)> {
        (platform == "telegram").then(|| ("-100".to_owned(), Some("7".to_owned())))
    }

    #[test]
    fn a_named_chat_keeps_only_the_thread_given() {
        let target = resolve_target(&request("Telegram", Some("42"), None), &running(), home);
        assert_eq!(
            target,
            Ok(SendTarget {
                platform: "telegram".to_owned(),
                chat_id: "42".to_owned(),
                thread_id: None,
            })
        );
    }

    #[test]
    fn no_chat_is_the_home_channel_and_its_thread_unless_one_is_given() {
        let t = resolve_target(&request("telegram", None, None), &running(), home).unwrap();
        assert_eq!(
            (t.chat_id.as_str(), t.thread_id.as_deref()),
            ("-100", Some("7"))
        );
        let t =
            resolve_target(&request("telegram", Some(" "), Some("9")), &running(), home).unwrap();
        assert_eq!(
            (t.chat_id.as_str(), t.thread_id.as_deref()),
            ("-100", Some("9"))
        );
        assert_eq!(
            resolve_target(&request("discord", None, None), &running(), home),
            Err(SendRefusal::NoHomeChannel {
                platform: "discord".to_owned()
            })
        );
    }

    #[test]
    fn refusals() {
        let refused = |r: SendRequest| resolve_target(&r, &running(), home).unwrap_err();
        let err = refused(request("matrix", Some("1"), None));
        assert!(err.to_string().contains("discord, telegram"), "{err}");
        assert_eq!(err.status(), StatusCode::CONFLICT);
        let mut empty = request("telegram", Some("1"), None);
        empty.text = " \n ".to_owned();
        assert_eq!(refused(empty), SendRefusal::EmptyText);
        let mut long = request("telegram", Some("1"), None);
        long.text = "x".repeat(MAX_SEND_BYTES + 1);
        assert_eq!(refused(long).status(), StatusCode::PAYLOAD_TOO_LARGE);
        for key in ["", "a b", "a/b", &"k".repeat(MAX_KEY_CHARS + 1)] {
            let mut bad = request("telegram", Some("1"), None);
            bad.idempotency_key = key.to_owned();
            assert_eq!(refused(bad), SendRefusal::BadKey, "{key:?}");
        }
        assert_eq!(
            refused(request("telegram", Some("1\n2"), None)),
            SendRefusal::BadId("chat_id")
        );
    }
}
