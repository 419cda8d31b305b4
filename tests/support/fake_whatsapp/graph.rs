//! The Graph endpoints of the fake Meta (what each enforces is listed on the parent module):
//! `messages` (text, interactive, media, read receipts with typing), media upload, media
//! metadata and the media download URL.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{DAY, Fault, PHONE_NUMBER_ID, Sent, Shared, TOKEN, now};

fn graph_error(status: StatusCode, code: i64, message: &str) -> Response {
    (
        status,
        Json(
            json!({"error": {"message": message, "type": "OAuthException", "code": code,
            "error_data": {"messaging_product": "whatsapp", "details": message},
            "fbtrace_id": "AbCdEf"}}),
        ),
    )
        .into_response()
}

fn authorized(headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        == Some(TOKEN)
}

fn unauthorized() -> Response {
    graph_error(
        StatusCode::UNAUTHORIZED,
        190,
        "Error validating access token",
    )
}

fn chars(value: &Value) -> usize {
    value.as_str().map(|s| s.chars().count()).unwrap_or(0)
}

pub(super) async fn messages(
    State(shared): State<Arc<Mutex<Shared>>>,
    Path((_version, phone)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    let mut shared = shared.lock().unwrap();
    if phone != PHONE_NUMBER_ID {
        return graph_error(StatusCode::BAD_REQUEST, 100, "Unsupported post request");
    }
    if body["messaging_product"] != "whatsapp" {
        return graph_error(
            StatusCode::BAD_REQUEST,
            100,
            "messaging_product is required",
        );
    }
    if body["status"] == "read" {
        let id = body["message_id"].as_str().unwrap_or_default().to_owned();
        if !shared.inbound.contains_key(&id) {
            return graph_error(
                StatusCode::BAD_REQUEST,
                131_009,
                "Parameter value is not valid",
            );
        }
        shared.read.push(id);
        if body.get("typing_indicator").is_some() {
            shared.typing += 1;
        }
        return Json(json!({"success": true})).into_response();
    }
    let fault = shared.faults.pop_front();
    let disconnect = matches!(fault, Some(Fault::Disconnect));
    if let Some(fault) = fault.filter(|_| !disconnect) {
        shared.refused += 1;
        return match fault {
            Fault::Throughput(after) => {
                let mut response = graph_error(
                    StatusCode::TOO_MANY_REQUESTS,
                    130_429,
                    "Cloud API message throughput has been reached.",
                );
                if let Some(secs) = after {
                    response
                        .headers_mut()
                        .insert("retry-after", secs.to_string().parse().unwrap());
                }
                response
            }
            Fault::PairRate => graph_error(
                StatusCode::BAD_REQUEST,
                131_056,
                "(Business Account, Consumer Account) pair rate limit hit",
            ),
            Fault::Internal => graph_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                131_000,
                "Something went wrong",
            ),
            Fault::Disconnect => unreachable!("handled after the send"),
        };
    }
    let to = body["to"].as_str().unwrap_or_default().to_owned();
    let kind = body["type"].as_str().unwrap_or("text").to_owned();
    let opened = shared.last_user_message.get(&to).copied();
    if opened.is_none_or(|at| now() - at > DAY) {
        return graph_error(
            StatusCode::BAD_REQUEST,
            131_047,
            "Message failed to send because more than 24 hours have passed since the customer last replied to this number.",
        );
    }
    let mut sent = Sent {
        id: String::new(),
        to: to.clone(),
        kind: kind.clone(),
        text: String::new(),
        buttons: Vec::new(),
        quoted: body["context"]["message_id"].as_str().map(str::to_owned),
        media: None,
    };
    match kind.as_str() {
        "text" => {
            if chars(&body["text"]["body"]) == 0 || chars(&body["text"]["body"]) > 4096 {
                return graph_error(
                    StatusCode::BAD_REQUEST,
                    100,
                    "text.body must hold 1 to 4096 characters",
                );
            }
            sent.text = body["text"]["body"].as_str().unwrap().to_owned();
        }
        "interactive" => {
            let inter = &body["interactive"];
            sent.text = inter["body"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if sent.text.is_empty() || sent.text.chars().count() > 1024 {
                return graph_error(
                    StatusCode::BAD_REQUEST,
                    100,
                    "interactive body must hold 1 to 1024 characters",
                );
            }
            let pairs: Vec<(String, String, usize)> = match inter["type"].as_str() {
                Some("button") => inter["action"]["buttons"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|b| {
                        (
                            b["reply"]["id"].as_str().unwrap_or("").to_owned(),
                            b["reply"]["title"].as_str().unwrap_or("").to_owned(),
                            20,
                        )
                    })
                    .collect(),
                Some("list") => inter["action"]["sections"][0]["rows"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| {
                        (
                            r["id"].as_str().unwrap_or("").to_owned(),
                            r["title"].as_str().unwrap_or("").to_owned(),
                            24,
                        )
                    })
                    .collect(),
                _ => {
                    return graph_error(
                        StatusCode::BAD_REQUEST,
                        100,
                        "interactive.type is not supported",
                    );
                }
            };
            let max = if inter["type"] == "button" { 3 } else { 10 };
            let bad = pairs.is_empty()
                || pairs.len() > max
                || pairs.iter().any(|(id, title, limit)| {
                    id.is_empty()
                        || id.len() > 256
                        || title.is_empty()
                        || title.chars().count() > *limit
                });
            if bad {
                return graph_error(StatusCode::BAD_REQUEST, 100, "invalid interactive action");
            }
            sent.buttons = pairs
                .into_iter()
                .map(|(id, title, _)| (title, id))
                .collect();
        }
        "image" | "video" | "audio" | "document" | "sticker" => {
            let id = body[&kind]["id"].as_str().unwrap_or_default();
            let Some((_, bytes)) = shared.media.get(id) else {
                return graph_error(StatusCode::BAD_REQUEST, 131_053, "Media upload error");
            };
            sent.media = Some(bytes.clone());
            sent.text = body[&kind]["caption"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
        }
        _ => return graph_error(StatusCode::BAD_REQUEST, 131_051, "Unsupported message type"),
    }
    shared.next += 1;
    sent.id = format!("wamid.out.{}", shared.next);
    let id = sent.id.clone();
    shared.sent.push(sent);
    let count = shared.sent.len();
    if let Some(watch) = &shared.sent_watch {
        watch.send_replace(count);
    }
    if disconnect {
        return broken_connection();
    }
    Json(
        json!({"messaging_product": "whatsapp", "contacts": [{"input": to, "wa_id": to}],
        "messages": [{"id": id}]}),
    )
    .into_response()
}

/// A response whose body fails at once: the server aborts the connection with the answer
/// unfinished, so the client never reads a complete response.
fn broken_connection() -> Response {
    let broken = futures_util::stream::once(async {
        Err::<axum::body::Bytes, _>(std::io::Error::other("connection dropped by fault"))
    });
    Response::new(axum::body::Body::from_stream(broken))
}

pub(super) async fn upload(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: HeaderMap,
    mut form: Multipart,
) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    let (mut product, mut mime, mut file) = (None, None, None);
    while let Ok(Some(field)) = form.next_field().await {
        match field.name().unwrap_or_default() {
            "messaging_product" => product = field.text().await.ok(),
            "type" => mime = field.text().await.ok(),
            "file" => file = field.bytes().await.ok(),
            _ => {}
        }
    }
    let (Some(product), Some(mime), Some(file)) = (product, mime, file) else {
        return graph_error(
            StatusCode::BAD_REQUEST,
            100,
            "messaging_product, type and file are required",
        );
    };
    if product != "whatsapp" {
        return graph_error(
            StatusCode::BAD_REQUEST,
            100,
            "messaging_product must be whatsapp",
        );
    }
    let mut shared = shared.lock().unwrap();
    shared.next += 1;
    let id = format!("{}", 9_000_000 + shared.next);
    shared.media.insert(id.clone(), (mime, file.to_vec()));
    Json(json!({"id": id})).into_response()
}

pub(super) async fn media_info(
    State(shared): State<Arc<Mutex<Shared>>>,
    Path((_version, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    let shared = shared.lock().unwrap();
    let Some((mime, bytes)) = shared.media.get(&id) else {
        return graph_error(StatusCode::NOT_FOUND, 100, "Unsupported get request");
    };
    Json(
        json!({"messaging_product": "whatsapp", "url": format!("{}/download/{id}", shared.base),
        "mime_type": mime, "sha256": hex::encode(Sha256::digest(bytes)),
        "file_size": bytes.len(), "id": id}),
    )
    .into_response()
}

pub(super) async fn media_bytes(
    State(shared): State<Arc<Mutex<Shared>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    match shared.lock().unwrap().media.get(&id) {
        Some((_, bytes)) => bytes.clone().into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
