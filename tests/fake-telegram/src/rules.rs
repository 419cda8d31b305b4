//! Bot API rules the fake enforces beyond text formatting, each from Telegram's documentation
//! (linked at each rule): `setWebhook`'s URL and `secret_token`, upload size limits, group →
//! supergroup migration, and flood control on `getUpdates`.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::server::{ApiFailure, bad_request};
use crate::state::{Inner, UploadedFile, param_i64};

/// https://core.telegram.org/bots/api#setwebhook: "Ports currently supported for webhooks:
/// 443, 80, 88, 8443", HTTPS only ("we will send an HTTPS POST request"), and `secret_token`
/// is "1-256 characters. Only characters A-Z, a-z, 0-9, _ and - are allowed".
pub(crate) fn check_set_webhook(params: &Map<String, Value>) -> Result<(), ApiFailure> {
    let url = match params.get("url") {
        Some(Value::String(url)) => url.clone(),
        _ => String::new(),
    };
    if !url.is_empty() {
        let Some(rest) = url.strip_prefix("https://") else {
            return Err(bad_request(
                "bad webhook: HTTPS url must be provided for webhook",
            ));
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let port = match authority.rsplit_once(':') {
            Some((_, port)) if !authority.ends_with(']') => port.parse::<u16>().unwrap_or(0),
            _ => 443,
        };
        if ![443, 80, 88, 8443].contains(&port) {
            return Err(bad_request(
                "bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443",
            ));
        }
    }
    if let Some(Value::String(secret)) = params.get("secret_token") {
        let ok = (1..=256).contains(&secret.chars().count())
            && secret
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !ok {
            return Err(bad_request("secret token contains unallowed characters"));
        }
    }
    Ok(())
}

/// https://core.telegram.org/bots/api#sendphoto: "The photo must be at most 10 MB in size";
/// https://core.telegram.org/bots/api#sending-files: other files "up to 50 MB" through
/// multipart uploads (a local server started with `--local` allows 2000 MB,
/// https://core.telegram.org/bots/api#using-a-local-bot-api-server).
pub(crate) fn check_upload(
    method: &str,
    files: &[UploadedFile],
    local: bool,
) -> Result<(), ApiFailure> {
    const MB: usize = 1024 * 1024;
    let cap = if local { 2000 * MB } else { 50 * MB };
    for file in files {
        if method == "sendphoto" && file.field == "photo" && file.bytes > 10 * MB {
            return Err(bad_request("PHOTO_INVALID_DIMENSIONS"));
        }
        if file.bytes > cap {
            return Err(ApiFailure {
                status: 413,
                description: "Request Entity Too Large".into(),
                parameters: None,
            });
        }
    }
    Ok(())
}

/// A send to a group that became a supergroup fails with `migrate_to_chat_id` in
/// `parameters` (https://core.telegram.org/bots/api#responseparameters: "The group has been
/// migrated to a supergroup with the specified identifier").
pub(crate) fn check_migrated(inner: &Inner, params: &Map<String, Value>) -> Result<(), ApiFailure> {
    let Some(chat_id) = params.get("chat_id").and_then(param_i64) else {
        return Ok(());
    };
    match inner.migrated.get(&chat_id) {
        Some(new_id) => Err(ApiFailure {
            status: 400,
            description: "Bad Request: group chat was upgraded to a supergroup chat".into(),
            parameters: Some(json!({"migrate_to_chat_id": new_id})),
        }),
        None => Ok(()),
    }
}

/// Flood control applies to every method: "If you exceed these limits, you will get 429
/// errors" with `retry_after` (https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this,
/// https://core.telegram.org/bots/api#responseparameters). When a limit is armed, getUpdates
/// calls beyond it within one rolling second are refused that way. Every call is counted.
pub(crate) fn pace_get_updates(inner: &mut Inner) -> Result<(), ApiFailure> {
    let now = Instant::now();
    inner.get_updates_at.push(now);
    let Some(limit) = inner.get_updates_limit else {
        return Ok(());
    };
    let window_start = now.checked_sub(Duration::from_secs(1)).unwrap_or(now);
    let recent = inner
        .get_updates_at
        .iter()
        .rev()
        .take_while(|at| **at > window_start)
        .count();
    if recent > limit {
        return Err(ApiFailure {
            status: 429,
            description: "Too Many Requests: retry after 1".into(),
            parameters: Some(json!({"retry_after": 1})),
        });
    }
    Ok(())
}
