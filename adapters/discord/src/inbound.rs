//! One Discord message → at most one `MessageEvent` handed to the core: duplicates and
//! the bot's own messages skipped, the channel resolved, the guild rules applied, an
//! auto-thread opened when they say so, attachments cached, and the id remembered once
//! the core has recorded it (live dispatches and backfill share this path).

use hermes_adapter::{
    AdapterContext, ChatType, MessageEvent, MessageType, RecordOutcome, SessionSource,
};

use crate::attachments;
use crate::directory::ChannelInfo;
use crate::gating::{self, MessageView, Verdict};
use crate::inner::Inner;
use crate::model::{Message, message_kind, snowflake_unix_seconds};

/// Where a message lives, as far as the rules and the session source care.
struct Place {
    channel: ChannelInfo,
    is_dm: bool,
}

async fn resolve_place(inner: &Inner, message: &Message) -> Place {
    if message.guild_id.is_none() {
        let channel = ChannelInfo {
            id: message.channel_id.clone(),
            kind: crate::model::channel_kind::DM,
            name: None,
            guild_id: None,
            parent_id: None,
            topic: None,
            owner_id: None,
        };
        return Place {
            channel,
            is_dm: true,
        };
    }
    let channel = match inner.channel(&message.channel_id).await {
        Some(channel) => channel,
        None => ChannelInfo {
            id: message.channel_id.clone(),
            kind: 0,
            name: None,
            guild_id: message.guild_id.clone(),
            parent_id: None,
            topic: None,
            owner_id: None,
        },
    };
    Place {
        channel,
        is_dm: false,
    }
}

/// Handles one message; true when it was handed over (recorded or a known duplicate).
pub async fn handle(inner: &Inner, ctx: &AdapterContext, message: Message) -> bool {
    let bot_id = inner.bot_id();
    if message.author.id == bot_id || inner.already_handed_over(&message.id) {
        return false;
    }
    if message.kind != message_kind::DEFAULT && message.kind != message_kind::REPLY {
        return false;
    }
    let place = resolve_place(inner, &message).await;
    let (keys, in_bot_thread) = inner.with_directory(|d| {
        (
            d.channel_keys(&place.channel),
            place.channel.is_thread() && d.is_bot_thread(&place.channel, &bot_id),
        )
    });
    let roles = message
        .member
        .as_ref()
        .map(|m| m.roles.clone())
        .unwrap_or_default();
    let mentions: Vec<(String, bool)> = message
        .mentions
        .iter()
        .map(|u| (u.id.clone(), u.bot))
        .collect();
    let view = MessageView {
        bot_id: &bot_id,
        is_dm: place.is_dm,
        is_thread: place.channel.is_thread(),
        in_bot_thread,
        channel_keys: &keys,
        content: &message.content,
        author_is_bot: message.author.bot,
        author_roles: &roles,
        mentions: &mentions,
        is_reply: message.kind == message_kind::REPLY,
    };
    let admitted = match gating::judge(&inner.settings, &view) {
        Verdict::Admit(admitted) => admitted,
        Verdict::Drop(reason) => {
            tracing::debug!(platform = "discord", message_id = %message.id, reason, "message not for the bot");
            return false;
        }
    };

    let mut chat = place.channel.clone();
    let mut thread_id = chat.is_thread().then(|| chat.id.clone());
    if admitted.auto_thread {
        match open_thread(inner, &message).await {
            Some(thread) => {
                thread_id = Some(thread.id.clone());
                chat = thread;
            }
            None => return false,
        }
    }

    let mut media_paths = Vec::new();
    let mut media_types = Vec::new();
    for attachment in &message.attachments {
        if let Some((path, mime)) =
            attachments::cache(&inner.rest, &inner.settings, attachment).await
        {
            media_paths.push(path);
            media_types.push(mime);
        }
    }
    let mut text = admitted.text.clone();
    let message_type = if text.starts_with('/') {
        MessageType::Command
    } else if let Some(first) = message.attachments.first() {
        attachments::message_type_of(first)
    } else {
        MessageType::Text
    };
    if text.is_empty() {
        if admitted.bot_mentioned && media_paths.is_empty() {
            tracing::info!(platform = "discord", message_id = %message.id, "mention-only message ignored");
            return false;
        }
        text = "(message without text)".into();
    }

    let source = inner.source_for(
        &chat,
        place.is_dm,
        thread_id,
        &message,
        admitted.role_authorized,
    );
    let mut event = MessageEvent::text(&message.id, source, &text);
    event.message_type = message_type;
    event.message_id = Some(message.id.clone());
    event.media_paths = media_paths;
    event.media_types = media_types;
    event.timestamp = snowflake_unix_seconds(&message.id).unwrap_or(0.0);
    if let Some(reference) = message
        .message_reference
        .as_ref()
        .and_then(|r| r.message_id.clone())
    {
        event.reply_to_message_id = Some(reference);
        if let Some(referenced) = &message.referenced_message {
            event.reply_to_text = Some(referenced.content.clone()).filter(|t| !t.is_empty());
            event.reply_to_is_own_message = referenced.author.id == bot_id;
        }
    }
    let conversation = chat.id.clone();
    let outcome = ctx.deliver(event).await;
    inner.with_directory(|d| {
        // Remembered whatever the outcome, so a later backfill scan looks here.
        if place.is_dm || chat.is_thread() {
            d.known_conversations.insert(conversation.clone());
        }
        if chat.is_thread() {
            d.bot_threads.insert(conversation);
        }
    });
    match outcome {
        RecordOutcome::Recorded | RecordOutcome::Duplicate | RecordOutcome::Refused => {
            inner.with_directory(|d| d.handed_over.insert(&message.id));
            true
        }
        RecordOutcome::Failed => {
            // Discord cannot redeliver; leaving the id unmarked lets the next backfill scan
            // hand it over again.
            tracing::warn!(platform = "discord", message_id = %message.id, "the core could not record a message");
            false
        }
    }
}

