//! The fake REST API under `/api/v10`: the routes the adapter uses, Discord-shaped error
//! bodies, token checks, the 2000-character limit, and the armed faults (429 with
//! `retry_after`, 5xx). Every call is recorded with its normalised route.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Request, State as AxumState};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::Shared;
use crate::state::{Channel, CreatedMessage, Fault, RestCall, State, message_json};

/// `POST /api/v10/channels/123/messages` → `POST /channels/{id}/messages`.
pub fn normalise_route(method: &Method, path: &str) -> String {
    let path = path.strip_prefix("/api/v10").unwrap_or(path);
    let mut out = Vec::new();
    let mut previous = "";
    for segment in path.split('/') {
        let normalised = if !segment.is_empty() && segment.chars().all(|c| c.is_ascii_digit()) {
            "{id}"
        } else if previous == "{id}"
            && !out.is_empty()
            && matches!(
                out.get(out.len() - 2),
                Some(&"interactions") | Some(&"webhooks")
            )
        {
            "{token}"
        } else {
            segment
        };
        out.push(normalised);
        previous = normalised;
    }
    format!("{method} {}", out.join("/"))
}

pub async fn handle(AxumState(shared): AxumState<Arc<Shared>>, request: Request) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    let headers = request.headers().clone();
    let route = normalise_route(&method, &path);
    let (body, files) = match read_body(request, &headers).await {
        Ok(parts) => parts,
        Err(response) => return response,
    };
    if path.starts_with("/attachments/") {
        let delay = shared.read(|s| s.attachment_delay);
        tokio::time::sleep(delay).await;
    }
    let segments: Vec<&str> = path
        .strip_prefix("/api/v10/")
        .map(|rest| rest.split('/').collect())
        .unwrap_or_default();
    shared.update(|state| {
        let (status, response, bucket) = match state.limits.admit(method.as_str(), &segments) {
            Err(response) => (StatusCode::TOO_MANY_REQUESTS, Some(*response), None),
            Ok(bucket) => {
                let (status, response) = respond(
                    state, &method, &path, &query, &route, &headers, &body, &files,
                );
                (status, response, bucket)
            }
        };
        let mut response = response.unwrap_or_else(|| status.into_response());
        if let Some(bucket) = bucket {
            bucket.apply(response.headers_mut());
        }
        let shared_scope = response
            .headers()
            .get("x-ratelimit-scope")
            .is_some_and(|v| v == "shared");
        state.limits.record_answer(status.as_u16(), shared_scope);
        state.calls.push(RestCall {
            method: method.to_string(),
            route: route.clone(),
            path: path.clone(),
            query: query.clone(),
            body: body.clone(),
            files: files.iter().map(|(name, _, _)| name.clone()).collect(),
            status: status.as_u16(),
        });
        response
    })
}

/// The upload limit of a guild without boosts (and of DMs).
const UPLOAD_LIMIT: usize = 10 * 1024 * 1024;

type Files = Vec<(String, Vec<u8>, Option<String>)>; // name, bytes, the part's media type

async fn read_body(request: Request, headers: &HeaderMap) -> Result<(Value, Files), Response> {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type.starts_with("multipart/form-data") {
        let mut multipart = Multipart::from_request(request, &())
            .await
            .map_err(IntoResponse::into_response)?;
        let mut body = Value::Null;
        let mut files = Vec::new();
        while let Ok(Some(field)) = multipart.next_field().await {
            let name = field.name().unwrap_or_default().to_owned();
            let file_name = field.file_name().map(str::to_owned);
            let content_type = field.content_type().map(str::to_owned);
            let data = field.bytes().await.unwrap_or_default();
            if name == "payload_json" {
                body = serde_json::from_slice(&data).unwrap_or(Value::Null);
            } else if let Some(file_name) = file_name {
                files.push((file_name, data.to_vec(), content_type));
            }
        }
        return Ok((body, files));
    }
    let bytes = Bytes::from_request(request, &())
        .await
        .map_err(IntoResponse::into_response)?;
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    };
    Ok((body, Vec::new()))
}

