//! Telegram message → `MessageEvent`: chat type, thread id, names, reply context, message
//! type, and the callback-query (button click) → command event translation.

use hermes_adapter::{ChatType, MessageEvent, MessageType, SessionSource};

use crate::api::types::{CallbackQuery, Message};
use crate::gating::{BotIdentity, clean_trigger_text, effective_thread_id};

pub const PLATFORM: &str = "telegram";

/// The `hermes_adapter` chat type for a Telegram chat type.
pub fn chat_type(kind: &str) -> ChatType {
    match kind {
        "group" | "supergroup" => ChatType::Group,
        "channel" => ChatType::Channel,
        _ => ChatType::Dm,
    }
}

/// Text, photo, voice…: what the message mainly is.
pub fn message_type(message: &Message) -> MessageType {
    if !message.photo.is_empty() {
        MessageType::Photo
    } else if message.voice.is_some() {
        MessageType::Voice
    } else if message.audio.is_some() {
        MessageType::Audio
    } else if message.video.is_some() {
        MessageType::Video
    } else if message.document.is_some() {
        MessageType::Document
    } else if is_command(message) {
        MessageType::Command
    } else {
        MessageType::Text
    }
}

/// A message that starts with a `bot_command` entity.
pub fn is_command(message: &Message) -> bool {
    message
        .entities
        .iter()
        .any(|e| e.kind == "bot_command" && e.offset == 0)
        || (message.entities.is_empty()
            && message.text.as_deref().is_some_and(|t| t.starts_with('/')))
}

pub fn source(message: &Message) -> SessionSource {
    let kind = chat_type(&message.chat.kind);
    let user = message.from_user.as_ref();
    SessionSource {
        platform: PLATFORM.to_owned(),
        chat_id: message.chat.id.to_string(),
        chat_name: message.chat.name(),
        chat_type: kind,
        user_id: user.map(|u| u.id.to_string()).or_else(|| {
            matches!(kind, ChatType::Dm | ChatType::Channel).then(|| message.chat.id.to_string())
        }),
        user_name: user.map(|u| u.full_name()).or_else(|| message.chat.name()),
        thread_id: effective_thread_id(message),
        chat_topic: None,
        user_id_alt: user.and_then(|u| u.username.clone()),
        is_bot: user.is_some_and(|u| u.is_bot),
        scope_id: None,
        role_authorized: false,
        // A username can be given up and taken by someone else: the user id keys them.
        user_id_alt_is_stable: false,
    }
}

/// The event for one message (media paths are filled in by the caller).
pub fn message_event(update_id: i64, message: &Message, bot: &BotIdentity) -> MessageEvent {
    let body = message
        .text
        .clone()
        .or_else(|| message.caption.clone())
        .unwrap_or_default();
    let text = if message.chat.is_group() {
        clean_trigger_text(&body, bot)
    } else {
        body
    };
    let reply = message.reply_to_message.as_deref();
    MessageEvent {
        event_id: update_id.to_string(),
        text,
        message_type: message_type(message),
        source: source(message),
        message_id: Some(message.message_id.to_string()),
        media_paths: Vec::new(),
        media_types: Vec::new(),
        pending_media: Vec::new(),
        reply_to_message_id: reply.map(|r| r.message_id.to_string()),
        reply_to_text: message
            .quote
            .as_ref()
            .and_then(|q| q.text.clone())
            .or_else(|| reply.and_then(|r| r.text.clone().or_else(|| r.caption.clone()))),
        reply_to_is_own_message: reply
            .and_then(|r| r.from_user.as_ref())
            .is_some_and(|u| u.id == bot.id),
        timestamp: message.date as f64,
        merge: None,
        reply_target: None,
        background: None,
    }
}

/// A button click: a command event whose text is the button's data, from the clicking user.
pub fn callback_event(query: &CallbackQuery) -> Option<MessageEvent> {
    let data = query.data.clone()?;
    let message = query.message.as_ref()?;
    let mut source = source(message);
    source.user_id = Some(query.from.id.to_string());
    source.user_name = Some(query.from.full_name());
    source.user_id_alt = query.from.username.clone();
    source.is_bot = query.from.is_bot;
    let mut event = MessageEvent::text(&format!("cb:{}", query.id), source, &data);
    event.message_type = MessageType::Command;
    event.message_id = Some(message.message_id.to_string());
    event.timestamp = message.date as f64;
    Some(event)
}
