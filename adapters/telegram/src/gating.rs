//! Group gating, in the reference's order (`_should_process_message`): own messages, allowed
//! topics, ignored threads, exclusive bot mentions, allowed chats (guest-mode mention
//! bypass), free-response chats/topics, `require_mention`, replies to the bot, @mentions
//! (including `/cmd@bot`), mention patterns. DMs are never gated here.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::api::types::{Message, utf16_slice};
use crate::settings::Settings;

/// Forum messages in the General topic carry no thread id; Telegram addresses it as 1.
pub const GENERAL_TOPIC: &str = "1";

/// Who the bot is (from getMe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotIdentity {
    pub id: i64,
    /// Lowercased, without `@`.
    pub username: String,
}

static BOT_HANDLE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^[a-z0-9_]{2,29}bot$").expect("static regex"));
static RAW_BOT_MENTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(^|[^A-Za-z0-9_`/])@([A-Za-z0-9_]{2,29}bot)\b").expect("static regex")
});

/// The routable thread id: forum topics and DM topics keep theirs, the forum General topic
/// is "1", and reply-UI anchors in ordinary chats are dropped.
pub fn effective_thread_id(message: &Message) -> Option<String> {
    let chat = &message.chat;
    let forum = chat.is_group() && chat.is_forum;
    match message.message_thread_id {
        Some(raw) if forum || (chat.is_group() && message.is_topic_message) => {
            Some(raw.to_string())
        }
        Some(raw) if chat.kind == "private" && message.is_topic_message => Some(raw.to_string()),
        Some(_) => None,
        None if forum => Some(GENERAL_TOPIC.to_owned()),
        None => None,
    }
}

pub fn is_own_message(message: &Message, bot: &BotIdentity) -> bool {
    message.from_user.as_ref().is_some_and(|u| u.id == bot.id)
}

/// Whether a message should reach the core.
pub fn should_process(message: &Message, bot: &BotIdentity, settings: &Settings) -> bool {
    if is_own_message(message, bot) {
        return false;
    }
    if !message.chat.is_group() {
        return true;
    }
    let thread_id = effective_thread_id(message);
    if !settings.allowed_topics.is_empty() {
        let topic = thread_id.as_deref().unwrap_or(GENERAL_TOPIC);
        if !settings.allowed_topics.contains(topic) {
            return false;
        }
    }
    if let Some(thread) = thread_id.as_deref().and_then(|t| t.parse::<i64>().ok())
        && settings.ignored_threads.contains(&thread)
    {
        return false;
    }
    if settings.exclusive_bot_mentions {
        let mentioned = mentioned_bot_usernames(message);
        if !mentioned.is_empty() && !mentioned.contains(&bot.username) {
            return false;
        }
    }
    let chat_id = message.chat.id.to_string();
    let guest_mention = settings.guest_mode && mentions_bot(message, bot);
    if !settings.allowed_chats.is_empty() && !settings.allowed_chats.contains(&chat_id) {
        return guest_mention;
    }
    if guest_mention || settings.free_response_chats.contains(&chat_id) {
        return true;
    }
    let topic = thread_id.as_deref().unwrap_or(GENERAL_TOPIC);
    if settings
        .free_response_topics
        .contains(&format!("{chat_id}:{topic}"))
    {
        return true;
    }
    if !settings.require_mention || is_reply_to_bot(message, bot) {
        return true;
    }
    if !settings.guest_mode && mentions_bot(message, bot) {
        return true;
    }
    message.sources().iter().any(|(text, _)| {
        !text.is_empty() && settings.mention_patterns.iter().any(|p| p.is_match(text))
    })
}

pub fn is_reply_to_bot(message: &Message, bot: &BotIdentity) -> bool {
    message
        .reply_to_message
        .as_ref()
        .and_then(|r| r.from_user.as_ref())
        .is_some_and(|u| u.id == bot.id)
}

/// An explicit address to this bot: a `@username` mention entity, a `text_mention` of the
/// bot, or `/cmd@username`.
pub fn mentions_bot(message: &Message, bot: &BotIdentity) -> bool {
    let expected = format!("@{}", bot.username);
    for (text, entities) in message.sources() {
        for entity in entities {
            let span = || utf16_slice(text, entity.offset, entity.length).unwrap_or_default();
            let addressed = match entity.kind.as_str() {
                "mention" => !bot.username.is_empty() && span().trim().to_lowercase() == expected,
                "text_mention" => entity.user.as_ref().is_some_and(|u| u.id == bot.id),
                "bot_command" if !bot.username.is_empty() => {
                    let span = span();
                    span.find('@')
                        .is_some_and(|at| span[at..].trim().to_lowercase() == expected)
                }
                _ => false,
            };
            if addressed {
                return true;
            }
        }
    }
    BOT_HANDLE.is_match(&bot.username) && mentioned_bot_usernames(message).contains(&bot.username)
}

/// Bot usernames (lowercased) explicitly addressed: mention entities ending in "bot",
/// `/cmd@somebot`, and, for sources without entities, raw `@somebot` text.
pub fn mentioned_bot_usernames(message: &Message) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (text, entities) in message.sources() {
        for entity in entities {
            let Some(span) = utf16_slice(text, entity.offset, entity.length) else {
                continue;
            };
            let handle = match entity.kind.as_str() {
                "mention" => span.trim().trim_start_matches('@').to_lowercase(),
                "bot_command" => match span.find('@') {
                    Some(at) => span[at + 1..].trim().to_lowercase(),
                    None => continue,
                },
                _ => continue,
            };
            if BOT_HANDLE.is_match(&handle) {
                names.insert(handle);
            }
        }
        if !text.is_empty() && entities.is_empty() {
            for capture in RAW_BOT_MENTION.captures_iter(text) {
                names.insert(capture[2].to_lowercase());
            }
        }
    }
    names
}

/// Removes `@botname` (and trailing `,:-` and spaces) from a group message, as the reference
/// does before handing the text on; keeps the original when nothing would remain. A leading
/// `/cmd@botname` only loses the suffix, so its arguments stay separated (the reference's
/// single regex would glue `/new@bot title` into `/newtitle`).
pub fn clean_trigger_text(text: &str, bot: &BotIdentity) -> String {
    if bot.username.is_empty() {
        return text.to_owned();
    }
    let name = regex::escape(&bot.username);
    let (Ok(command), Ok(mention)) = (
        Regex::new(&format!(r"(?i)^(/[A-Za-z0-9_]+)@{name}\b")),
        Regex::new(&format!(r"(?i)@{name}\b[,:\-]*\s*")),
    ) else {
        return text.to_owned();
    };
    let text_owned = command.replace(text, "$1");
    let cleaned = mention.replace_all(&text_owned, "").trim().to_owned();
    if cleaned.is_empty() {
        text.to_owned()
    } else {
        cleaned
    }
}