/// Discord's documented limits on a bulk overwrite of global commands: at most 100 chat
/// input commands, names 1–32 characters of letters and numbers (lowercase where a letter
/// has case), `-` and `_`, descriptions 1–100 characters.
/// <https://discord.com/developers/docs/interactions/application-commands#registering-a-command>
/// <https://discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-naming>
/// <https://discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-structure>
fn invalid_commands(commands: &[Value]) -> Option<String> {
    if commands.len() > 100 {
        return Some(format!(
            "Invalid Form Body: {} commands, at most 100",
            commands.len()
        ));
    }
    for command in commands {
        let name = command["name"].as_str().unwrap_or("");
        let name_ok = (1..=32).contains(&name.chars().count())
            && name
                .chars()
                .all(|c| (c.is_alphanumeric() && !c.is_uppercase()) || c == '-' || c == '_');
        let description = command["description"]
            .as_str()
            .unwrap_or("")
            .chars()
            .count();
        if !name_ok || !(1..=100).contains(&description) {
            return Some(format!("Invalid Form Body: command {name:?}"));
        }
    }
    None
}

pub(crate) fn error(
    status: StatusCode,
    code: u64,
    message: &str,
) -> (StatusCode, Option<Response>) {
    (
        status,
        Some(
            (
                status,
                axum::Json(json!({"message": message, "code": code})),
            )
                .into_response(),
        ),
    )
}

pub(crate) fn ok(value: Value) -> (StatusCode, Option<Response>) {
    (StatusCode::OK, Some(axum::Json(value).into_response()))
}

pub(crate) fn no_content() -> (StatusCode, Option<Response>) {
    (StatusCode::NO_CONTENT, None)
}

fn rate_limited(retry_after: f64) -> (StatusCode, Option<Response>) {
    let body = json!({"message": "You are being rate limited.", "retry_after": retry_after, "global": false});
    let mut response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
    let headers = response.headers_mut();
    let seconds = format!("{retry_after}");
    if let Ok(value) = HeaderValue::from_str(&seconds) {
        headers.insert("x-ratelimit-reset-after", value);
    }
    if let Ok(value) = HeaderValue::from_str(&(retry_after.ceil() as u64).to_string()) {
        headers.insert("retry-after", value);
    }
    headers.insert("x-ratelimit-scope", HeaderValue::from_static("user"));
    (StatusCode::TOO_MANY_REQUESTS, Some(response))
}

