//! Outbound operations, one REST attempt each (the core retries): text with Discord
//! markdown (or escaped when `plain`), replies by `message_reference`, edits, deletes,
//! typing, button prompts (components), file attachments (multipart), and thread renames.
//! A reply whose target is gone is re-sent without the reference, as the reference does.

use hermes_adapter::{Button, OutboundKind, SendErrorKind, SendResult};
use serde_json::{Value, json};

use crate::inner::Inner;
use crate::markdown::escape_markdown;
use crate::rest::{RestError, Upload};

/// Mentions the agent's text may ping: users and the replied-to user, never @everyone or
/// roles (reference `_build_allowed_mentions` defaults).
fn allowed_mentions() -> Value {
    json!({"parse": ["users"], "replied_user": true})
}

fn failed(error: RestError) -> SendResult {
    match (error.kind, error.retry_after) {
        (SendErrorKind::RateLimited, Some(retry_after)) => SendResult::rate_limited(retry_after),
        (kind, _) => SendResult::failed(kind, error.to_string()),
    }
}

/// Discord rejects a reply to a deleted message (10008) or a system message (50035).
fn reply_target_rejected(error: &RestError) -> bool {
    error.code == Some(10008)
        || (error.code == Some(50035)
            && (error.message.contains("reply") || error.message.contains("REPLIES_")))
}

/// Discord's limit on a button's `custom_id`
/// (<https://discord.com/developers/docs/components/reference#button>).
const MAX_CUSTOM_ID: usize = 100;

/// Action rows of up to five buttons (Discord's limits: 5 rows, labels ≤ 80, ids ≤ 100).
/// A button whose data is longer than a `custom_id` may be is refused: cut, it would
/// come back as a different command.
fn components(buttons: &[Button]) -> Result<Value, SendResult> {
    if let Some(long) = buttons
        .iter()
        .find(|b| b.data.chars().count() > MAX_CUSTOM_ID)
    {
        return Err(SendResult::failed(
            SendErrorKind::BadFormat,
            format!(
                "button \"{}\" carries {} characters of data; Discord allows {MAX_CUSTOM_ID} in a custom_id",
                long.label,
                long.data.chars().count()
            ),
        ));
    }
    let rows: Vec<Value> = buttons
        .chunks(5)
        .take(5)
        .map(|row| {
            let buttons: Vec<Value> = row
                .iter()
                .map(|b| {
                    let label: String = b.label.chars().take(80).collect();
                    json!({"type": 2, "style": 1, "label": label, "custom_id": b.data})
                })
                .collect();
            json!({"type": 1, "components": buttons})
        })
        .collect();
    Ok(Value::Array(rows))
}

pub async fn send(
    inner: &Inner,
    chat_id: &str,
    thread_id: Option<&str>,
    kind: OutboundKind,
) -> SendResult {
    // An auto-thread still being opened is waited for (or swapped for its parent).
    let target = inner.threads.target(thread_id.unwrap_or(chat_id)).await;
    let target = target.as_str();
    let rest = &inner.rest;
    match kind {
        OutboundKind::Text {
            text,
            reply_to,
            plain,
        } => {
            let content = if plain { escape_markdown(&text) } else { text };
            let mut body = json!({"content": content, "allowed_mentions": allowed_mentions()});
            if let Some(reply_to) = &reply_to {
                body["message_reference"] =
                    json!({"message_id": reply_to, "fail_if_not_exists": false});
            }
            match rest.create_message(target, &body, &[]).await {
                Ok(message) => SendResult::sent(Some(message.id)),
                Err(error) if reply_to.is_some() && reply_target_rejected(&error) => {
                    tracing::warn!(platform = "discord", %error, "reply target rejected; sending without the reference");
                    if let Some(map) = body.as_object_mut() {
                        map.remove("message_reference");
                    }
                    match rest.create_message(target, &body, &[]).await {
                        Ok(message) => SendResult::sent(Some(message.id)),
                        Err(error) => failed(error),
                    }
                }
                Err(error) => failed(error),
            }
        }
        OutboundKind::Edit { message_id, text } => {
            let body = json!({"content": text, "allowed_mentions": allowed_mentions()});
            match rest.edit_message(target, &message_id, &body).await {
                Ok(message) => SendResult::sent(Some(message.id)),
                Err(error) => failed(error),
            }
        }
        OutboundKind::Delete { message_id } => match rest.delete_message(target, &message_id).await
        {
            Ok(()) => SendResult::sent(Some(message_id)),
            Err(error) => failed(error),
        },
        OutboundKind::Typing => match rest.trigger_typing(target).await {
            Ok(()) => SendResult::sent(None),
            Err(error) => failed(error),
        },
        OutboundKind::Prompt { text, buttons } => {
            let mut body = json!({"content": text, "allowed_mentions": allowed_mentions()});
            if !buttons.is_empty() {
                body["components"] = match components(&buttons) {
                    Ok(rows) => rows,
                    Err(refused) => return refused,
                };
            }
            match rest.create_message(target, &body, &[]).await {
                Ok(message) => SendResult::sent(Some(message.id)),
                Err(error) => failed(error),
            }
        }
        OutboundKind::Media { path, caption } => {
            let bytes = match crate::voice::read_for_upload(inner, target, &path).await {
                Ok(bytes) => bytes,
                Err(refused) => return refused,
            };
            let file_name = std::path::Path::new(&path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "file".into());
            let body = json!({
                "content": caption.unwrap_or_default(),
                "allowed_mentions": allowed_mentions(),
                "attachments": [{"id": 0, "filename": file_name}],
            });
            let upload = Upload {
                file_name,
                bytes,
                content_type: None,
            };
            match rest.create_message(target, &body, &[upload]).await {
                Ok(message) => SendResult::sent(Some(message.id)),
                Err(error) => failed(error),
            }
        }
        OutboundKind::Voice {
            path,
            caption,
            duration_secs,
            waveform,
        } => {
            crate::voice::send_voice(inner, target, &path, caption, duration_secs, &waveform).await
        }
    }
}

/// Renames a thread (the session title): whitespace collapsed, at most 100 characters.
pub async fn rename_thread(inner: &Inner, thread_id: &str, name: &str) -> Result<(), RestError> {
    let cleaned = name.split_whitespace().collect::<Vec<_>>().join(" ");
    let cleaned = if cleaned.chars().count() > 100 {
        format!(
            "{}...",
            cleaned.chars().take(97).collect::<String>().trim_end()
        )
    } else {
        cleaned
    };
    if cleaned.is_empty() {
        return Ok(());
    }
    let channel = inner
        .rest
        .modify_channel(thread_id, &json!({"name": cleaned}))
        .await?;
    inner.with_directory(|d| {
        if let Some(info) = d.channels.get_mut(thread_id) {
            info.name = channel.name.clone();
        }
    });
    Ok(())
}