/// Opens (or, for a message that already has one, reuses) the thread for an auto-thread
/// conversation. On failure the user is told, and the message is not processed in the
/// parent channel (reference #20243).
async fn open_thread(inner: &Inner, message: &Message) -> Option<ChannelInfo> {
    if let Some(existing) = &message.thread {
        let info = ChannelInfo::from_channel(existing, message.guild_id.as_deref());
        inner.with_directory(|d| d.upsert(info.clone()));
        return Some(info);
    }
    let name = gating::auto_thread_name(&message.content);
    match inner
        .rest
        .start_thread(&message.channel_id, &message.id, &name)
        .await
    {
        Ok(thread) => {
            let info = ChannelInfo::from_channel(&thread, message.guild_id.as_deref());
            inner.with_directory(|d| {
                d.upsert(info.clone());
                d.bot_threads.insert(info.id.clone());
                d.auto_threads.insert(info.id.clone());
            });
            Some(info)
        }
        Err(error) => {
            tracing::warn!(platform = "discord", %error, "auto-thread creation failed");
            let notice = serde_json::json!({
                "content": "⚠️ This message was not handled: opening a thread for it failed. Please send it again.",
            });
            if let Err(error) = inner
                .rest
                .create_message(&message.channel_id, &notice, &[])
                .await
            {
                tracing::warn!(platform = "discord", %error, "could not tell the user about the failed thread");
            }
            None
        }
    }
}

/// The session source of a message in `chat` (reference `build_source`).
pub fn chat_type_of(chat: &ChannelInfo, is_dm: bool) -> ChatType {
    if is_dm {
        ChatType::Dm
    } else if chat.is_thread() {
        ChatType::Thread
    } else {
        ChatType::Group
    }
}

/// Builds a [`SessionSource`] for `user` in `chat`.
pub fn source(
    chat: &ChannelInfo,
    chat_name: Option<String>,
    is_dm: bool,
    thread_id: Option<String>,
    user_id: &str,
    user_name: &str,
    is_bot: bool,
) -> SessionSource {
    let mut source = SessionSource::dm("discord", &chat.id, user_id);
    source.chat_type = chat_type_of(chat, is_dm);
    source.chat_name = chat_name;
    source.user_name = Some(user_name.to_owned());
    source.thread_id = thread_id;
    source.chat_topic = chat.topic.clone();
    source.is_bot = is_bot;
    source.scope_id = chat.guild_id.clone();
    source
}