#[allow(clippy::too_many_arguments)]
fn respond(
    state: &mut State,
    method: &Method,
    path: &str,
    query: &str,
    route: &str,
    headers: &HeaderMap,
    body: &Value,
    files: &Files,
) -> (StatusCode, Option<Response>) {
    if let Some(key) = path.strip_prefix("/attachments/") {
        return match state.attachments.get(key) {
            Some(bytes) => (StatusCode::OK, Some(bytes.clone().into_response())),
            None => error(StatusCode::NOT_FOUND, 0, "404: Not Found"),
        };
    }
    let needs_auth = !route.contains("/interactions/") && !route.contains("/webhooks/");
    let authorized = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bot {}", state.token));
    if needs_auth && !authorized {
        return error(StatusCode::UNAUTHORIZED, 0, "401: Unauthorized");
    }
    match state.take_fault(route) {
        Some(Fault::RateLimited { retry_after }) => return rate_limited(retry_after),
        Some(Fault::Status(code)) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return error(status, 0, "injected failure");
        }
        None => {}
    }
    let segments: Vec<&str> = path
        .strip_prefix("/api/v10/")
        .unwrap_or_default()
        .split('/')
        .collect();
    match (method.as_str(), segments.as_slice()) {
        ("GET", ["gateway"]) | ("GET", ["gateway", "bot"]) => {
            if let Some(code) = state.gateway_lookup_status {
                let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY);
                return error(status, 0, "gateway lookup failed");
            }
            ok(json!({
                "url": state.ws_url,
                "shards": 1,
                "session_start_limit": state.session_start_limit,
            }))
        }
        ("GET", ["users", "@me"]) => ok(state.bot_user.clone()),
        ("GET", ["channels", id]) => match state.channels.get(*id) {
            Some(channel) => ok(channel.to_json()),
            None => error(StatusCode::NOT_FOUND, 10003, "Unknown Channel"),
        },
        ("PATCH", ["channels", id]) => match state.channels.get_mut(*id) {
            Some(channel) => {
                if let Some(name) = body["name"].as_str() {
                    channel.name = Some(name.to_owned());
                }
                ok(channel.to_json())
            }
            None => error(StatusCode::NOT_FOUND, 10003, "Unknown Channel"),
        },
        ("GET", ["channels", id, "messages"]) => list_messages(state, id, query),
        // https://discord.com/developers/docs/resources/guild#get-guild-member
        ("GET", ["guilds", guild_id, "members", user_id]) => {
            match state
                .members
                .get(*user_id)
                .filter(|_| *guild_id == state.guild_id)
            {
                Some(roles) => ok(json!({
                    "user": {"id": user_id},
                    "roles": roles,
                    "nick": null,
                    "joined_at": "2025-01-01T00:00:00.000000+00:00",
                    "deaf": false,
                    "mute": false,
                })),
                None => error(StatusCode::NOT_FOUND, 10007, "Unknown Member"),
            }
        }
        ("POST", ["channels", id, "messages"]) => create_message(state, id, body, files),
        ("PATCH", ["channels", id, "messages", message_id]) => {
            let limit = state.max_message_chars;
            if body["content"]
                .as_str()
                .is_some_and(|c| c.chars().count() > limit)
            {
                return too_long(limit);
            }
            match state.find_message_mut(id, message_id) {
                Some(message) => {
                    if let Some(content) = body.get("content") {
                        message["content"] = content.clone();
                    }
                    if let Some(components) = body.get("components") {
                        message["components"] = components.clone();
                    }
                    ok(message.clone())
                }
                None => error(StatusCode::NOT_FOUND, 10008, "Unknown Message"),
            }
        }
        ("DELETE", ["channels", id, "messages", message_id]) => {
            let Some(list) = state.history.get_mut(*id) else {
                return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel");
            };
            let before = list.len();
            list.retain(|m| m["id"] != *message_id);
            if list.len() == before {
                return error(StatusCode::NOT_FOUND, 10008, "Unknown Message");
            }
            no_content()
        }
        ("POST", ["channels", id, "typing"]) => {
            if state.channels.contains_key(*id) {
                no_content()
            } else {
                error(StatusCode::NOT_FOUND, 10003, "Unknown Channel")
            }
        }
        ("POST", ["channels", id, "messages", message_id, "threads"]) => {
            start_thread(state, id, message_id, body)
        }
        ("POST", ["interactions", id, token, "callback"]) => {
            crate::interactions::callback(state, id, token, body)
        }
        ("PATCH", ["webhooks", _, token, "messages", "@original"]) => {
            crate::interactions::edit_original(state, token, body)
        }
        ("DELETE", ["webhooks", _, token, "messages", "@original"]) => {
            crate::interactions::delete_original(state, token)
        }
        ("PUT", ["applications", _, "commands"]) => {
            let commands = body.as_array().cloned().unwrap_or_default();
            if let Some(problem) = invalid_commands(&commands) {
                return error(StatusCode::BAD_REQUEST, 50035, &problem);
            }
            state.commands = commands;
            ok(Value::Array(state.commands.clone()))
        }
        _ => {
            state.unrouted.push(route.to_owned());
            error(StatusCode::NOT_FOUND, 0, "404: Not Found")
        }
    }
}

fn too_long(limit: usize) -> (StatusCode, Option<Response>) {
    let body = json!({
        "message": "Invalid Form Body",
        "code": 50035,
        "errors": {"content": {"_errors": [{
            "code": "BASE_TYPE_MAX_LENGTH",
            "message": format!("Must be {limit} or fewer in length."),
        }]}},
    });
    (
        StatusCode::BAD_REQUEST,
        Some((StatusCode::BAD_REQUEST, axum::Json(body)).into_response()),
    )
}

