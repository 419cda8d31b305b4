//! The HTTP side of the fake: `/bot<token>/<method>` and `/file/bot<token>/<path>`, with the
//! `{"ok":..}` envelope, case-insensitive method names and armed faults applied first.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::{Map, Value, json};

use crate::markdown_v2;
use crate::rules;
use crate::state::{Call, Fault, Shared, StoredMessage, UploadedFile, param_i64, param_json};

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/{bot}/{method}", any(api_call))
        .route("/file/{bot}/{*path}", get(download))
        .fallback(unrouted)
        // Telegram takes uploads up to 50 MB (2000 MB locally) and judges the size itself
        // (`rules::check_upload`), so the framework's 2 MB default must not answer first.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(shared)
}

pub(crate) type Reply = Result<Value, ApiFailure>;

/// A Bot API error: HTTP status, description and optional `parameters`.
pub(crate) struct ApiFailure {
    pub status: u16,
    pub description: String,
    pub parameters: Option<Value>,
}

pub(crate) fn bad_request(description: &str) -> ApiFailure {
    ApiFailure {
        status: 400,
        description: format!("Bad Request: {description}"),
        parameters: None,
    }
}

impl IntoResponse for ApiFailure {
    fn into_response(self) -> Response {
        let mut body =
            json!({"ok": false, "error_code": self.status, "description": self.description});
        if let Some(parameters) = self.parameters {
            body["parameters"] = parameters;
        }
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST);
        (status, axum::Json(body)).into_response()
    }
}

async fn api_call(
    State(shared): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    request: Request,
) -> Response {
    let method = method.to_ascii_lowercase();
    let parsed = match crate::params::read(request).await {
        Ok(parsed) => parsed,
        Err(e) => return bad_request(&e).into_response(),
    };
    let authorized = bot.strip_prefix("bot") == Some(shared.token.as_str());
    let fault = if authorized {
        shared.lock().take_fault(&method)
    } else {
        None
    };
    let index = shared.record(Call {
        method: method.clone(),
        params: parsed.params.clone(),
        files: parsed.files.clone(),
        fault: fault.clone(),
        status: None,
    });
    let request = (method.as_str(), &parsed.params, parsed.files.as_slice());
    let response = answer(&shared, request, authorized, fault).await;
    if !matches!(
        &shared.lock().calls[index].fault,
        Some(Fault::DropConnection | Fault::Stall)
    ) {
        shared.answered(index, response.status().as_u16());
    }
    response
}

/// A request as the dispatcher sees it: method (lowercased), parameters, uploaded files.
type MethodCall<'a> = (&'a str, &'a Map<String, Value>, &'a [UploadedFile]);

async fn answer(
    shared: &Shared,
    request: MethodCall<'_>,
    authorized: bool,
    fault: Option<Fault>,
) -> Response {
    if !authorized {
        return fault_response(shared, Fault::Unauthorized).await;
    }
    let duplicate = matches!(fault, Some(Fault::DuplicateUpdates));
    if let Some(fault) = fault
        && !duplicate
    {
        return fault_response(shared, fault).await;
    }
    let (method, params, _) = request;
    if method == "sendmessage"
        && let Some(chat_id) = params.get("chat_id").and_then(param_i64)
    {
        let now = std::time::Instant::now();
        let limited = shared.lock().flood.check(chat_id, now);
        if let Some(retry_after) = limited {
            return fault_response(shared, Fault::TooManyRequests { retry_after }).await;
        }
    }
    match dispatch(shared, request, duplicate).await {
        Ok(result) => axum::Json(json!({"ok": true, "result": result})).into_response(),
        Err(failure) => failure.into_response(),
    }
}

/// The Bot API's answer to a getUpdates request overtaken by a newer one.
fn conflict() -> ApiFailure {
    ApiFailure {
        status: 409,
        description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running".into(),
        parameters: None,
    }
}

