//! What was sent and what came back. Every message carries a unique token
//! (`q<platform><user>n<seq>x<tag>`, letters and digits only so no platform formatting
//! escapes it); the echoing fake model puts it in the reply, so each reply the fakes
//! accepted is attributed to exactly one message. A reply carrying Hermes's recovered
//! marker (a resend whose first outcome was unknown after a crash) is counted apart, and so
//! is the delivery failure notice (a reply the gateway gave up on: abandoned).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::world::World;

/// Words of hermesd's `RECOVERED_MARKER` (src/state/ledger.rs).
const RECOVERED: &str = "Sent again after a restart";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Platform {
    Telegram,
    Discord,
    Slack,
}

impl Platform {
    pub const ALL: [Platform; 3] = [Platform::Telegram, Platform::Discord, Platform::Slack];

    pub fn name(self) -> &'static str {
        match self {
            Platform::Telegram => "telegram",
            Platform::Discord => "discord",
            Platform::Slack => "slack",
        }
    }

    fn letter(self) -> char {
        match self {
            Platform::Telegram => 't',
            Platform::Discord => 'd',
            Platform::Slack => 's',
        }
    }
}

/// Replies seen for one token: (plain, recovered-marked).
pub type Counts = (u32, u32);

#[derive(Debug)]
pub struct Ledger {
    tag: u32,
    sent: Mutex<BTreeMap<String, Platform>>,
    replies: Mutex<HashMap<String, Counts>>,
    /// Reply texts without any known token (e.g. a busy acknowledgement), per platform.
    strays: Mutex<BTreeMap<Platform, Vec<String>>>,
    /// Bumped on every collection that found something new.
    pub changed: watch::Sender<u64>,
}

impl Ledger {
    pub fn new(tag: u32) -> Ledger {
        Ledger {
            tag,
            sent: Mutex::default(),
            replies: Mutex::default(),
            strays: Mutex::default(),
            changed: watch::channel(0).0,
        }
    }

    /// A fresh token for message `seq` of `user`, recorded as sent.
    pub fn token(&self, platform: Platform, user: usize, seq: u64) -> String {
        let token = format!("q{}{user}n{seq}x{}", platform.letter(), self.tag);
        self.sent.lock().unwrap().insert(token.clone(), platform);
        token
    }

    pub fn is_answered(&self, token: &str) -> bool {
        self.replies.lock().unwrap().contains_key(token)
    }

    pub fn unanswered(&self) -> usize {
        let replies = self.replies.lock().unwrap();
        self.sent
            .lock()
            .unwrap()
            .keys()
            .filter(|t| !replies.contains_key(*t))
            .count()
    }

    fn tokens_in<'a>(&self, text: &'a str) -> Vec<&'a str> {
        let suffix = format!("x{}", self.tag);
        text.split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| w.starts_with('q') && w.ends_with(&suffix))
            .collect()
    }

    /// Recounts every reply the fakes accepted so far; wakes waiters when anything changed.
    pub fn collect(&self, world: &World) {
        let mut texts: Vec<(Platform, String)> = world
            .telegram
            .sent_messages()
            .into_iter()
            .map(|m| (Platform::Telegram, m.text))
            .collect();
        texts.extend(
            world
                .discord
                .calls_to("POST /channels/{id}/messages")
                .into_iter()
                .filter(|c| c.status == 200)
                .map(|c| {
                    let content = c.body["content"].as_str().unwrap_or_default().to_owned();
                    (Platform::Discord, content)
                }),
        );
        let records = world.slack.records();
        texts.extend(
            records
                .calls
                .iter()
                .enumerate()
                .filter(|(i, c)| c.method == "chat.postMessage" && !records.faulted.contains(i))
                .map(|(_, c)| {
                    (
                        Platform::Slack,
                        c.str("text").unwrap_or_default().to_owned(),
                    )
                }),
        );
        let mut replies: HashMap<String, Counts> = HashMap::new();
        let mut strays: BTreeMap<Platform, Vec<String>> = BTreeMap::new();
        for (platform, text) in texts {
            let tokens = self.tokens_in(&text);
            if tokens.is_empty() {
                strays.entry(platform).or_default().push(text.clone());
            }
            for token in tokens {
                let counts = replies.entry(token.to_owned()).or_default();
                if text.contains(RECOVERED) {
                    counts.1 += 1;
                } else {
                    counts.0 += 1;
                }
            }
        }
        let changed = {
            let mut current = self.replies.lock().unwrap();
            let changed = *current != replies;
            *current = replies;
            changed
        };
        *self.strays.lock().unwrap() = strays;
        if changed {
            self.changed.send_modify(|v| *v += 1);
        }
    }

    /// Failure notices received (replies the gateway gave up on), per platform.
    fn notices(strays: &[String]) -> usize {
        let notice = hermesd::gateway::delivery::FAILURE_NOTICE;
        strays.iter().filter(|t| t.as_str() == notice).count()
    }

    /// Per-platform figures, and how many messages were lost, doubled and given up on (a
    /// failure notice instead of the reply).
    pub fn summary(&self) -> (Value, u64, u64, u64) {
        let sent = self.sent.lock().unwrap();
        let replies = self.replies.lock().unwrap();
        let strays = self.strays.lock().unwrap();
        let (mut all_lost, mut all_duplicated, mut all_abandoned) = (0, 0, 0);
        let mut out = serde_json::Map::new();
        for platform in Platform::ALL {
            let tokens: Vec<&String> = sent
                .iter()
                .filter(|(_, p)| **p == platform)
                .map(|(t, _)| t)
                .collect();
            let counts: Vec<Counts> = tokens
                .iter()
                .map(|t| replies.get(*t).copied().unwrap_or_default())
                .collect();
            let lost: Vec<&String> = tokens
                .iter()
                .zip(&counts)
                .filter(|(_, c)| c.0 + c.1 == 0)
                .map(|(t, _)| *t)
                .collect();
            let duplicated: Vec<&String> = tokens
                .iter()
                .zip(&counts)
                .filter(|(_, c)| c.0 > 1)
                .map(|(t, _)| *t)
                .collect();
            all_lost += lost.len() as u64;
            all_duplicated += duplicated.len() as u64;
            let stray = strays.get(&platform).cloned().unwrap_or_default();
            let abandoned = Self::notices(&stray);
            all_abandoned += abandoned as u64;
            out.insert(
                platform.name().into(),
                json!({
                    "sent": tokens.len(),
                    "replies_received": counts.iter().map(|c| c.0 + c.1).sum::<u32>(),
                    "answered": counts.iter().filter(|c| c.0 + c.1 > 0).count(),
                    "lost": lost.len(),
                    "duplicated": duplicated.len(),
                    "abandoned": abandoned,
                    "recovered_marked": counts.iter().map(|c| c.1).sum::<u32>(),
                    "lost_tokens": lost.iter().take(20).collect::<Vec<_>>(),
                    "duplicated_tokens": duplicated.iter().take(20).collect::<Vec<_>>(),
                    "other_replies": stray.len(),
                    "other_reply_examples": stray.iter().take(3).collect::<Vec<_>>(),
                }),
            );
        }
        (Value::Object(out), all_lost, all_duplicated, all_abandoned)
    }
}