fn list_messages(state: &State, channel_id: &str, query: &str) -> (StatusCode, Option<Response>) {
    if !state.channels.contains_key(channel_id) {
        return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel");
    }
    let mut limit = 50usize;
    let mut after: Option<u64> = None;
    let mut before: Option<u64> = None;
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("limit", v)) => limit = v.parse().unwrap_or(50).clamp(1, 100),
            Some(("after", v)) => after = v.parse().ok(),
            Some(("before", v)) => before = v.parse().ok(),
            _ => {}
        }
    }
    let id_of = |m: &Value| {
        m["id"]
            .as_str()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let all = state.history.get(channel_id).cloned().unwrap_or_default();
    // Discord (https://discord.com/developers/docs/resources/message#get-channel-messages):
    // with `after`, the oldest `limit` messages after it; with `before`, the newest `limit`
    // before it; else the newest `limit`. Either way the response is newest first.
    let mut selected: Vec<Value> = match after {
        Some(after) => all
            .into_iter()
            .filter(|m| id_of(m) > after)
            .take(limit)
            .collect(),
        None => {
            let all: Vec<Value> = all
                .into_iter()
                .filter(|m| before.is_none_or(|before| id_of(m) < before))
                .collect();
            let skip = all.len().saturating_sub(limit);
            all.into_iter().skip(skip).collect()
        }
    };
    selected.reverse();
    ok(Value::Array(selected))
}

fn create_message(
    state: &mut State,
    channel_id: &str,
    body: &Value,
    files: &Files,
) -> (StatusCode, Option<Response>) {
    if !state.channels.contains_key(channel_id) {
        return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel");
    }
    // https://discord.com/developers/docs/reference#uploading-files: 10 MiB per message in
    // the fake's guild (boost level 0) and DMs; over it, 413 "Request entity too large".
    let uploaded: usize = files.iter().map(|(_, bytes, _)| bytes.len()).sum();
    if uploaded > UPLOAD_LIMIT {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            40005,
            "Request entity too large",
        );
    }
    let content = body["content"].as_str().unwrap_or_default();
    let voice = body["flags"]
        .as_u64()
        .is_some_and(|f| f & IS_VOICE_MESSAGE != 0);
    if voice && let Some(refusal) = voice_rules(state, content, body, files) {
        return refusal;
    }
    if content.chars().count() > state.max_message_chars {
        return too_long(state.max_message_chars);
    }
    if content.is_empty() && files.is_empty() && body["components"].is_null() {
        return error(
            StatusCode::BAD_REQUEST,
            50006,
            "Cannot send an empty message",
        );
    }
    let reference = body["message_reference"]["message_id"].as_str();
    let reference_exists = reference.is_some_and(|id| {
        state
            .history
            .get(channel_id)
            .is_some_and(|list| list.iter().any(|m| m["id"] == id))
    });
    let fail_if_missing = body["message_reference"]["fail_if_not_exists"]
        .as_bool()
        .unwrap_or(true);
    if reference.is_some() && !reference_exists && fail_if_missing {
        return error(StatusCode::BAD_REQUEST, 10008, "Unknown Message");
    }
    let id = state.snowflake(std::time::Duration::ZERO);
    let bot = state.bot_user.clone();
    let mut message = message_json(&id, channel_id, &bot, content);
    if let (Some(reference), true) = (reference, reference_exists) {
        message["type"] = json!(19);
        message["message_reference"] = json!({"message_id": reference, "channel_id": channel_id});
    }
    if let Some(components) = body.get("components") {
        message["components"] = components.clone();
    }
    let mut attachments = Vec::new();
    for (index, (file_name, bytes, content_type)) in files.iter().enumerate() {
        let key = format!("{id}/{index}/{file_name}");
        state.attachments.insert(key.clone(), bytes.clone());
        let mut attachment = json!({
            "id": format!("{id}{index}"),
            "filename": file_name,
            "size": bytes.len(),
            "url": format!("{}/attachments/{key}", state.base_url),
        });
        if let Some(content_type) = content_type {
            attachment["content_type"] = json!(content_type);
        }
        if voice {
            attachment["duration_secs"] = body["attachments"][0]["duration_secs"].clone();
            attachment["waveform"] = body["attachments"][0]["waveform"].clone();
        }
        attachments.push(attachment);
    }
    if voice {
        message["flags"] = json!(IS_VOICE_MESSAGE);
    }
    message["attachments"] = json!(attachments);
    state.store_message(message.clone());
    let created = CreatedMessage {
        channel_id: channel_id.to_owned(),
        content: content.to_owned(),
        at: std::time::Instant::now(),
    };
    state
        .created_taps
        .retain(|tap| tap.send(created.clone()).is_ok());
    ok(message)
}

