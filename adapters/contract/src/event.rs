//! Inbound events: who wrote what, where (`SessionSource`), normalised across platforms.

use serde::{Deserialize, Serialize};

/// The kind of chat an event came from (Hermes `chat_type` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatType {
    Dm,
    Group,
    Channel,
    Thread,
    Forum,
}

impl ChatType {
    pub fn as_str(self) -> &'static str {
        match self {
            ChatType::Dm => "dm",
            ChatType::Group => "group",
            ChatType::Channel => "channel",
            ChatType::Thread => "thread",
            ChatType::Forum => "forum",
        }
    }
}

/// Where a message came from; the session key is derived from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSource {
    pub platform: String,
    pub chat_id: String,
    pub chat_name: Option<String>,
    pub chat_type: ChatType,
    pub user_id: Option<String>,
    pub user_name: Option<String>,
    pub thread_id: Option<String>,
    pub chat_topic: Option<String>,
    /// A second identity for the user (e.g. a platform-specific alias).
    pub user_id_alt: Option<String>,
    /// The adapter vouches that `user_id_alt` is the account's stable id (Signal's uuid,
    /// which stays when a phone number changes hands), not a name someone else can take
    /// over (a Telegram username): then group members are keyed by it, as Hermes keys them
    /// by `user_id_alt or user_id`. Absent in events journaled before it existed.
    #[serde(default)]
    pub user_id_alt_is_stable: bool,
    pub is_bot: bool,
    /// The guild/workspace id where the platform has one.
    pub scope_id: Option<String>,
    /// Set by adapters that authorise by role (Discord `DISCORD_ALLOWED_ROLES`).
    pub role_authorized: bool,
}

impl SessionSource {
    /// A direct message from `user_id` in chat `chat_id`.
    pub fn dm(platform: &str, chat_id: &str, user_id: &str) -> Self {
        Self {
            platform: platform.to_owned(),
            chat_id: chat_id.to_owned(),
            chat_name: None,
            chat_type: ChatType::Dm,
            user_id: Some(user_id.to_owned()),
            user_name: None,
            thread_id: None,
            chat_topic: None,
            user_id_alt: None,
            user_id_alt_is_stable: false,
            is_bot: false,
            scope_id: None,
            role_authorized: false,
        }
    }
}

/// What kind of content an event carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageType {
    Text,
    Photo,
    Video,
    Audio,
    Voice,
    Document,
    Sticker,
    Location,
    Command,
}

/// An attachment an event refers to but its adapter has not fetched yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingMedia {
    /// What the adapter needs to fetch it (its platform's file object); opaque to the core.
    pub reference: serde_json::Value,
    /// The attachment's name, for the note the model gets when it cannot be fetched.
    pub label: String,
}

/// Marks an event as one part of a message the platform delivers in pieces (an album, a paste
/// split at the platform's length limit). Parts journaled separately, perhaps by different
/// instances, are joined into one turn by whoever runs the session's turns (PostgreSQL).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeTag {
    /// Parts that may be joined share it; it names the chat and the album, or the chat,
    /// thread and sender of a paste.
    pub key: String,
    pub kind: MergeKind,
    /// The platform's sequence number of the part's (first) message: parts join in its order.
    pub order: i64,
    /// How long (milliseconds) to wait after this part is seen for a part that may follow it;
    /// zero when nothing follows it.
    pub quiet_ms: u64,
}

/// How the parts of a [`MergeTag`] are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeKind {
    /// Every part with the key belongs: texts one per line, a caption repeated on several
    /// parts once; attachments in order.
    Album,
    /// A part belongs to the one before it only when that one may continue (its `quiet_ms`
    /// is not zero: it reached the split length); texts one per line.
    SplitText,
}

/// One inbound message, as every adapter produces it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageEvent {
    /// The platform's unique id for this delivery (update id, message id, envelope id):
    /// the core records it before the adapter acknowledges, and drops duplicates.
    pub event_id: String,
    pub text: String,
    pub message_type: MessageType,
    pub source: SessionSource,
    pub message_id: Option<String>,
    /// Local cached paths of downloaded attachments, with their MIME types.
    pub media_paths: Vec<String>,
    pub media_types: Vec<String>,
    /// Attachments recorded but not fetched yet: the adapter acknowledged the event before
    /// downloading them (a platform's ack deadline), and the core has the adapter fetch
    /// them just before the turn ([`crate::Adapter::fetch_pending_media`]). Journaled with
    /// the event, so a crash after the ack loses nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_media: Vec<PendingMedia>,
    pub reply_to_message_id: Option<String>,
    pub reply_to_text: Option<String>,
    pub reply_to_is_own_message: bool,
    /// Seconds since the Unix epoch, as the platform reported it.
    pub timestamp: f64,
    /// Set when the event is one part of an album or a split paste ([`MergeTag`]). Absent
    /// from events journaled before it existed, which load as unmergeable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeTag>,
    /// Where the answer goes when not back to the chat the event came from (a webhook route
    /// delivering to a Telegram chat or a GitHub pull request). Journaled with the event, so
    /// a turn resumed after a crash answers the same place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_target: Option<ReplyTarget>,
    /// Set on the event a `/background` command spawns: it runs as a session of its own and
    /// its answer goes to the chat through [`MessageEvent::reply_target`]. Absent from
    /// events journaled before it existed, which load as ordinary events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<BackgroundTag>,
}

