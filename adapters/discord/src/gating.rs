//! Guild rules, exactly as the reference applies them (`_discord_message_admission` then
//! `_handle_message`): bot authors per `DISCORD_ALLOW_BOTS`, messages addressed to other
//! users or bots, allowed / ignored channels, the mention requirement with free-response
//! channels and bot threads, the bot's mention stripped, role authorisation, and whether
//! the message opens an auto-thread. Pure: the caller supplies what the adapter knows.

use std::collections::BTreeSet;

use crate::settings::{AllowBots, Settings};

/// A message as the rules see it.
#[derive(Debug, Clone)]
pub struct MessageView<'a> {
    pub bot_id: &'a str,
    pub is_dm: bool,
    pub is_thread: bool,
    /// The bot takes part in this thread.
    pub in_bot_thread: bool,
    /// Channel id / name / `#name` of the channel and, for threads, its parent.
    pub channel_keys: &'a BTreeSet<String>,
    pub content: &'a str,
    pub author_is_bot: bool,
    pub author_roles: &'a [String],
    /// Resolved mentions: (user id, is a bot).
    pub mentions: &'a [(String, bool)],
    /// A Discord reply (message type 19).
    pub is_reply: bool,
}

/// What to do with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Drop(&'static str),
    Admit(Admitted),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The content with the bot's `<@id>` / `<@!id>` mention removed.
    pub text: String,
    pub bot_mentioned: bool,
    pub role_authorized: bool,
    /// Open a thread from this message and move the conversation there.
    pub auto_thread: bool,
}

/// User ids written as `<@id>` / `<@!id>` in the content.
fn raw_mentions(content: &str) -> BTreeSet<&str> {
    let mut ids = BTreeSet::new();
    let mut rest = content;
    while let Some(start) = rest.find("<@") {
        let after = &rest[start + 2..];
        let after = after.strip_prefix('!').unwrap_or(after);
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with('>') {
            ids.insert(&after[..digits]);
        }
        rest = &rest[start + 2..];
    }
    ids
}

fn matches(keys: &BTreeSet<String>, set: &BTreeSet<String>) -> bool {
    set.contains("*") || keys.iter().any(|k| set.contains(k))
}

pub fn judge(settings: &Settings, m: &MessageView<'_>) -> Verdict {
    let raw = raw_mentions(m.content);
    let raw_self = raw.contains(m.bot_id);
    let self_mentioned = raw_self || m.mentions.iter().any(|(id, _)| id == m.bot_id);

    if m.author_is_bot {
        match settings.allow_bots {
            AllowBots::None => return Verdict::Drop("bot author (DISCORD_ALLOW_BOTS=none)"),
            AllowBots::Mentions if !self_mentioned => {
                return Verdict::Drop("bot author without a mention (DISCORD_ALLOW_BOTS=mentions)");
            }
            _ => {}
        }
        if settings.bots_require_inline_mention && !raw_self {
            return Verdict::Drop("bot author without an inline mention");
        }
    }

    if !m.is_dm && (!m.mentions.is_empty() || self_mentioned) {
        let other_bots = m.mentions.iter().any(|(id, bot)| *bot && id != m.bot_id);
        if other_bots && !self_mentioned {
            return Verdict::Drop("addressed to another bot");
        }
        if settings.ignore_no_mention
            && !self_mentioned
            && !other_bots
            && !matches(m.channel_keys, &settings.free_response_channels)
        {
            return Verdict::Drop("addressed to other users");
        }
    }

    let text = if self_mentioned {
        m.content
            .replace(&format!("<@{}>", m.bot_id), "")
            .trim()
            .replace(&format!("<@!{}>", m.bot_id), "")
            .trim()
            .to_owned()
    } else {
        m.content.trim().to_owned()
    };

    let role_authorized = !m.is_dm
        && !settings.allowed_roles.is_empty()
        && m.author_roles
            .iter()
            .any(|r| settings.allowed_roles.contains(r));

    if m.is_dm {
        return Verdict::Admit(Admitted {
            text,
            bot_mentioned: self_mentioned,
            role_authorized,
            auto_thread: false,
        });
    }

    if !settings.allowed_channels.is_empty() && !matches(m.channel_keys, &settings.allowed_channels)
    {
        return Verdict::Drop("channel not in DISCORD_ALLOWED_CHANNELS");
    }
    if matches(m.channel_keys, &settings.ignored_channels) {
        return Verdict::Drop("channel in DISCORD_IGNORED_CHANNELS");
    }
    let is_free = matches(m.channel_keys, &settings.free_response_channels);
    let in_bot_thread = m.is_thread && m.in_bot_thread && !settings.thread_require_mention;
    if settings.require_mention && !is_free && !in_bot_thread && !self_mentioned {
        return Verdict::Drop("no mention (DISCORD_REQUIRE_MENTION)");
    }
    let auto_thread = settings.auto_thread
        && !m.is_thread
        && !is_free
        && !matches(m.channel_keys, &settings.no_thread_channels)
        && !m.is_reply;
    Verdict::Admit(Admitted {
        text,
        bot_mentioned: self_mentioned,
        role_authorized,
        auto_thread,
    })
}

/// The placeholder thread name (reference `_derive_auto_thread_name`): mentions removed,
/// whitespace collapsed, at most 80 characters, "Hermes" when nothing is left.
pub fn auto_thread_name(content: &str) -> String {
    let mut cleaned = String::new();
    let mut rest = content;
    while let Some(start) = rest.find('<') {
        cleaned.push_str(&rest[..start]);
        let tail = &rest[start..];
        let token_len = mention_token_len(tail);
        if token_len > 0 {
            rest = &tail[token_len..];
        } else {
            cleaned.push('<');
            rest = &tail[1..];
        }
    }
    cleaned.push_str(rest);
    let collapsed = cleaned.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return "Hermes".into();
    }
    if collapsed.chars().count() > 80 {
        let head: String = collapsed.chars().take(77).collect();
        return format!("{head}...");
    }
    collapsed
}

/// Length of a `<@id>`, `<@!id>`, `<@&id>` or `<#id>` token at the start of `s`, else 0.
fn mention_token_len(s: &str) -> usize {
    let body = if let Some(b) = s.strip_prefix("<@!").or(s.strip_prefix("<@&")) {
        (3, b)
    } else if let Some(b) = s.strip_prefix("<@").or(s.strip_prefix("<#")) {
        (2, b)
    } else {
        return 0;
    };
    let digits = body.1.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && body.1[digits..].starts_with('>') {
        body.0 + digits + 1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_mentions_cover_both_forms_and_skip_roles_and_junk() {
        let ids = raw_mentions("<@1> <@!22> <@&333> <@x> <@4");
        assert_eq!(ids, BTreeSet::from(["1", "22"]));
    }

    #[test]
    fn thread_names_drop_mentions_and_stay_short() {
        assert_eq!(
            auto_thread_name("<@1> plan <#2> the   <@&3>launch"),
            "plan the launch"
        );
        assert_eq!(auto_thread_name("<@1>"), "Hermes");
        assert_eq!(auto_thread_name("a < b"), "a < b");
        let long = auto_thread_name(&"word ".repeat(40));
        assert_eq!(long.chars().count(), 80);
        assert!(long.ends_with("..."));
    }
}
