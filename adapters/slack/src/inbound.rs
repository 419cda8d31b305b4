//! Socket Mode envelopes → what to hand the core: `events_api` messages and mentions go
//! through the gates and become `MessageEvent`s (mention stripped, `!cmd` rewritten,
//! thread session ids, shared files as pending references fetched after the ack by
//! [`crate::pending`]); `slash_commands` become command events; `interactive` clicks are
//! handled in [`crate::interactive`].

use hermes_adapter::{ChatType, MessageEvent, MessageType, SessionSource};
use serde_json::Value;

use crate::api::{ApiError, WebApi};
use crate::assistant;
use crate::commands::rewrite_bang_command;
use crate::gating::{BotIdentity, Facts, Gates, MENTION_REQUIRED, Verdict};
use crate::interactive;
use crate::memory::{Reacting, SharedMemory, key};
use crate::rich_text;
use crate::settings::Settings;

/// Why an enriching look-up gave nothing.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("{0}")]
    Api(ApiError),
    #[error("no answer before the ack deadline")]
    Late,
}

/// What to do with one envelope.
#[derive(Debug)]
pub enum Handling {
    /// Hand the event to the core; acknowledge only once it is recorded.
    Deliver(Box<Delivery>),
    /// Acknowledge at once; nothing starts.
    Ack(&'static str),
}

/// An event for the core and what to remember once it is recorded.
#[derive(Debug)]
pub struct Delivery {
    pub event: MessageEvent,
    pub after: AfterRecord,
}

/// Memory updates that take effect only once the core recorded the event, so a refused
/// event leaves no trace and its redelivery is judged afresh.
#[derive(Debug, Default)]
pub struct AfterRecord {
    pub handed_over: Option<String>,
    pub mentioned_thread: Option<String>,
    /// A thread recognised as the bot's from its parent (after a restart emptied memory).
    pub bot_thread: Option<String>,
    pub reacting: Option<(String, Reacting)>,
    /// A prompt whose buttons are removed now that the click is recorded.
    pub answered_prompt: Option<interactive::AnsweredPrompt>,
    /// What the ack carries back to the user (the slash command's "Running `/cmd`…").
    pub ack_payload: Option<Value>,
}

/// Everything translation reads.
#[derive(Debug)]
pub struct Translator<'a> {
    pub settings: &'a Settings,
    pub gates: &'a Gates,
    pub me: &'a BotIdentity,
    pub memory: &'a SharedMemory,
    pub api: &'a WebApi,
    /// When the look-ups that only enrich an event (`users.info`, `conversations.replies`)
    /// give up, so the envelope is still acked in time: the event is then
    /// handed over without what they would have added.
    pub lookup_deadline: tokio::time::Instant,
}

fn str_field<'v>(value: &'v Value, field: &str) -> Option<&'v str> {
    value
        .get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The `thread_id` of the session a message belongs to (reference session scoping).
fn session_thread(facts: &Facts<'_>, settings: &Settings) -> Option<String> {
    let ts = facts.ts.to_owned();
    if facts.is_dm() {
        return match facts.thread_ts {
            Some(thread) => Some(thread.to_owned()),
            None if settings.dm_top_level_threads_as_sessions => Some(ts),
            None => None,
        };
    }
    if facts.is_thread_reply() {
        facts.thread_ts.map(str::to_owned)
    } else if settings.reply_in_thread {
        Some(ts)
    } else {
        None
    }
}

