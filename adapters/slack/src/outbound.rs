//! The core's outbound operations as Web API calls, one attempt each: `chat.postMessage`
//! (mrkdwn, in the session's thread), `chat.update`, `chat.delete`, the assistant thread
//! status as the typing indicator, Block Kit prompts, file uploads. Cosmetic follow-ups
//! (clearing the status, progress reactions) run in the background so a send's latency
//! is its one call.

use std::sync::Arc;

use hermes_adapter::{Outbound, OutboundKind, SendErrorKind, SendResult};
use serde_json::{Value, json};

use crate::adapter::Shared;
use crate::api::{ApiError, Token};
use crate::files::{self, UploadError};
use crate::interactive::{SECTION_TEXT_LIMIT, prompt_blocks};
use crate::memory::key;
use crate::mrkdwn::{escape, to_mrkdwn};
use crate::settings::Settings;

/// The thread a reply goes to (reference `_resolve_thread_ts`): the session's thread, or
/// the replied-to message; with `reply_in_thread: false` only a real thread, never the
/// synthetic one a top-level message keys its session by.
pub fn reply_thread(
    settings: &Settings,
    reply_to: Option<&str>,
    thread_id: Option<&str>,
) -> Option<String> {
    if !settings.reply_in_thread {
        return thread_id
            .filter(|thread| Some(*thread) != reply_to)
            .map(str::to_owned);
    }
    thread_id.or(reply_to).map(str::to_owned)
}

fn ts_of(answer: &Value) -> Option<String> {
    answer.get("ts").and_then(Value::as_str).map(str::to_owned)
}

pub(crate) async fn send(shared: &Arc<Shared>, outbound: Outbound) -> SendResult {
    let Outbound {
        chat_id,
        thread_id,
        kind,
    } = outbound;
    let api = &shared.api;
    let result = match kind {
        OutboundKind::Text {
            text,
            reply_to,
            plain,
        } => {
            let thread = reply_thread(&shared.settings, reply_to.as_deref(), thread_id.as_deref());
            let text = if plain {
                escape(&text)
            } else {
                to_mrkdwn(&text)
            };
            let mut body = json!({"channel": chat_id, "text": text, "mrkdwn": !plain});
            if let Some(thread) = &thread {
                body["thread_ts"] = json!(thread);
            }
            let answer = api.call("chat.postMessage", Token::Bot, &body).await;
            if let Ok(answer) = &answer {
                after_reply(
                    shared,
                    &chat_id,
                    thread.as_deref(),
                    thread_id.as_deref(),
                    answer,
                );
            }
            answer.map(|a| ts_of(&a))
        }
        OutboundKind::Edit { message_id, text } => {
            let body = json!({"channel": chat_id, "ts": message_id, "text": to_mrkdwn(&text)});
            api.call("chat.update", Token::Bot, &body)
                .await
                .map(|_| Some(message_id))
        }
        OutboundKind::Delete { message_id } => {
            let body = json!({"channel": chat_id, "ts": message_id});
            api.call("chat.delete", Token::Bot, &body)
                .await
                .map(|_| None)
        }
        OutboundKind::Typing => typing(shared, &chat_id, thread_id.as_deref()).await,
        OutboundKind::Prompt { text, buttons } => {
            let thread = reply_thread(&shared.settings, None, thread_id.as_deref());
            let text = to_mrkdwn(&text);
            let fallback: String = text.chars().take(SECTION_TEXT_LIMIT).collect();
            let mut body = json!({
                "channel": chat_id, "text": fallback, "blocks": prompt_blocks(&text, &buttons),
            });
            if let Some(thread) = &thread {
                body["thread_ts"] = json!(thread);
            }
            let answer = api.call("chat.postMessage", Token::Bot, &body).await;
            if let Ok(answer) = &answer {
                after_reply(shared, &chat_id, thread.as_deref(), None, answer);
            }
            answer.map(|a| ts_of(&a))
        }
        // Slack has no voice bubbles: a voice note is an audio file, its text the file's
        // message (`initial_comment`), so the answer reads in the channel too.
        OutboundKind::Media { path, caption } | OutboundKind::Voice { path, caption, .. } => {
            let thread = reply_thread(&shared.settings, None, thread_id.as_deref());
            match files::upload(api, &chat_id, thread.as_deref(), &path, caption.as_deref()).await {
                Ok(_) => Ok(None),
                Err(UploadError::Api(e)) => Err(e),
                Err(UploadError::Local(message)) => {
                    return SendResult::failed(SendErrorKind::NotFound, message);
                }
            }
        }
    };
    match result {
        Ok(message_id) => SendResult::sent(message_id),
        Err(error) => {
            tracing::debug!(platform = "slack", chat_id = %chat_id, error = %error, "send failed");
            error.into_send_result()
        }
    }
}