async fn fault_response(shared: &Shared, fault: Fault) -> Response {
    let failure = match fault {
        Fault::TooManyRequests { retry_after } => ApiFailure {
            status: 429,
            description: format!("Too Many Requests: retry after {retry_after}"),
            parameters: Some(json!({"retry_after": retry_after})),
        },
        Fault::ServerError => ApiFailure {
            status: 500,
            description: "Internal Server Error".into(),
            parameters: None,
        },
        Fault::BadGateway => {
            return (StatusCode::BAD_GATEWAY, "<html>502 Bad Gateway</html>").into_response();
        }
        Fault::CantParseEntities => bad_request(
            "can't parse entities: Can't find end of the entity starting at byte offset 0",
        ),
        Fault::Forbidden => ApiFailure {
            status: 403,
            description: "Forbidden: bot was blocked by the user".into(),
            parameters: None,
        },
        Fault::Conflict => conflict(),
        Fault::Unauthorized => ApiFailure {
            status: 401,
            description: "Unauthorized".into(),
            parameters: None,
        },
        Fault::BadRequest(description) => ApiFailure {
            status: 400,
            description,
            parameters: None,
        },
        Fault::DropConnection => {
            let broken = futures_util::stream::once(async {
                Err::<axum::body::Bytes, _>(std::io::Error::other("connection dropped by fault"))
            });
            return Response::new(Body::from_stream(broken));
        }
        Fault::Stall | Fault::DuplicateUpdates => {
            shared.until_shutdown().await;
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
    };
    failure.into_response()
}

async fn dispatch(shared: &Shared, request: MethodCall<'_>, duplicate: bool) -> Reply {
    let (method, params, files) = request;
    if method.starts_with("send") {
        rules::check_migrated(&shared.lock(), params)?;
    }
    match method {
        "getme" => Ok(json!({
            "id": shared.bot_id, "is_bot": true, "first_name": "Hermes", "username": shared.bot_username,
            "can_join_groups": true,
            "can_read_all_group_messages": shared.lock().can_read_all_group_messages,
            "supports_inline_queries": false, "has_main_web_app": false,
        })),
        "getupdates" => {
            rules::pace_get_updates(&mut shared.lock())?;
            get_updates(shared, params, duplicate).await
        }
        "setwebhook" => {
            rules::check_set_webhook(params)?;
            let mut inner = shared.lock();
            inner.webhook_url = str_param(params, "url").unwrap_or_default();
            inner.webhook_secret = str_param(params, "secret_token");
            Ok(json!(true))
        }
        "deletewebhook" => {
            let mut inner = shared.lock();
            inner.webhook_url.clear();
            inner.webhook_secret = None;
            Ok(json!(true))
        }
        "getwebhookinfo" => {
            let inner = shared.lock();
            Ok(
                json!({"url": inner.webhook_url, "has_custom_certificate": false, "pending_update_count": inner.queue.len()}),
            )
        }
        "setmycommands" => set_my_commands(shared, params),
        "sendmessage" => send_message(shared, params),
        "editmessagetext" => edit_message(shared, params),
        "editmessagereplymarkup" => edit_reply_markup(shared, params),
        "deletemessage" => {
            let (chat_id, message_id) = (
                require_i64(params, "chat_id")?,
                require_i64(params, "message_id")?,
            );
            match shared.lock().messages.remove(&(chat_id, message_id)) {
                Some(_) => Ok(json!(true)),
                None => Err(bad_request("message to delete not found")),
            }
        }
        "sendchataction" | "answercallbackquery" => Ok(json!(true)),
        "getfile" => get_file(shared, params),
        "sendphoto" | "senddocument" | "sendvoice" | "sendaudio" | "sendvideo"
        | "sendanimation" => {
            let local = shared.lock().local_dir.is_some();
            rules::check_upload(method, files, local)?;
            crate::media::send_media(shared, method, params, files)
        }
        _ => Err(ApiFailure {
            status: 404,
            description: "Not Found: method not found".into(),
            parameters: None,
        }),
    }
}

async fn get_updates(shared: &Shared, params: &Map<String, Value>, duplicate: bool) -> Reply {
    let offset = params.get("offset").and_then(param_i64).unwrap_or(0);
    let limit = params
        .get("limit")
        .and_then(param_i64)
        .unwrap_or(100)
        .clamp(1, 100) as usize;
    let timeout = params
        .get("timeout")
        .and_then(param_i64)
        .unwrap_or(0)
        .max(0) as u64;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    let mut shutdown = shared.shutdown.subscribe();
    // Telegram serves one getUpdates caller per bot (https://core.telegram.org/bots/api#getupdates):
    // a request that arrives while another is waiting ends the waiting one with 409
    // "Conflict: terminated by other getUpdates request" (the Bot API server's answer, see
    // https://github.com/tdlib/telegram-bot-api, Client.cpp), which is how two pollers of one
    // bot find out about each other.
    let generation = {
        let mut inner = shared.lock();
        inner.poll_generation += 1;
        inner.poll_generation
    };
    shared.updates_changed.notify_waiters();
    {
        // Telegram confirms (forgets) everything below the offset when the request arrives.
        let mut inner = shared.lock();
        if offset > inner.confirmed_offset {
            inner.confirmed_offset = offset;
        }
        inner
            .queue
            .retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
    }
    loop {
        let changed = shared.updates_changed.notified();
        {
            let inner = shared.lock();
            if inner.poll_generation != generation {
                return Err(conflict());
            }
            let ready: Vec<Value> = inner
                .queue
                .iter()
                .filter(|u| u["update_id"].as_i64().unwrap_or(0) >= offset)
                .take(limit)
                .cloned()
                .collect();
            if !ready.is_empty() || tokio::time::Instant::now() >= deadline {
                let answer = if duplicate {
                    ready.iter().flat_map(|u| [u.clone(), u.clone()]).collect()
                } else {
                    ready
                };
                return Ok(Value::Array(answer));
            }
        }
        tokio::select! {
            _ = changed => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.wait_for(|stopped| *stopped) => return Ok(json!([])),
        }
    }
}

/// https://core.telegram.org/bots/api#getfile. A local Bot API server started with `--local`
/// answers `file_path` as an absolute path on its disk instead of a download path
/// (https://github.com/tdlib/telegram-bot-api#usage); the fake writes the file there.
fn get_file(shared: &Shared, params: &Map<String, Value>) -> Reply {
    let file_id = str_param(params, "file_id").unwrap_or_default();
    let inner = shared.lock();
    let (path, bytes) = inner
        .files
        .get(&file_id)
        .ok_or_else(|| bad_request("invalid file_id"))?;
    let file_path = match &inner.local_dir {
        Some(dir) => {
            let on_disk = dir.join(path);
            if let Some(parent) = on_disk.parent() {
                std::fs::create_dir_all(parent).map_err(|e| bad_request(&e.to_string()))?;
            }
            std::fs::write(&on_disk, bytes).map_err(|e| bad_request(&e.to_string()))?;
            on_disk.display().to_string()
        }
        None => path.clone(),
    };
    Ok(
        json!({"file_id": file_id, "file_unique_id": format!("u{file_id}"), "file_size": bytes.len(), "file_path": file_path}),
    )
}

fn set_my_commands(shared: &Shared, params: &Map<String, Value>) -> Reply {
    let commands = params
        .get("commands")
        .and_then(param_json)
        .unwrap_or(json!([]));
    let list = commands.as_array().cloned().unwrap_or_default();
    for command in &list {
        let name = command["command"].as_str().unwrap_or("");
        let description = command["description"].as_str().unwrap_or("");
        let name_ok = !name.is_empty()
            && name.len() <= 32
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        let description_len = description.chars().count();
        if !name_ok || description_len == 0 || description_len > 256 {
            return Err(bad_request("BOT_COMMAND_INVALID"));
        }
    }
    if list.len() > 100 {
        return Err(bad_request("BOT_COMMANDS_TOO_MUCH"));
    }
    shared.lock().commands = list;
    Ok(json!(true))
}

fn send_message(shared: &Shared, params: &Map<String, Value>) -> Reply {
    let chat_id = require_i64(params, "chat_id")?;
    let text = str_param(params, "text").unwrap_or_default();
    check_text(
        &text,
        params,
        "message text is empty",
        "message is too long",
    )?;
    let mut inner = shared.lock();
    if let Some(thread_id) = params.get("message_thread_id").and_then(param_i64)
        && inner.closed_threads.contains(&(chat_id, thread_id))
    {
        return Err(bad_request("message thread not found"));
    }
    let reply_parameters = params.get("reply_parameters").and_then(param_json);
    let reply = reply_parameters
        .as_ref()
        .and_then(|r| r["message_id"].as_i64())
        .or_else(|| params.get("reply_to_message_id").and_then(param_i64));
    // https://core.telegram.org/bots/api#replyparameters: with
    // `allow_sending_without_reply` the message "should be sent even if the specified message
    // to be replied to is not found".
    let without_reply_ok = reply_parameters
        .as_ref()
        .is_some_and(|r| r["allow_sending_without_reply"] == json!(true));
    if let Some(reply_to) = reply
        && !inner.messages.contains_key(&(chat_id, reply_to))
        && !without_reply_ok
    {
        return Err(bad_request("message to be replied not found"));
    }
    let message_id = inner.next_message_id();
    inner.sent_log.push(crate::state::SentRecord {
        at: std::time::Instant::now(),
        chat_id,
        message_id,
        thread_id: params.get("message_thread_id").and_then(param_i64),
        text: text.clone(),
    });
    let reply_markup = params.get("reply_markup").and_then(param_json);
    inner.messages.insert(
        (chat_id, message_id),
        StoredMessage {
            chat_id,
            message_id,
            text: text.clone(),
            reply_markup,
            from_bot: true,
        },
    );
    let chat = chat_json(&inner, chat_id);
    Ok(
        json!({"message_id": message_id, "date": 1_700_000_000, "chat": chat,
        "from": {"id": shared.bot_id, "is_bot": true, "first_name": "Hermes", "username": shared.bot_username},
        "text": text}),
    )
}

fn edit_message(shared: &Shared, params: &Map<String, Value>) -> Reply {
    let (chat_id, message_id) = (
        require_i64(params, "chat_id")?,
        require_i64(params, "message_id")?,
    );
    let text = str_param(params, "text").unwrap_or_default();
    check_text(&text, params, "text must be non-empty", "MESSAGE_TOO_LONG")?;
    let reply_markup = params.get("reply_markup").and_then(param_json);
    let mut inner = shared.lock();
    let stored = inner
        .messages
        .get_mut(&(chat_id, message_id))
        .ok_or_else(|| bad_request("message to edit not found"))?;
    if stored.text == text && stored.reply_markup == reply_markup {
        return Err(bad_request(
            "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        ));
    }
    stored.text = text.clone();
    stored.reply_markup = reply_markup;
    let chat = chat_json(&inner, chat_id);
    Ok(
        json!({"message_id": message_id, "date": 1_700_000_000, "edit_date": 1_700_000_001, "chat": chat, "text": text}),
    )
}

fn edit_reply_markup(shared: &Shared, params: &Map<String, Value>) -> Reply {
    let (chat_id, message_id) = (
        require_i64(params, "chat_id")?,
        require_i64(params, "message_id")?,
    );
    let reply_markup = params.get("reply_markup").and_then(param_json);
    let mut inner = shared.lock();
    let stored = inner
        .messages
        .get_mut(&(chat_id, message_id))
        .ok_or_else(|| bad_request("message to edit not found"))?;
    stored.reply_markup = reply_markup;
    let text = stored.text.clone();
    let chat = chat_json(&inner, chat_id);
    Ok(json!({"message_id": message_id, "date": 1_700_000_000, "chat": chat, "text": text}))
}

/// Applies Telegram's text rules: non-empty, MarkdownV2 well-formed, ≤ 4096 UTF-16 units
/// of visible text.
fn check_text(
    text: &str,
    params: &Map<String, Value>,
    empty: &str,
    too_long: &str,
) -> Result<(), ApiFailure> {
    if text.trim().is_empty() {
        return Err(bad_request(empty));
    }
    let visible = match str_param(params, "parse_mode").as_deref() {
        Some("MarkdownV2") => {
            markdown_v2::visible_utf16_len(text).map_err(|description| ApiFailure {
                status: 400,
                description,
                parameters: None,
            })?
        }
        _ => text.encode_utf16().count(),
    };
    if visible > 4096 {
        return Err(bad_request(too_long));
    }
    Ok(())
}

pub(crate) fn chat_json(inner: &crate::state::Inner, chat_id: i64) -> Value {
    inner
        .chats
        .get(&chat_id)
        .cloned()
        .unwrap_or_else(|| json!({"id": chat_id, "type": "private", "first_name": "user"}))
}

pub(crate) fn str_param(params: &Map<String, Value>, key: &str) -> Option<String> {
    match params.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

pub(crate) fn require_i64(params: &Map<String, Value>, key: &str) -> Result<i64, ApiFailure> {
    params
        .get(key)
        .and_then(param_i64)
        .ok_or_else(|| bad_request(&format!("{key} is empty")))
}

async fn download(
    State(shared): State<Arc<Shared>>,
    Path((bot, path)): Path<(String, String)>,
) -> Response {
    if bot.strip_prefix("bot") != Some(shared.token.as_str()) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let mut params = Map::new();
    params.insert("path".into(), Value::String(path.clone()));
    let index = shared.record(Call {
        method: "(download)".into(),
        params,
        files: Vec::new(),
        fault: None,
        status: None,
    });
    let mut open = shared.downloads_open.subscribe();
    let mut shutdown = shared.shutdown.subscribe();
    tokio::select! {
        _ = open.wait_for(|open| *open) => {}
        _ = shutdown.wait_for(|stopped| *stopped) => {}
    }
    shared.answered(index, 200);
    let inner = shared.lock();
    match inner
        .files
        .values()
        .find(|(file_path, _)| *file_path == path)
    {
        Some((_, bytes)) => bytes.clone().into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Anything that is not `/bot<token>/<method>` or a file download: the Bot API answers
/// 404 `Not Found` in its usual envelope (https://core.telegram.org/bots/api#making-requests:
/// requests go to `https://api.telegram.org/bot<token>/METHOD_NAME`). Recorded with the
/// method `(unrouted)` and the path, so tests can see what a misconfigured client asked for.
async fn unrouted(State(shared): State<Arc<Shared>>, uri: axum::http::Uri) -> Response {
    let mut params = Map::new();
    params.insert("path".into(), Value::String(uri.path().to_owned()));
    let index = shared.record(Call {
        method: "(unrouted)".into(),
        params,
        files: Vec::new(),
        fault: None,
        status: None,
    });
    shared.answered(index, 404);
    ApiFailure {
        status: 404,
        description: "Not Found".into(),
        parameters: None,
    }
    .into_response()
}
