//! The core's outbound operations as Bot API calls: one attempt each, except the protocol
//! cases the reference handles itself ("message to be replied not found" → once without
//! the reply; "message thread not found" → once more, then without the thread; an edit
//! rejected for its formatting → once as plain text; "message is not modified" = success;
//! a group upgraded to a supergroup → once more to the supergroup, which later sends use).
//! Files Telegram would refuse are not sent blindly (`media_limits`).

use std::path::Path;

use hermes_adapter::{Button, OutboundKind, SendErrorKind, SendResult};
use serde_json::{Map, Value, json};

use crate::api::{ApiError, BotApi};
use crate::gating::GENERAL_TOPIC;
use crate::markdown;
use crate::media;
use crate::media_limits::{self, Upload};
use crate::migrations::Migrations;
use crate::settings::{ReplyToMode, Settings};

/// Telegram's limit on `callback_data`.
const CALLBACK_DATA_MAX_BYTES: usize = 64;

pub struct Sender<'a> {
    pub api: &'a BotApi,
    pub settings: &'a Settings,
    pub migrations: &'a Migrations,
}

impl Sender<'_> {
    pub async fn send(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
        kind: OutboundKind,
    ) -> SendResult {
        let target = self.migrations.resolve(chat_id);
        let result = self.send_to(&target, thread_id, kind.clone()).await;
        let moved = self.migrations.resolve(chat_id);
        if result.is_ok() || moved == target {
            if result.kind() == Some(SendErrorKind::Forbidden) {
                tracing::warn!(platform = "telegram", chat_id = %target, error = ?result.error,
                    "Telegram refuses the bot in this chat (no rights, closed topic, or blocked); not retrying");
            }
            return result;
        }
        // The group became a supergroup during this send: once more, there. A plain group
        // has no topics, so there is no thread to keep.
        tracing::info!(platform = "telegram", chat_id, to_chat_id = %moved,
            "the group was upgraded to a supergroup; sending there from now on");
        self.send_to(&moved, None, kind).await
    }

    async fn send_to(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
        kind: OutboundKind,
    ) -> SendResult {
        let chat = chat_param(chat_id);
        match kind {
            OutboundKind::Text {
                text,
                reply_to,
                plain,
            } => {
                let reply_to = reply_to.filter(|_| self.settings.reply_to_mode != ReplyToMode::Off);
                self.send_text(chat, thread_id, &text, reply_to.as_deref(), plain, None)
                    .await
            }
            OutboundKind::Prompt { text, buttons } => {
                if let Some(long) = buttons
                    .iter()
                    .find(|b| b.data.len() > CALLBACK_DATA_MAX_BYTES)
                {
                    return SendResult::failed(
                        SendErrorKind::Unknown,
                        format!(
                            "button data {:?} is over Telegram's 64-byte callback_data limit",
                            long.data
                        ),
                    );
                }
                self.send_text(
                    chat,
                    thread_id,
                    &text,
                    None,
                    false,
                    Some(keyboard(&buttons)),
                )
                .await
            }
            OutboundKind::Edit { message_id, text } => self.edit(chat, &message_id, &text).await,
            OutboundKind::Delete { message_id } => {
                let params = json!({"chat_id": chat, "message_id": int_or_str(&message_id)});
                match self.call("deleteMessage", &params).await {
                    Ok(_) => SendResult::sent(Some(message_id)),
                    Err(e) => e.to_send_result(),
                }
            }
            OutboundKind::Typing => {
                let mut params = json!({"chat_id": chat, "action": "typing"});
                // Typing keeps the General topic's id (sends must omit it).
                if let Some(thread) = thread_id.and_then(|t| t.parse::<i64>().ok()) {
                    params["message_thread_id"] = json!(thread);
                }
                match self.call("sendChatAction", &params).await {
                    Ok(_) => SendResult::sent(None),
                    Err(e) => e.to_send_result(),
                }
            }
            OutboundKind::Media { path, caption } => {
                self.send_media(chat, thread_id, &path, caption.as_deref(), None)
                    .await
            }
            // A voice bubble: sendVoice takes OGG encoded with Opus
            // (https://core.telegram.org/bots/api#sendvoice), with its length in seconds.
            OutboundKind::Voice {
                path,
                caption,
                duration_secs,
                ..
            } => {
                self.send_media(
                    chat,
                    thread_id,
                    &path,
                    caption.as_deref(),
                    Some(duration_secs),
                )
                .await
            }
        }
    }

    async fn call(&self, method: &str, params: &Value) -> Result<Value, ApiError> {
        let result = self
            .api
            .call(method, params, self.settings.request_timeout)
            .await;
        self.note_migration(&params["chat_id"], &result);
        result
    }

    /// Remembers a supergroup upgrade a call ran into, for this send's retry and later ones.
    fn note_migration(&self, chat: &Value, result: &Result<Value, ApiError>) {
        if let Err(ApiError::Migrated { to_chat_id, .. }) = result {
            let from = match chat {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            self.migrations.record(&from, &to_chat_id.to_string());
        }
    }

    async fn send_text(
        &self,
        chat: Value,
        thread_id: Option<&str>,
        text: &str,
        reply_to: Option<&str>,
        plain: bool,
        reply_markup: Option<Value>,
    ) -> SendResult {
        let mut params = Map::new();
        params.insert("chat_id".into(), chat);
        if plain {
            params.insert("text".into(), json!(markdown::to_plain(text)));
        } else {
            params.insert("text".into(), json!(markdown::to_markdown_v2(text)));
            params.insert("parse_mode".into(), json!("MarkdownV2"));
        }
        if let Some(thread) = send_thread_id(thread_id) {
            params.insert("message_thread_id".into(), json!(thread));
        }
        if let Some(reply_to) = reply_to {
            // A quote whose message was deleted meanwhile must not cost a failed round trip
            // (https://core.telegram.org/bots/api#replyparameters).
            params.insert(
                "reply_parameters".into(),
                json!({"message_id": int_or_str(reply_to), "allow_sending_without_reply": true}),
            );
        }
        self.link_previews(&mut params);
        if let Some(markup) = reply_markup {
            params.insert("reply_markup".into(), markup);
        }
        let mut thread_retried = false;
        loop {
            match self
                .call("sendMessage", &Value::Object(params.clone()))
                .await
            {
                Ok(message) => return SendResult::sent(message_id(&message)),
                Err(e)
                    if e.says("message to be replied not found")
                        && params.contains_key("reply_parameters") =>
                {
                    tracing::info!(
                        platform = "telegram",
                        "reply target is gone; sending without the reply"
                    );
                    params.remove("reply_parameters");
                }
                Err(e)
                    if e.says("message thread not found")
                        && params.contains_key("message_thread_id") =>
                {
                    if thread_retried {
                        tracing::warn!(
                            platform = "telegram",
                            "forum topic not found twice; sending to the chat without the topic"
                        );
                        params.remove("message_thread_id");
                    }
                    thread_retried = true;
                }
                Err(e) => return e.to_send_result(),
            }
        }
    }

    async fn edit(&self, chat: Value, message_id: &str, text: &str) -> SendResult {
        let mut params = json!({"chat_id": chat, "message_id": int_or_str(message_id),
            "text": markdown::to_markdown_v2(text), "parse_mode": "MarkdownV2"});
        if let Some(params) = params.as_object_mut() {
            self.link_previews(params);
        }
        let mut result = self.call("editMessageText", &params).await;
        if let Err(e) = &result
            && e.to_send_result().kind() == Some(SendErrorKind::BadFormat)
        {
            params["text"] = json!(markdown::to_plain(text));
            params.as_object_mut().map(|p| p.remove("parse_mode"));
            result = self.call("editMessageText", &params).await;
        }
        match result {
            Ok(_) => SendResult::sent(Some(message_id.to_owned())),
            Err(e) if e.says("message is not modified") => {
                SendResult::sent(Some(message_id.to_owned()))
            }
            Err(e) => e.to_send_result(),
        }
    }

    /// `extra.disable_link_previews` (https://core.telegram.org/bots/api#linkpreviewoptions).
    fn link_previews(&self, params: &mut Map<String, Value>) {
        if self.settings.disable_link_previews {
            params.insert("link_preview_options".into(), json!({"is_disabled": true}));
        }
    }

    async fn send_media(
        &self,
        chat: Value,
        thread_id: Option<&str>,
        path: &str,
        caption: Option<&str>,
        voice_secs: Option<f32>,
    ) -> SendResult {
        let file_path = Path::new(path);
        let bytes = match tokio::fs::read(file_path).await {
            Ok(bytes) => bytes,
            Err(e) => {
                return SendResult::failed(
                    SendErrorKind::NotFound,
                    format!("cannot read {path}: {e}"),
                );
            }
        };
        let native = match voice_secs {
            Some(_) => ("sendVoice", "voice"),
            None => media::send_method(file_path),
        };
        let (method, field) = match media_limits::check(native, &bytes, self.settings.local_mode) {
            Upload::Send(method, field) => (method, field),
            Upload::Refuse(reason) => {
                return self.refuse_upload(&chat, thread_id, path, &reason).await;
            }
        };
        let file_name = file_path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("file")
            .to_owned();
        let chat_text = match &chat {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let part = match voice_secs {
            Some(_) => reqwest::multipart::Part::bytes(bytes)
                .file_name("voice.ogg")
                .mime_str("audio/ogg")
                .expect("a valid media type"),
            None => reqwest::multipart::Part::bytes(bytes).file_name(file_name),
        };
        let mut form = reqwest::multipart::Form::new()
            .text("chat_id", chat_text)
            .part(field, part);
        if let Some(secs) = voice_secs {
            // Whole seconds, at least one (a shorter note would show as 0:00).
            form = form.text("duration", (secs.ceil() as u64).max(1).to_string());
        }
        if let Some(thread) = send_thread_id(thread_id) {
            form = form.text("message_thread_id", thread.to_string());
        }
        if let Some(caption) = caption.filter(|c| !c.is_empty()) {
            form = form
                .text("caption", markdown::to_markdown_v2(caption))
                .text("parse_mode", "MarkdownV2");
        }
        let timeout = self.settings.request_timeout * 6;
        let result = self.api.call_multipart(method, form, timeout).await;
        self.note_migration(&chat, &result);
        match result {
            Ok(message) => SendResult::sent(message_id(&message)),
            Err(e) => e.to_send_result(),
        }
    }

    /// A file Telegram would refuse: the user is told in the chat, the core gets a
    /// permanent failure (no retries).
    async fn refuse_upload(
        &self,
        chat: &Value,
        thread_id: Option<&str>,
        path: &str,
        reason: &str,
    ) -> SendResult {
        let name = Path::new(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.to_owned());
        tracing::warn!(platform = "telegram", chat_id = %chat, file = %name, reason, "attachment not sent");
        let notice = format!("⚠️ I couldn't send the file {name}: {reason}.");
        let _ = self
            .send_text(chat.clone(), thread_id, &notice, None, true, None)
            .await;
        SendResult::failed(SendErrorKind::Unknown, format!("{name} not sent: {reason}"))
    }
}

/// One button per row for long labels, two per row otherwise.
fn keyboard(buttons: &[Button]) -> Value {
    let per_row = if buttons.iter().all(|b| b.label.chars().count() <= 16) {
        2
    } else {
        1
    };
    let rows: Vec<Value> = buttons
        .chunks(per_row)
        .map(|row| {
            Value::Array(
                row.iter()
                    .map(|b| json!({"text": b.label, "callback_data": b.data}))
                    .collect(),
            )
        })
        .collect();
    json!({"inline_keyboard": rows})
}

/// Sends omit the General topic ("1"); Telegram rejects `message_thread_id=1`.
fn send_thread_id(thread_id: Option<&str>) -> Option<i64> {
    thread_id
        .filter(|t| *t != GENERAL_TOPIC)
        .and_then(|t| t.parse().ok())
}

fn chat_param(chat_id: &str) -> Value {
    int_or_str(chat_id)
}

fn int_or_str(value: &str) -> Value {
    value
        .parse::<i64>()
        .map(Value::from)
        .unwrap_or_else(|_| Value::from(value))
}

fn message_id(message: &Value) -> Option<String> {
    message["message_id"].as_i64().map(|id| id.to_string())
}
