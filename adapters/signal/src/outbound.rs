//! Outbound operations as signal-cli JSON-RPC calls: `send` (text with style ranges, a
//! quote for replies, attachments as RFC 2397 data URIs so the daemon may run on another
//! host), `sendTyping`, `remoteDelete`. A sent message's id is `<timestamp>:<account>`.

use std::path::Path;

use base64::Engine;
use hermes_adapter::{SendErrorKind, SendResult};
use serde_json::{Map, Value, json};

use crate::rpc::{Rpc, RpcError};
use crate::settings::{MAX_ATTACHMENT_BYTES, Settings};

/// signal-cli's error code for a send refused because of a changed safety number.
const UNTRUSTED_KEY_ERROR: i64 = -4;

/// `recipient` or `groupId` for a chat id (`group:<id>` names a group).
pub fn target(chat_id: &str) -> Map<String, Value> {
    let mut params = Map::new();
    match chat_id.strip_prefix("group:") {
        Some(group) => params.insert("groupId".into(), json!(group)),
        None => params.insert("recipient".into(), json!([chat_id])),
    };
    params
}

/// `(timestamp, author)` of a message id as this adapter writes them.
pub fn parse_message_id(id: &str) -> Option<(i64, &str)> {
    let (ts, author) = id.split_once(':')?;
    Some((ts.parse().ok()?, author))
}

/// The outcome of a call that sends something: the new message's timestamp, or the
/// contract's typed failure.
pub async fn sent(rpc: &Rpc, method: &str, params: Map<String, Value>) -> Result<i64, SendResult> {
    match rpc.call(method, Value::Object(params)).await {
        Ok(result) => Ok(result.get("timestamp").and_then(Value::as_i64).unwrap_or(0)),
        Err(e) => Err(failure(e)),
    }
}

pub fn failure(error: RpcError) -> SendResult {
    let kind = match &error {
        RpcError::RateLimited(wait) => return SendResult::rate_limited(*wait),
        RpcError::Unreachable(_) => SendErrorKind::Transient,
        RpcError::NoAnswer(_) => SendErrorKind::Ambiguous,
        RpcError::Http(status) if *status >= 500 => SendErrorKind::Transient,
        RpcError::Http(_) => SendErrorKind::Unknown,
        RpcError::Rpc { code, data, .. } => {
            let types: Vec<&str> = data
                .pointer("/response/results")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|r| r.get("type")?.as_str())
                .collect();
            if *code == UNTRUSTED_KEY_ERROR || types.contains(&"IDENTITY_FAILURE") {
                SendErrorKind::Forbidden
            } else if types.contains(&"UNREGISTERED_FAILURE") {
                SendErrorKind::NotFound
            } else if types.contains(&"NETWORK_FAILURE") {
                SendErrorKind::Transient
            } else {
                SendErrorKind::Unknown
            }
        }
    };
    SendResult::failed(kind, error.to_string())
}

/// A file as the data URI signal-cli takes for `attachments`
/// (`data:<mime>;filename=<name>;base64,<data>`, signal-cli(1) `send --attachment`).
pub async fn data_uri(path: &Path) -> Result<String, SendResult> {
    let meta = tokio::fs::metadata(path).await.map_err(|e| {
        SendResult::failed(
            SendErrorKind::NotFound,
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    if meta.len() > MAX_ATTACHMENT_BYTES {
        return Err(SendResult::failed(
            SendErrorKind::TooLong,
            format!(
                "{} is {} bytes; Signal takes at most {MAX_ATTACHMENT_BYTES}",
                path.display(),
                meta.len()
            ),
        ));
    }
    let bytes = tokio::fs::read(path).await.map_err(|e| {
        SendResult::failed(
            SendErrorKind::NotFound,
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("file")
        .replace([';', ',', ' '], "_");
    let mime = mime_of(path);
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    Ok(format!("data:{mime};filename={name};base64,{data}"))
}

fn mime_of(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_lowercase();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "mp4" => "video/mp4",
        "mp3" => "audio/mpeg",
        "m4a" => "audio/mp4",
        "ogg" | "oga" => "audio/ogg",
        "aac" => "audio/aac",
        "pdf" => "application/pdf",
        "txt" | "md" => "text/plain",
        "json" => "application/json",
        _ => "application/octet-stream",
    }
}

/// The file extension to cache a fetched attachment under.
pub fn extension_of(content_type: &str) -> &'static str {
    match content_type {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "video/mp4" => "mp4",
        "audio/mpeg" => "mp3",
        "audio/mp4" => "m4a",
        "audio/ogg" => "ogg",
        "audio/aac" => "aac",
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        _ => "bin",
    }
}

/// The settings' account as the `account` param (required by a multi-account daemon,
/// accepted by a single-account one).
pub fn with_account(settings: &Settings, mut params: Map<String, Value>) -> Map<String, Value> {
    params.insert("account".into(), json!(settings.account));
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_ids() {
        assert_eq!(
            Value::Object(target("group:AB==")),
            json!({"groupId": "AB=="})
        );
        assert_eq!(Value::Object(target("+15")), json!({"recipient": ["+15"]}));
        assert_eq!(parse_message_id("17:+15"), Some((17, "+15")));
        assert_eq!(parse_message_id("x"), None);
    }

    #[test]
    fn daemon_errors_map_to_the_contract() {
        let unregistered = RpcError::Rpc {
            code: -1,
            message: "Failed to send message".into(),
            data: json!({"response": {"results": [{"type": "UNREGISTERED_FAILURE"}]}}),
        };
        assert_eq!(failure(unregistered).kind(), Some(SendErrorKind::NotFound));
        assert_eq!(
            failure(RpcError::NoAnswer("t".into())).kind(),
            Some(SendErrorKind::Ambiguous)
        );
        assert_eq!(
            failure(RpcError::Unreachable("t".into())).kind(),
            Some(SendErrorKind::Transient)
        );
    }
}
