//! Which Slack messages may start a turn (the reference's `_handle_slack_message` gates, in
//! its order): our own and other bots' messages per `SLACK_ALLOW_BOTS`, message subtypes
//! (an allowlist: only what a person wrote starts a turn), allowed channels, free-response channels, `SLACK_REQUIRE_MENTION` /
//! `SLACK_STRICT_MENTION`, and the thread memory that lets a conversation continue without
//! repeating the mention. Pure: it reads the settings and memory, it changes nothing.

use fancy_regex::Regex;

use crate::memory::Memory;
use crate::settings::{AllowBots, Settings};

/// The message subtypes that may start a turn: what a person wrote (a file share, a
/// thread reply also sent to the channel, a `/me` message). Every other subtype is a
/// notice or a change to an existing message (`channel_topic`, `pinned_item`, `bot_add`,
/// `message_changed`, …; <https://api.slack.com/events/message#subtypes>), and Slack adds
/// new ones, so an allowlist: an unknown subtype starts nothing. A message without a
/// subtype is an ordinary one; `bot_message` is judged by `SLACK_ALLOW_BOTS` first.
const TURN_SUBTYPES: [&str; 4] = [
    "file_share",
    "thread_broadcast",
    "me_message",
    "bot_message",
];

/// The parts of a message event the gates look at.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub channel_id: &'a str,
    pub channel_type: &'a str,
    pub user: Option<&'a str>,
    pub bot_id: Option<&'a str>,
    pub subtype: Option<&'a str>,
    /// The message text as typed (after the `!` → `/` rewrite).
    pub text: &'a str,
    pub ts: &'a str,
    pub thread_ts: Option<&'a str>,
}

impl Facts<'_> {
    pub fn is_bot(&self) -> bool {
        self.bot_id.is_some() || self.subtype == Some("bot_message")
    }

    /// Direct messages: 1:1 (`im`) and group DMs (`mpim`); a `D…` channel without a type.
    pub fn is_dm(&self) -> bool {
        match self.channel_type {
            "im" | "mpim" => true,
            "" => self.channel_id.starts_with('D'),
            _ => false,
        }
    }

    /// Only a 1:1 DM is exempt from the channel gates; a group DM is a shared surface.
    pub fn is_one_to_one_dm(&self) -> bool {
        self.channel_type == "im"
            || (self.channel_type.is_empty() && self.channel_id.starts_with('D'))
    }

    pub fn is_thread_reply(&self) -> bool {
        self.thread_ts.is_some_and(|t| t != self.ts)
    }
}

/// Who we are on Slack (from `auth.test`).
#[derive(Debug, Clone, Default)]
pub struct BotIdentity {
    pub user_id: String,
    pub bot_id: Option<String>,
}

/// The reason given when only a mention (or the bot's thread memory) could admit a
/// message; the caller may still admit a thread reply whose parent proves the bot's
/// involvement (see `inbound`).
pub const MENTION_REQUIRED: &str = "mention required";

/// The gates' answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Drop the message (acknowledge it, start nothing); the reason is for debug logs.
    Ignore(&'static str),
    Accept {
        mentioned: bool,
    },
}

/// Compiles a mention pattern case-insensitively, as the reference does.
pub fn compile_pattern(pattern: &str) -> Result<Regex, fancy_regex::Error> {
    fancy_regex::RegexBuilder::new(pattern)
        .case_insensitive(true)
        .build()
}

/// Settings-derived gate inputs, compiled once.
#[derive(Debug)]
pub struct Gates {
    pub mention_patterns: Vec<Regex>,
}

impl Gates {
    pub fn new(settings: &Settings) -> Self {
        Self {
            mention_patterns: settings
                .mention_patterns
                .iter()
                .filter_map(|p| compile_pattern(p).ok())
                .collect(),
        }
    }

    pub fn matches_pattern(&self, text: &str) -> bool {
        !text.is_empty()
            && self
                .mention_patterns
                .iter()
                .any(|p| p.is_match(text).unwrap_or(false))
    }

    /// Decides whether `facts` may start a turn.
    pub fn decide(
        &self,
        facts: &Facts<'_>,
        settings: &Settings,
        me: &BotIdentity,
        memory: &Memory,
    ) -> Verdict {
        let mention = format!("<@{}>", me.user_id);
        let own = facts.user.is_some_and(|u| u == me.user_id)
            || (facts.bot_id.is_some() && facts.bot_id == me.bot_id.as_deref());
        if own {
            return Verdict::Ignore("own message");
        }
        if facts.is_bot() {
            match settings.allow_bots {
                AllowBots::None => return Verdict::Ignore("bot message"),
                AllowBots::Mentions if !facts.text.contains(&mention) => {
                    return Verdict::Ignore("bot message without mention");
                }
                _ => {}
            }
        }
        if facts.subtype.is_some_and(|s| !TURN_SUBTYPES.contains(&s)) {
            return Verdict::Ignore("subtype that is not a new message");
        }
        let mentioned = facts.text.contains(&mention) || self.matches_pattern(facts.text);
        if facts.is_one_to_one_dm() {
            return Verdict::Accept { mentioned };
        }
        if !settings.allowed_channels.is_empty()
            && !settings.allowed_channels.contains(facts.channel_id)
        {
            return Verdict::Ignore("channel not allowed");
        }
        if settings.free_response_channels.contains(facts.channel_id) || !settings.require_mention {
            return Verdict::Accept { mentioned };
        }
        if mentioned {
            return Verdict::Accept { mentioned };
        }
        if settings.strict_mention {
            return Verdict::Ignore("strict mention required");
        }
        let thread = facts.thread_ts.unwrap_or("");
        let continues_bot_thread = facts.is_thread_reply() && memory.bot_threads.contains(thread);
        let in_mentioned_thread =
            facts.thread_ts.is_some() && memory.mentioned_threads.contains(thread);
        if continues_bot_thread || in_mentioned_thread {
            Verdict::Accept { mentioned }
        } else {
            Verdict::Ignore(MENTION_REQUIRED)
        }
    }
}
