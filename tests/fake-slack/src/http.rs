//! The fake's HTTP side: Web API methods (`POST /api/<method>`), file downloads, upload
//! URLs and interaction `response_url`s, with Bearer token checks and queued faults.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::serve::ListenerExt;
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::records::{ApiCall, Posted};
use crate::state::{Fault, Inner, Shared};
use crate::{BOT_ID, BOT_USER_ID, TEAM_ID};

/// Slack's documented ceiling for `chat.postMessage` text.
const SLACK_TEXT_LIMIT: usize = 40_000;

pub(crate) fn spawn_server(listener: TcpListener, shared: Arc<Shared>, stop: CancellationToken) {
    let app = Router::new()
        .route("/api/{method}", any(api))
        .route("/link/", get(socket_upgrade))
        .route("/files/{id}/{name}", get(download))
        .route("/upload/{id}", post(upload))
        .route("/response/{id}", post(response_url))
        .fallback(unexpected)
        .with_state(shared);
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
    });
}

/// Why Slack refuses a message's text (`chat.postMessage`, `chat.update`): over the
/// 40,000-character ceiling (`msg_too_long`), or neither text nor blocks (`no_text`).
fn text_refused(call: &ApiCall) -> Option<&'static str> {
    let text = call.str("text").unwrap_or("");
    if text.chars().count() > SLACK_TEXT_LIMIT {
        Some("msg_too_long")
    } else if text.is_empty() && call.body.get("blocks").is_none() {
        Some("no_text")
    } else {
        None
    }
}

/// The app's own stored message that `call` names (`channel` + `ts`) with its key, or
/// Slack's error code: `message_not_found`, or `not_ours` for someone else's message.
fn own_message<'i>(
    inner: &'i mut Inner,
    call: &ApiCall,
    not_ours: &'static str,
) -> Result<(String, &'i mut Value), &'static str> {
    let key = format!(
        "{}:{}",
        call.str("channel").unwrap_or(""),
        call.str("ts").unwrap_or("")
    );
    let message = inner.messages.get_mut(&key).ok_or("message_not_found")?;
    if message.get("bot_id").and_then(Value::as_str) != Some(BOT_ID) {
        return Err(not_ours);
    }
    Ok((key, message))
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    value.strip_prefix("Bearer ").map(str::to_owned)
}

fn parse_body(content_type: &str, body: &Bytes, query: HashMap<String, String>) -> Value {
    let mut fields: Map<String, Value> = query
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    if content_type.starts_with("application/json") {
        if let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) {
            fields.extend(map);
        }
    } else {
        for (k, v) in form_urlencoded::parse(body) {
            fields.insert(k.into_owned(), Value::String(v.into_owned()));
        }
    }
    Value::Object(fields)
}

fn slack_error(error: &str) -> Response {
    axum::Json(json!({"ok": false, "error": error})).into_response()
}

async fn api(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let call = ApiCall {
        method: method.clone(),
        token: bearer(&headers),
        body: parse_body(&content_type, &body, query),
        content_type,
        at: std::time::Instant::now(),
    };
    let fault = {
        let mut inner = shared.lock();
        inner.records.calls.push(call.clone());
        let fault = inner.faults.get_mut(&method).and_then(|q| q.pop_front());
        if fault
            .as_ref()
            .is_some_and(|f| !matches!(f, Fault::Delay(_)))
        {
            let index = inner.records.calls.len() - 1;
            inner.records.faulted.push(index);
        }
        fault
    };
    match fault {
        Some(Fault::RateLimited { retry_after_secs }) => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, retry_after_secs.to_string())],
                axum::Json(json!({"ok": false, "error": "ratelimited"})),
            )
                .into_response();
        }
        Some(Fault::Error(error)) => return slack_error(&error),
        Some(Fault::Status(status)) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return (status, "fake failure").into_response();
        }
        Some(Fault::Delay(delay)) => tokio::time::sleep(delay).await,
        None => {}
    }
    let expected = if method == "apps.connections.open" {
        &shared.tokens.app
    } else {
        &shared.tokens.bot
    };
    match &call.token {
        None => return slack_error("not_authed"),
        Some(token) if token != expected => return slack_error("invalid_auth"),
        Some(_) => {}
    }
    answer(&shared, &call)
}