impl Translator<'_> {
    /// Handles one envelope by type.
    pub async fn translate(&self, kind: &str, envelope_id: &str, payload: &Value) -> Handling {
        match kind {
            "events_api" => self.event(envelope_id, payload).await,
            "slash_commands" => slash_command(payload),
            "interactive" => interactive::click(payload, self.memory),
            _ => Handling::Ack("unhandled envelope type"),
        }
    }

    async fn event(&self, envelope_id: &str, payload: &Value) -> Handling {
        let Some(event) = payload.get("event") else {
            return Handling::Ack("envelope without event");
        };
        let event_type = str_field(event, "type").unwrap_or("");
        if event_type.starts_with("assistant_thread_") {
            return Handling::Ack(assistant::on_event(
                event_type,
                event,
                self.memory,
                self.api,
            ));
        }
        if event_type != "message" && event_type != "app_mention" {
            return Handling::Ack("event type not handled");
        }
        let channel_id = str_field(event, "channel").unwrap_or("");
        let ts = str_field(event, "ts").unwrap_or("");
        let dedupe_key = key(channel_id, ts);
        if self.lock().handed_over.contains(&dedupe_key) {
            // Slack sends `message` and `app_mention` for one mention, and redelivers.
            return Handling::Ack("message already handed over");
        }
        let typed = rewrite_bang_command(str_field(event, "text").unwrap_or(""));
        let facts = Facts {
            channel_id,
            channel_type: str_field(event, "channel_type").unwrap_or(""),
            user: str_field(event, "user"),
            bot_id: str_field(event, "bot_id"),
            subtype: str_field(event, "subtype"),
            text: &typed,
            ts,
            thread_ts: str_field(event, "thread_ts"),
        };
        let verdict = self
            .gates
            .decide(&facts, self.settings, self.me, &self.lock());
        let mut after = AfterRecord {
            handed_over: Some(dedupe_key),
            ..AfterRecord::default()
        };
        let mentioned = match verdict {
            Verdict::Accept { mentioned } => mentioned,
            Verdict::Ignore(MENTION_REQUIRED) if self.parent_involves_bot(&facts).await => {
                after.bot_thread = facts.thread_ts.map(str::to_owned);
                false
            }
            Verdict::Ignore(reason) => return Handling::Ack(reason),
        };
        let mut text = rich_text::full_text(&typed, event);
        if mentioned {
            text = text
                .replace(&format!("<@{}>", self.me.user_id), "")
                .trim()
                .to_owned();
            text = rewrite_bang_command(&text);
            if let Some(thread) = facts.thread_ts
                && !self.settings.strict_mention
            {
                after.mentioned_thread = Some(thread.to_owned());
            }
        }
        let thread_id = session_thread(&facts, self.settings);
        if self.settings.reactions && (facts.is_one_to_one_dm() || mentioned) {
            let thread_key = key(channel_id, thread_id.as_deref().unwrap_or(""));
            let reacting = Reacting {
                channel: channel_id.to_owned(),
                ts: ts.to_owned(),
                eyes_added: false,
            };
            after.reacting = Some((thread_key, reacting));
        }
        let pending_media = crate::pending::references(event);
        let media_types = crate::pending::declared_types(&pending_media);
        if text.is_empty() && pending_media.is_empty() {
            return Handling::Ack("empty message");
        }
        if let Some(note) = facts
            .thread_ts
            .and_then(|thread| assistant::context_note(self.memory, channel_id, thread))
        {
            text = format!("{note}\n\n{text}");
        }
        let message_type = message_type(&text, &media_types);
        let source = SessionSource {
            platform: "slack".into(),
            chat_id: channel_id.to_owned(),
            chat_name: Some(channel_id.to_owned()),
            chat_type: if facts.is_dm() {
                ChatType::Dm
            } else {
                ChatType::Group
            },
            user_id: facts.user.map(str::to_owned),
            user_name: match facts.user {
                Some(user) => Some(self.user_name(user).await),
                None => None,
            },
            thread_id: thread_id.clone(),
            chat_topic: None,
            user_id_alt: None,
            is_bot: facts.is_bot(),
            scope_id: str_field(payload, "team_id")
                .or_else(|| str_field(event, "team"))
                .map(str::to_owned),
            role_authorized: false,
            user_id_alt_is_stable: false,
        };
        let event_id = str_field(payload, "event_id").unwrap_or(envelope_id);
        let mut message = MessageEvent::text(event_id, source, &text);
        message.message_type = message_type;
        message.message_id = Some(ts.to_owned());
        // Downloaded after the ack, when the core asks (`crate::pending`).
        message.pending_media = pending_media;
        message.reply_to_message_id = thread_id.filter(|t| t != ts);
        if let Some(thread) = facts.thread_ts.filter(|_| facts.is_thread_reply())
            && let Some((parent, own)) = self.thread_parent(channel_id, thread).await
        {
            message.reply_to_text = Some(parent);
            message.reply_to_is_own_message = own;
        }
        message.timestamp = ts.parse().unwrap_or(0.0);
        Handling::Deliver(Box::new(Delivery {
            event: message,
            after,
        }))
    }

    /// Whether an unmentioned thread reply belongs to a conversation with the bot although
    /// memory does not say so (a restart cleared it): the thread's parent was written by the
    /// bot or mentioned it. The reference answers this from its session store; this is the
    /// adapter-local equivalent, one cached `conversations.replies` call per thread. Only
    /// with `reply_in_thread` (otherwise the bot never answered in the thread) and never in
    /// strict mode.
    async fn parent_involves_bot(&self, facts: &Facts<'_>) -> bool {
        if !facts.is_thread_reply()
            || !self.settings.reply_in_thread
            || self.settings.strict_mention
        {
            return false;
        }
        let Some(thread) = facts.thread_ts else {
            return false;
        };
        match self.thread_parent(facts.channel_id, thread).await {
            Some((_, true)) => true,
            Some((_, false)) => self
                .lock()
                .mentioned_parents
                .contains(&key(facts.channel_id, thread)),
            None => false,
        }
    }

    /// The thread parent's text (bot mention stripped) and whether the bot wrote it, so the
    /// core can show what a reply answers (reference `_fetch_thread_parent_text`). One
    /// `conversations.replies` call per thread; `None` when Slack cannot say.
    async fn thread_parent(&self, channel: &str, thread: &str) -> Option<(String, bool)> {
        let cache_key = key(channel, thread);
        if let Some(found) = self.lock().thread_parents.get(&cache_key) {
            return Some(found.clone());
        }
        let fields = [
            ("channel", channel.to_owned()),
            ("ts", thread.to_owned()),
            ("limit", "1".to_owned()),
            ("inclusive", "true".to_owned()),
        ];
        let answer = match self.lookup("conversations.replies", &fields).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::debug!(platform = "slack", channel, thread, error = %e, "thread parent unavailable");
                return None;
            }
        };
        let parent = answer.pointer("/messages/0")?;
        if str_field(parent, "ts") != Some(thread) {
            return None;
        }
        let text = str_field(parent, "text")
            .unwrap_or("")
            .replace(&format!("<@{}>", self.me.user_id), "")
            .trim()
            .to_owned();
        let raw = str_field(parent, "text").unwrap_or("");
        if raw.contains(&format!("<@{}>", self.me.user_id)) || self.gates.matches_pattern(raw) {
            self.lock().mentioned_parents.insert(&cache_key);
        }
        let own = str_field(parent, "user") == Some(self.me.user_id.as_str())
            || (str_field(parent, "bot_id").is_some()
                && str_field(parent, "bot_id") == self.me.bot_id.as_deref());
        self.lock()
            .remember_thread_parent(cache_key, text.clone(), own);
        Some((text, own))
    }

    /// The user's display name, looked up once (`users.info`); the id when Slack cannot
    /// say, cached too so a failing lookup is not repeated for every message.
    async fn user_name(&self, user: &str) -> String {
        if let Some(name) = self.lock().user_names.get(user) {
            return name.clone();
        }
        let name = match self
            .lookup("users.info", &[("user", user.to_owned())])
            .await
        {
            Ok(answer) => [
                "/user/profile/display_name",
                "/user/profile/real_name",
                "/user/real_name",
                "/user/name",
            ]
            .iter()
            .find_map(|p| {
                answer
                    .pointer(p)
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
            })
            .unwrap_or(user)
            .to_owned(),
            Err(LookupError::Late) => {
                // Not remembered: the next message from this user asks again.
                return user.to_owned();
            }
            Err(LookupError::Api(e)) => {
                tracing::debug!(platform = "slack", user, error = %e, "users.info failed");
                user.to_owned()
            }
        };
        self.lock().remember_user_name(user, &name);
        name
    }

    /// One enriching Web API call, abandoned at the look-up deadline.
    async fn lookup(&self, method: &str, fields: &[(&str, String)]) -> Result<Value, LookupError> {
        match tokio::time::timeout_at(self.lookup_deadline, self.api.call_form(method, fields))
            .await
        {
            Ok(answer) => answer.map_err(LookupError::Api),
            Err(_) => {
                tracing::info!(
                    platform = "slack",
                    method,
                    "look-up too slow for the ack deadline; handing the event over without it"
                );
                Err(LookupError::Late)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, crate::memory::Memory> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn message_type(text: &str, media_types: &[String]) -> MessageType {
    if text.starts_with('/') {
        return MessageType::Command;
    }
    let any = |prefix: &str| media_types.iter().any(|m| m.starts_with(prefix));
    if media_types.is_empty() {
        MessageType::Text
    } else if any("image/") {
        MessageType::Photo
    } else if any("video/") {
        MessageType::Video
    } else if any("audio/") {
        MessageType::Voice
    } else {
        MessageType::Document
    }
}

/// A native slash command (`/new title`) → a command event in the channel's session.
fn slash_command(payload: &Value) -> Handling {
    let (Some(command), Some(channel), Some(user)) = (
        str_field(payload, "command"),
        str_field(payload, "channel_id"),
        str_field(payload, "user_id"),
    ) else {
        return Handling::Ack("slash command without command, channel or user");
    };
    let trigger = str_field(payload, "trigger_id").unwrap_or(command);
    let text = format!("{command} {}", str_field(payload, "text").unwrap_or(""))
        .trim()
        .to_owned();
    let mut source = SessionSource::dm("slack", channel, user);
    if !channel.starts_with('D') {
        source.chat_type = ChatType::Group;
    }
    source.user_name = str_field(payload, "user_name").map(str::to_owned);
    source.scope_id = str_field(payload, "team_id").map(str::to_owned);
    let mut event = MessageEvent::text(&format!("slash:{trigger}"), source, &text);
    event.message_type = MessageType::Command;
    // The reference acknowledges a slash command with an ephemeral note.
    let ack_payload = serde_json::json!({
        "response_type": "ephemeral",
        "text": format!("Running `{command}`…"),
    });
    Handling::Deliver(Box::new(Delivery {
        event,
        after: AfterRecord {
            ack_payload: Some(ack_payload),
            ..AfterRecord::default()
        },
    }))
}