/// What marks a spawned background task's event ([`MessageEvent::background`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackgroundTag {
    /// The task's id as the chat was told it (`bg_<HHMMSS>_<6 hex>`).
    pub task_id: String,
    /// The start of the prompt, quoted in the result's header.
    pub preview: String,
}

/// The destination of an event's answer ([`MessageEvent::reply_target`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyTarget {
    pub platform: String,
    pub chat_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The event's text is the answer itself: no agent runs (a `deliver_only` route).
    #[serde(default)]
    pub verbatim: bool,
}

/// The platform name of events that arrive over signed webhooks: their text is content from
/// outside (a pull request's title, an alert), never a command.
pub const WEBHOOK_PLATFORM: &str = "webhook";

impl MessageEvent {
    /// A plain text event.
    pub fn text(event_id: &str, source: SessionSource, text: &str) -> Self {
        Self {
            event_id: event_id.to_owned(),
            text: text.to_owned(),
            message_type: MessageType::Text,
            source,
            message_id: None,
            media_paths: Vec::new(),
            media_types: Vec::new(),
            pending_media: Vec::new(),
            reply_to_message_id: None,
            reply_to_text: None,
            reply_to_is_own_message: false,
            timestamp: 0.0,
            merge: None,
            reply_target: None,
            background: None,
        }
    }

    /// Appends `part`, a later part of the same album or paste: its attachments after ours,
    /// its text on a line of its own (for an album, not when one of our lines already says
    /// it: a caption repeated on every photo is kept once).
    pub fn append_part(&mut self, part: MessageEvent, kind: MergeKind) {
        self.media_paths.extend(part.media_paths);
        self.media_types.extend(part.media_types);
        self.pending_media.extend(part.pending_media);
        let repeated = kind == MergeKind::Album && self.text.lines().any(|l| l == part.text);
        if part.text.is_empty() || repeated {
            return;
        }
        self.text = if self.text.is_empty() {
            part.text
        } else {
            format!("{}\n{}", self.text, part.text)
        };
    }

    /// The command name: the first token after `/`, lowercased, `@botname` stripped; `None`
    /// when the text is not a command or the name contains `/` (a path, not a command).
    pub fn command(&self) -> Option<String> {
        // A background task's prompt is the model's input, never a command to run.
        if self.source.platform == WEBHOOK_PLATFORM || self.background.is_some() {
            return None;
        }
        let rest = self.text.trim_start().strip_prefix('/')?;
        let token = rest.split_whitespace().next()?;
        let name = token.split('@').next().unwrap_or(token);
        if name.is_empty() || name.contains('/') {
            return None;
        }
        Some(name.to_lowercase())
    }

    /// The command's arguments, with em dash → `--` and en dash → `-` as typed on phones.
    pub fn command_args(&self) -> String {
        let rest = self.text.trim_start().trim_start_matches('/');
        let args = rest
            .split_once(char::is_whitespace)
            .map(|(_, a)| a)
            .unwrap_or("");
        args.trim()
            .replace('\u{2014}', "--")
            .replace('\u{2013}', "-")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(text: &str) -> MessageEvent {
        MessageEvent::text("1", SessionSource::dm("telegram", "42", "42"), text)
    }

    #[test]
    fn a_merge_tag_survives_the_journal_and_older_rows_load_without_one() {
        let mut tagged = event("part");
        tagged.merge = Some(MergeTag {
            key: "album:42:7".into(),
            kind: MergeKind::Album,
            order: 1001,
            quiet_ms: 800,
        });
        let json = serde_json::to_value(&tagged).unwrap();
        assert_eq!(json["merge"]["kind"], "album");
        assert_eq!(
            serde_json::from_value::<MessageEvent>(json).unwrap(),
            tagged
        );
        // A row journaled before the tag existed has no such field.
        let mut older = serde_json::to_value(event("old")).unwrap();
        assert!(
            older.get("merge").is_none(),
            "untagged events write no field"
        );
        older.as_object_mut().unwrap().remove("pending_media");
        let loaded: MessageEvent = serde_json::from_value(older).unwrap();
        assert_eq!(loaded.merge, None);
    }

    #[test]
    fn appended_parts_keep_their_order_and_an_album_caption_once() {
        let mut album = event("what is this?");
        album.pending_media.push(PendingMedia {
            reference: serde_json::json!(1),
            label: "a".into(),
        });
        let mut second = event("what is this?");
        second.pending_media.push(PendingMedia {
            reference: serde_json::json!(2),
            label: "b".into(),
        });
        album.append_part(second, MergeKind::Album);
        album.append_part(event(""), MergeKind::Album);
        assert_eq!(album.text, "what is this?");
        let labels: Vec<&str> = album
            .pending_media
            .iter()
            .map(|m| m.label.as_str())
            .collect();
        assert_eq!(labels, ["a", "b"]);
        let mut paste = event("same");
        paste.append_part(event("same"), MergeKind::SplitText);
        assert_eq!(paste.text, "same\nsame", "a paste keeps every line");
    }

    #[test]
    fn commands_are_parsed_like_hermes() {
        assert_eq!(
            event("/New@hermes_bot my title").command().as_deref(),
            Some("new")
        );
        assert_eq!(event("/new@hermes_bot my title").command_args(), "my title");
        assert_eq!(event("/usr/bin/ls").command(), None);
        assert_eq!(event("hello").command(), None);
        assert_eq!(event("/").command(), None);
        assert_eq!(
            event("/model \u{2014}global x\u{2013}y").command_args(),
            "--global x-y"
        );
    }
}