/// Sets the assistant status in the session's thread (Slack shows it next to the bot's
/// name), and marks the addressed message with `eyes` the first time. Outside a thread
/// there is nothing to show, as in the reference.
async fn typing(
    shared: &Arc<Shared>,
    chat_id: &str,
    thread_id: Option<&str>,
) -> Result<Option<String>, ApiError> {
    let Some(thread) = thread_id else {
        return Ok(None);
    };
    let status_key = key(chat_id, thread);
    let eyes_for = {
        let mut memory = shared.memory();
        memory.status_threads.insert(&status_key);
        match memory.reacting.get_mut(&status_key) {
            Some(reacting) if !reacting.eyes_added => {
                reacting.eyes_added = true;
                Some((reacting.channel.clone(), reacting.ts.clone()))
            }
            _ => None,
        }
    };
    if let Some((channel, ts)) = eyes_for {
        background(
            shared,
            "reactions.add",
            json!({"channel": channel, "timestamp": ts, "name": "eyes"}),
        );
    }
    let body = json!({
        "channel_id": chat_id, "thread_ts": thread,
        "status": shared.settings.typing_status_text,
    });
    shared
        .api
        .call("assistant.threads.setStatus", Token::Bot, &body)
        .await
        .map(|_| None)
}

/// Remembers where the bot spoke (thread replies then continue without a mention), clears
/// a showing status, and swaps the addressed message's `eyes` for a check mark.
fn after_reply(
    shared: &Arc<Shared>,
    chat_id: &str,
    thread: Option<&str>,
    session_thread: Option<&str>,
    answer: &Value,
) {
    let session_key = key(chat_id, session_thread.or(thread).unwrap_or(""));
    let (clear_status, reacting) = {
        let mut memory = shared.memory();
        if let Some(ts) = answer.get("ts").and_then(Value::as_str) {
            memory.bot_threads.insert(ts);
        }
        if let Some(thread) = thread {
            memory.bot_threads.insert(thread);
        }
        let clear = thread.filter(|t| memory.status_threads.remove(&key(chat_id, t)));
        (
            clear.map(str::to_owned),
            memory.reacting.remove(&session_key),
        )
    };
    if let Some(thread) = clear_status {
        background(
            shared,
            "assistant.threads.setStatus",
            json!({"channel_id": chat_id, "thread_ts": thread, "status": ""}),
        );
    }
    if let Some(reacting) = reacting {
        let target = json!({"channel": reacting.channel, "timestamp": reacting.ts});
        if reacting.eyes_added {
            let mut remove = target.clone();
            remove["name"] = json!("eyes");
            background(shared, "reactions.remove", remove);
        }
        let mut done = target;
        done["name"] = json!("white_check_mark");
        background(shared, "reactions.add", done);
    }
}

/// A best-effort call whose failure only matters to debug logs.
fn background(shared: &Arc<Shared>, method: &'static str, body: Value) {
    let shared = shared.clone();
    tokio::spawn(async move {
        if let Err(e) = shared.api.call(method, Token::Bot, &body).await {
            tracing::debug!(platform = "slack", method, error = %e, "best-effort call failed");
        }
    });
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn settings(reply_in_thread: bool) -> Settings {
        let extra = json!({"reply_in_thread": reply_in_thread});
        Settings::from_config(
            "xoxb-t",
            "xapp-t",
            extra.as_object().unwrap(),
            &BTreeMap::new(),
        )
        .unwrap()
    }

    #[test]
    fn replies_go_to_the_thread_unless_disabled() {
        let threaded = settings(true);
        assert_eq!(
            reply_thread(&threaded, Some("1.1"), Some("1.1")).as_deref(),
            Some("1.1")
        );
        assert_eq!(
            reply_thread(&threaded, Some("2.2"), None).as_deref(),
            Some("2.2")
        );
        assert_eq!(reply_thread(&threaded, None, None), None);
        let flat = settings(false);
        // A synthetic thread (the message's own ts) is answered in the channel...
        assert_eq!(reply_thread(&flat, Some("1.1"), Some("1.1")), None);
        // ...a real thread stays a thread.
        assert_eq!(
            reply_thread(&flat, Some("1.2"), Some("1.1")).as_deref(),
            Some("1.1")
        );
        assert_eq!(reply_thread(&flat, Some("1.2"), None), None);
    }
}