fn answer(shared: &Shared, call: &ApiCall) -> Response {
    let ok = |extra: Value| {
        let mut body = json!({"ok": true});
        if let (Value::Object(body), Value::Object(extra)) = (&mut body, extra) {
            body.extend(extra);
        }
        axum::Json(body).into_response()
    };
    match call.method.as_str() {
        "auth.test" => ok(json!({
            "url": "https://fake.slack.com/", "team": "Fake", "user": "hermes",
            "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID,
        })),
        "apps.connections.open" => {
            let mut inner = shared.lock();
            if let Some(error) = inner.refuse_connections.clone() {
                return slack_error(&error);
            }
            let url = match inner.socket_url_override.clone() {
                Some(url) => url,
                None => format!("ws://{}/link/?ticket={}", shared.addr, inner.next_id()),
            };
            ok(json!({"url": url}))
        }
        "chat.postMessage" => {
            let Some(channel) = call.str("channel").map(str::to_owned) else {
                return slack_error("channel_not_found");
            };
            let text = call.str("text").unwrap_or("");
            if let Some(error) = text_refused(call) {
                return slack_error(error);
            }
            let mut inner = shared.lock();
            let ts = inner.next_ts();
            let mut message = json!({"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID,
                "text": text, "ts": ts, "channel": channel});
            if let Some(thread_ts) = call.str("thread_ts") {
                message["thread_ts"] = json!(thread_ts);
            }
            inner
                .messages
                .insert(format!("{channel}:{ts}"), message.clone());
            inner.records.posted.push(Posted {
                channel: channel.clone(),
                text: text.to_owned(),
                thread_ts: call.str("thread_ts").map(str::to_owned),
                ts: ts.clone(),
                blocks: call.body.get("blocks").cloned(),
                at: std::time::Instant::now(),
            });
            drop(inner);
            ok(json!({"channel": channel, "ts": ts, "message": message}))
        }
        // <https://api.slack.com/methods/chat.update>: edits a message the app posted
        // (`message_not_found` for none, `cant_update_message` for someone else's); the new
        // text has the same ceiling as a post (`msg_too_long`) and text or blocks are
        // required (`no_text`). Calling it twice with the same text is harmless.
        "chat.update" => {
            let text = call.str("text").unwrap_or("");
            if let Some(error) = text_refused(call) {
                return slack_error(error);
            }
            let mut inner = shared.lock();
            let message = match own_message(&mut inner, call, "cant_update_message") {
                Ok((_, message)) => message,
                Err(error) => return slack_error(error),
            };
            message["text"] = json!(text);
            if let Some(blocks) = call.body.get("blocks") {
                message["blocks"] = blocks.clone();
            }
            drop(inner);
            ok(json!({"channel": call.str("channel"), "ts": call.str("ts"), "text": text}))
        }
        // <https://api.slack.com/methods/chat.delete>: removes a message the app posted
        // (`message_not_found`, `cant_delete_message`).
        "chat.delete" => {
            let mut inner = shared.lock();
            let key = match own_message(&mut inner, call, "cant_delete_message") {
                Ok((key, _)) => key,
                Err(error) => return slack_error(error),
            };
            inner.messages.remove(&key);
            drop(inner);
            ok(json!({"channel": call.str("channel"), "ts": call.str("ts")}))
        }
        "reactions.add" | "reactions.remove" => ok(json!({})),
        // <https://api.slack.com/methods/assistant.threads.setStatus>,
        // <https://api.slack.com/methods/assistant.threads.setTitle>: `channel_id` and
        // `thread_ts` name the assistant thread; `status` / `title` are required.
        "assistant.threads.setStatus" | "assistant.threads.setTitle" => {
            let field = if call.method.ends_with("setStatus") {
                "status"
            } else {
                "title"
            };
            if call.str("channel_id").is_none()
                || call.str("thread_ts").is_none()
                || call.str(field).is_none()
            {
                return slack_error("invalid_arguments");
            }
            ok(json!({}))
        }
        // <https://api.slack.com/methods/assistant.threads.setSuggestedPrompts>: up to four
        // prompts, each with a `title` and the `message` sent when it is clicked.
        "assistant.threads.setSuggestedPrompts" => {
            let prompts = call.body.get("prompts").and_then(Value::as_array);
            let valid = call.str("channel_id").is_some()
                && call.str("thread_ts").is_some()
                && prompts.is_some_and(|p| {
                    (1..=4).contains(&p.len())
                        && p.iter().all(|p| {
                            p.get("title").and_then(Value::as_str).is_some()
                                && p.get("message").and_then(Value::as_str).is_some()
                        })
                });
            if !valid {
                return slack_error("invalid_arguments");
            }
            ok(json!({}))
        }
        "conversations.replies" => {
            let key = format!(
                "{}:{}",
                call.str("channel").unwrap_or(""),
                call.str("ts").unwrap_or("")
            );
            match shared.peek().messages.get(&key).cloned() {
                Some(parent) => ok(json!({"messages": [parent], "has_more": false})),
                None => slack_error("thread_not_found"),
            }
        }
        "files.info" => {
            let id = call.str("file").unwrap_or("");
            match shared.peek().file_objects.get(id).cloned() {
                Some(file) => ok(json!({"file": file})),
                None => slack_error("file_not_found"),
            }
        }
        "users.info" => {
            let id = call.str("user").unwrap_or("").to_owned();
            let display = shared
                .peek()
                .user_names
                .get(&id)
                .cloned()
                .unwrap_or_default();
            ok(
                json!({"user": {"id": id, "name": id.to_lowercase(), "real_name": format!("User {id}"),
                "profile": {"display_name": display, "real_name": format!("User {id}")}}}),
            )
        }
        "files.getUploadURLExternal" => {
            let id = format!("F{:04}", shared.lock().next_id());
            ok(json!({
                "upload_url": format!("http://{}/upload/{id}", shared.addr), "file_id": id,
            }))
        }
        "files.completeUploadExternal" => {
            let files = call.body.get("files").cloned().unwrap_or(Value::Null);
            // The form encoding carries `files` as a JSON string.
            let files = match files {
                Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::Null),
                other => other,
            };
            ok(json!({"files": files}))
        }
        other => {
            shared
                .lock()
                .records
                .unexpected
                .push(format!("api {other}"));
            slack_error("unknown_method")
        }
    }
}