/// `IS_VOICE_MESSAGE` (https://discord.com/developers/docs/resources/message#message-object-message-flags).
const IS_VOICE_MESSAGE: u64 = 1 << 13;

/// A voice message carries exactly one audio attachment with `duration_secs` and a base64
/// `waveform`, and no content (Discord's JSON error codes 50159, 50160, 50161,
/// https://discord.com/developers/docs/topics/opcodes-and-status-codes#json-json-error-codes);
/// where the bot may not send them, 50173 "Cannot send voice messages in this channel".
fn voice_rules(
    state: &State,
    content: &str,
    body: &Value,
    files: &Files,
) -> Option<(StatusCode, Option<Response>)> {
    if state.voice_messages_forbidden {
        return Some(error(
            StatusCode::FORBIDDEN,
            50173,
            "Cannot send voice messages in this channel",
        ));
    }
    if !content.is_empty() {
        return Some(error(
            StatusCode::BAD_REQUEST,
            50161,
            "Voice messages do not support additional content",
        ));
    }
    let audio = files.len() == 1
        && files[0]
            .2
            .as_deref()
            .is_some_and(|t| t.starts_with("audio/"));
    if !audio {
        return Some(error(
            StatusCode::BAD_REQUEST,
            50159,
            "Voice messages must have a single audio attachment",
        ));
    }
    let meta = &body["attachments"][0];
    let waveform_ok = meta["waveform"].as_str().is_some_and(|w| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(w)
            .is_ok_and(|bytes| !bytes.is_empty() && bytes.len() <= 256)
    });
    if meta["duration_secs"].as_f64().is_none_or(|d| d <= 0.0) || !waveform_ok {
        return Some(error(
            StatusCode::BAD_REQUEST,
            50160,
            "Voice messages must have supporting metadata",
        ));
    }
    None
}

fn start_thread(
    state: &mut State,
    channel_id: &str,
    message_id: &str,
    body: &Value,
) -> (StatusCode, Option<Response>) {
    let Some(parent) = state.channels.get(channel_id).cloned() else {
        return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel");
    };
    if state.find_message_mut(channel_id, message_id).is_none() {
        return error(StatusCode::NOT_FOUND, 10008, "Unknown Message");
    }
    if state.channels.contains_key(message_id) {
        return error(
            StatusCode::BAD_REQUEST,
            160004,
            "A thread has already been created for this message",
        );
    }
    // Discord gives a thread started from a message the message's id.
    let thread = Channel {
        id: message_id.to_owned(),
        kind: 11,
        name: body["name"].as_str().map(str::to_owned),
        guild_id: parent.guild_id.clone(),
        parent_id: Some(channel_id.to_owned()),
        recipient: None,
        owner_id: Some(state.bot_id()),
    };
    let json = thread.to_json();
    state.channels.insert(thread.id.clone(), thread);
    if let Some(message) = state.find_message_mut(channel_id, message_id) {
        message["thread"] = json.clone();
    }
    state.dispatch("THREAD_CREATE", json.clone());
    (
        StatusCode::CREATED,
        Some((StatusCode::CREATED, axum::Json(json)).into_response()),
    )
}
