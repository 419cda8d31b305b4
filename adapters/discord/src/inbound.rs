//! One Discord message → at most one `MessageEvent` handed to the core: duplicates and
//! the bot's own messages skipped, the channel resolved by its type (`place`), the guild
//! rules applied, attachments cached, the event handed over until recorded (`handover`),
//! an auto-thread opened only once the core accepted the sender (`threads`), and the id
//! remembered (live dispatches and backfill share this path).

use hermes_adapter::{
    AdapterContext, ChatType, MessageEvent, MessageType, RecordOutcome, SessionSource,
};

use crate::directory::ChannelInfo;
use crate::gating::{self, MessageView, Verdict};
use crate::inner::Inner;
use crate::model::{Message, message_kind, snowflake_unix_seconds};
use crate::place::{self, Origin};
use crate::{attachments, handover, threads};

/// Handles one message; true when it was handed over (recorded or a known duplicate).
pub async fn handle(inner: &Inner, ctx: &AdapterContext, message: Message, origin: Origin) -> bool {
    let bot_id = inner.bot_id();
    if message.author.id == bot_id || inner.already_handed_over(&message.id) {
        return false;
    }
    // The live path and a backfill scan may meet on one message: one of them handles it.
    let Some(_claim) = Claim::take(inner, &message.id) else {
        return false;
    };
    if message.kind != message_kind::DEFAULT && message.kind != message_kind::REPLY {
        return false;
    }
    let Some(place) = place::resolve(inner, &message, origin).await else {
        tracing::warn!(platform = "discord", message_id = %message.id, "channel unknown; message left for a later scan");
        return false;
    };
    let (keys, in_bot_thread) = inner.with_directory(|d| {
        (
            d.channel_keys(&place.channel),
            place.channel.is_thread() && d.is_bot_thread(&place.channel, &bot_id),
        )
    });
    // Roles are judged once the rules admitted the message (a history message needs a
    // member lookup for them).
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
    let mut admitted = match gating::judge(&inner.settings, &view) {
        Verdict::Admit(admitted) => admitted,
        Verdict::Drop(reason) => {
            tracing::debug!(platform = "discord", message_id = %message.id, reason, "message not for the bot");
            return false;
        }
    };

    if message.member.is_none() && !place.is_dm && !inner.settings.allowed_roles.is_empty() {
        let roles = place::author_roles(inner, &message, &place).await;
        admitted.role_authorized = roles
            .iter()
            .any(|r| inner.settings.allowed_roles.contains(r));
    }
    let mut chat = place.channel.clone();
    let mut planned_thread = None;
    if admitted.auto_thread {
        chat = match &message.thread {
            Some(existing) => {
                let info = ChannelInfo::from_channel(existing, chat.guild_id.as_deref());
                inner.with_directory(|d| d.upsert(info.clone()));
                info
            }
            None => {
                let thread = threads::plan(inner, &message, &chat);
                planned_thread = Some(thread.clone());
                thread
            }
        };
    }
    let thread_id = chat.is_thread().then(|| chat.id.clone());

    // Fetched just before the turn, by the process that runs it (`attachments.rs`).
    let pending_media: Vec<_> = message
        .attachments
        .iter()
        .map(attachments::reference)
        .collect();
    let mut text = admitted.text.clone();
    let message_type = if text.starts_with('/') {
        MessageType::Command
    } else if let Some(first) = message.attachments.first() {
        attachments::message_type_of(first)
    } else {
        MessageType::Text
    };
    if text.is_empty() {
        if admitted.bot_mentioned && pending_media.is_empty() {
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
    event.pending_media = pending_media;
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
    let outcome = handover::deliver(ctx, event).await;
    // A thread never opened (refused sender) is not a conversation to remember.
    let conversation_exists = planned_thread.is_none()
        || matches!(outcome, RecordOutcome::Recorded | RecordOutcome::Duplicate);
    if let Some(thread) = planned_thread {
        match outcome {
            RecordOutcome::Recorded | RecordOutcome::Duplicate => {
                threads::open(inner, &message, thread).await;
            }
            RecordOutcome::Refused | RecordOutcome::Failed => threads::abandon(inner, &thread),
        }
    }
    inner.with_directory(|d| {
        // Remembered whatever the outcome, so a later backfill scan looks here.
        if !conversation_exists {
            return;
        }
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
            // Only at shutdown: the id stays unmarked, so the next start's backfill offers it.
            tracing::warn!(platform = "discord", message_id = %message.id, "shutting down before the core recorded a message");
            false
        }
    }
}

/// A message being handled; released when dropped.
struct Claim<'a> {
    inner: &'a Inner,
    id: String,
}

impl<'a> Claim<'a> {
    fn take(inner: &'a Inner, id: &str) -> Option<Self> {
        inner
            .with_directory(|d| d.in_progress.insert(id.to_owned()))
            .then(|| Self {
                inner,
                id: id.to_owned(),
            })
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.inner
            .with_directory(|d| d.in_progress.remove(&self.id));
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