async fn socket_upgrade(State(shared): State<Arc<Shared>>, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |socket| crate::socket::serve(shared, socket))
}

async fn download(
    State(shared): State<Arc<Shared>>,
    Path((id, _name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let token = bearer(&headers);
    let fault = {
        let mut inner = shared.lock();
        inner.records.calls.push(ApiCall {
            method: "file.download".into(),
            token: token.clone(),
            body: json!({"id": id}),
            content_type: String::new(),
            at: std::time::Instant::now(),
        });
        inner
            .faults
            .get_mut("file.download")
            .and_then(|q| q.pop_front())
    };
    // A slow file host (a large file, a slow link): the answer starts after the delay.
    match fault {
        Some(Fault::Delay(delay)) => tokio::time::sleep(delay).await,
        // A file host failing: any HTTP server may answer 5xx
        // (<https://www.rfc-editor.org/rfc/rfc9110#section-15.6>).
        Some(Fault::Status(status)) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return (status, "fake failure").into_response();
        }
        _ => {}
    }
    if token.as_deref() != Some(shared.tokens.bot.as_str()) {
        // Slack answers an unauthenticated file fetch with its sign-in page.
        return (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            "<html>sign in</html>",
        )
            .into_response();
    }
    let file = shared.peek().stored_files.get(&id).cloned();
    match file {
        Some((mimetype, bytes)) => ([(header::CONTENT_TYPE, mimetype)], bytes).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn upload(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let fault = shared
        .lock()
        .faults
        .get_mut("file.upload")
        .and_then(|q| q.pop_front());
    // A slow upload (a large file): Slack answers once the bytes are in, after the delay.
    if let Some(Fault::Delay(delay)) = fault {
        tokio::time::sleep(delay).await;
    }
    let len = body.len();
    shared.lock().records.uploads.insert(id, body.to_vec());
    format!("OK - {len}").into_response()
}

async fn response_url(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.lock().records.responses.push(value);
    axum::Json(json!({"ok": true})).into_response()
}

async fn unexpected(State(shared): State<Arc<Shared>>, uri: axum::http::Uri) -> Response {
    shared.lock().records.unexpected.push(format!("path {uri}"));
    StatusCode::NOT_FOUND.into_response()
}
