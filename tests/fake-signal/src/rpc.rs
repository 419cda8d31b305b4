//! `POST /api/v1/rpc`: one JSON-RPC 2.0 request per call, as signal-cli's HttpServerHandler
//! takes it (https://github.com/AsamK/signal-cli/blob/master/src/main/java/org/asamk/signal/http/HttpServerHandler.java):
//! a body that is not `application/json` is answered 415, a non-POST 405; errors use the
//! codes of SignalJsonRpcCommandHandler (-32601 method not implemented, -32602 invalid
//! params, -1 user error, -5 rate limit with the send results under `data.response`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use crate::state::{Sent, Shared, first, list};

const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const USER_ERROR: i64 = -1;
const RATELIMIT_ERROR: i64 = -5;

type Answer = Result<Value, (i64, String, Value)>;

pub(crate) async fn handle(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json_body {
        return StatusCode::UNSUPPORTED_MEDIA_TYPE.into_response();
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        // JSON-RPC 2.0 §5.1: parse error -32700, id null.
        return axum::Json(json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32700, "message": "Parse error", "data": null}}))
        .into_response();
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = request.get("method").and_then(Value::as_str).unwrap_or("");
    let params = request.get("params").cloned().unwrap_or(json!({}));
    let answer = match account_ok(&shared, &params) {
        Err(e) => Err(e),
        Ok(()) => call(&shared, method, &params),
    };
    let body = match answer {
        Ok(result) => json!({"jsonrpc": "2.0", "result": result, "id": id}),
        Err((code, message, data)) => {
            json!({"jsonrpc": "2.0", "error": {"code": code, "message": message, "data": data}, "id": id})
        }
    };
    axum::Json(body).into_response()
}

/// Multi-account mode: an `account` param must name a known account
/// (SignalJsonRpcCommandHandler.getManagerFromParams).
fn account_ok(shared: &Shared, params: &Value) -> Result<(), (i64, String, Value)> {
    match params.get("account").and_then(Value::as_str) {
        Some(account) if account != shared.account => Err((
            INVALID_PARAMS,
            "Specified account does not exist".into(),
            Value::Null,
        )),
        _ => Ok(()),
    }
}

fn call(shared: &Shared, method: &str, params: &Value) -> Answer {
    match method {
        "send" => send(shared, params),
        "sendTyping" => {
            target(params)?;
            if !params.get("stop").and_then(Value::as_bool).unwrap_or(false) {
                *shared.typing.lock().unwrap() += 1;
            }
            Ok(json!({}))
        }
        "remoteDelete" => {
            target(params)?;
            params
                .get("targetTimestamp")
                .and_then(Value::as_i64)
                .ok_or((
                    USER_ERROR,
                    "targetTimestamp is required".to_owned(),
                    Value::Null,
                ))?;
            Ok(json!({"timestamp": shared.clock(), "results": []}))
        }
        // signal-cli(1) getAttachment: `--id` and the sender (`--recipient`) or
        // `--group-id`; JSON output `{"data": "<base64>"}` (JsonAttachmentData).
        "getAttachment" => {
            let id = first(params, "id").ok_or((
                USER_ERROR,
                "id is required".to_owned(),
                Value::Null,
            ))?;
            if first(params, "recipient").is_none() && first(params, "groupId").is_none() {
                return Err((
                    USER_ERROR,
                    "recipient or groupId is required".into(),
                    Value::Null,
                ));
            }
            let stored = shared.attachments.lock().unwrap().get(&id).cloned();
            let bytes = stored.ok_or((
                USER_ERROR,
                "Attachment file not found".to_owned(),
                Value::Null,
            ))?;
            Ok(json!({"data": base64::engine::general_purpose::STANDARD.encode(bytes)}))
        }
        other => {
            shared.unexpected(format!("{other} {params}"));
            Err((
                METHOD_NOT_FOUND,
                "Method not implemented".into(),
                Value::Null,
            ))
        }
    }
}

/// `recipient` or `groupId`, exactly one (signal-cli(1): RECIPIENT or `-g GROUP`).
fn target(params: &Value) -> Result<String, (i64, String, Value)> {
    match (first(params, "recipient"), first(params, "groupId")) {
        (Some(number), None) => Ok(number),
        (None, Some(group)) => Ok(format!("group:{group}")),
        _ => Err((
            USER_ERROR,
            "exactly one of recipient and groupId is required".into(),
            Value::Null,
        )),
    }
}

/// `send`: answers `{"timestamp", "results"}` (SendMessageResultUtils.outputResult); a
/// rate-limited send is error -5 carrying the results, each RATE_LIMIT_FAILURE with
/// `retryAfterSeconds` (JsonSendMessageResult).
fn send(shared: &Shared, params: &Value) -> Answer {
    let chat = target(params)?;
    let message = params
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let mut attachments = Vec::new();
    for uri in list(params, "attachments")
        .into_iter()
        .chain(list(params, "attachment"))
    {
        attachments.push(data_uri(&uri).ok_or((
            USER_ERROR,
            format!(
                "Invalid attachment: {}",
                uri.chars().take(40).collect::<String>()
            ),
            Value::Null,
        ))?);
    }
    if message.is_empty() && attachments.is_empty() {
        return Err((USER_ERROR, "No message given".into(), Value::Null));
    }
    let timestamp = shared.clock();
    let address = json!({"uuid": format!("uuid-{chat}"), "number": chat});
    if let Some(wait) = shared.rate_limit.lock().unwrap().take() {
        let data = json!({"response": {"timestamp": timestamp, "results": [
            {"recipientAddress": address, "type": "RATE_LIMIT_FAILURE", "retryAfterSeconds": wait}]}});
        return Err((
            RATELIMIT_ERROR,
            "Failed to send message due to rate limiting".into(),
            data,
        ));
    }
    shared.record_sent(Sent {
        timestamp,
        chat,
        message,
        styles: list(params, "textStyle")
            .into_iter()
            .chain(list(params, "textStyles"))
            .collect(),
        quote: params.get("quoteTimestamp").and_then(Value::as_i64),
        attachments,
        at: std::time::Instant::now(),
    });
    Ok(
        json!({"timestamp": timestamp, "results": [{"recipientAddress": address, "type": "SUCCESS"}]}),
    )
}

/// An RFC 2397 data URI with signal-cli's optional `filename=` parameter
/// (signal-cli(1) `send --attachment`): (mime type, filename, bytes).
fn data_uri(uri: &str) -> Option<(String, String, Vec<u8>)> {
    let rest = uri.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let mut parts = meta.split(';');
    let mime = parts.next()?.to_owned();
    let mut filename = String::new();
    let mut base64 = false;
    for part in parts {
        if let Some(name) = part.strip_prefix("filename=") {
            filename = name.to_owned();
        } else if part == "base64" {
            base64 = true;
        }
    }
    if !base64 {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()?;
    Some((mime, filename, bytes))
}
