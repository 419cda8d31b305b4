//! Bot API JSON objects as Telegram sends them: chats, users, messages with the entities the
//! server computes (mentions and bot commands, offsets in UTF-16 units), updates.

use serde_json::{Value, json};

/// A chat to push messages into.
#[derive(Debug, Clone, PartialEq)]
pub struct Chat {
    pub id: i64,
    pub kind: &'static str,
    pub title: Option<String>,
    pub is_forum: bool,
}

impl Chat {
    pub fn private(id: i64) -> Self {
        Self {
            id,
            kind: "private",
            title: None,
            is_forum: false,
        }
    }

    pub fn group(id: i64) -> Self {
        Self {
            id,
            kind: "group",
            title: Some(format!("group {id}")),
            is_forum: false,
        }
    }

    pub fn supergroup(id: i64) -> Self {
        Self {
            id,
            kind: "supergroup",
            title: Some(format!("supergroup {id}")),
            is_forum: false,
        }
    }

    /// A supergroup with topics enabled.
    pub fn forum(id: i64) -> Self {
        Self {
            id,
            kind: "supergroup",
            title: Some(format!("forum {id}")),
            is_forum: true,
        }
    }

    pub fn to_json(&self) -> Value {
        let mut chat = json!({"id": self.id, "type": self.kind});
        if let Some(title) = &self.title {
            chat["title"] = json!(title);
        } else {
            chat["first_name"] = json!(format!("user{}", self.id));
        }
        if self.is_forum {
            chat["is_forum"] = json!(true);
        }
        chat
    }
}

/// A Telegram user.
#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub id: i64,
    pub first_name: String,
    pub username: Option<String>,
    pub is_bot: bool,
}

impl User {
    pub fn new(id: i64, first_name: &str) -> Self {
        Self {
            id,
            first_name: first_name.to_owned(),
            username: None,
            is_bot: false,
        }
    }

    pub fn with_username(mut self, username: &str) -> Self {
        self.username = Some(username.to_owned());
        self
    }

    pub fn bot(id: i64, username: &str) -> Self {
        Self {
            id,
            first_name: username.to_owned(),
            username: Some(username.to_owned()),
            is_bot: true,
        }
    }

    pub fn to_json(&self) -> Value {
        let mut user = json!({"id": self.id, "is_bot": self.is_bot, "first_name": self.first_name});
        if let Some(username) = &self.username {
            user["username"] = json!(username);
        }
        user
    }
}

/// An attachment on a pushed message; the fake stores its bytes for getFile + download.
#[derive(Debug, Clone, PartialEq)]
pub enum Attachment {
    Photo {
        bytes: Vec<u8>,
    },
    Document {
        bytes: Vec<u8>,
        file_name: String,
        mime_type: String,
    },
    Voice {
        bytes: Vec<u8>,
    },
    Audio {
        bytes: Vec<u8>,
        mime_type: String,
    },
}

/// Everything a pushed user message may carry.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageSpec {
    pub chat: Chat,
    pub from: User,
    pub text: String,
    pub thread_id: Option<i64>,
    pub is_topic_message: bool,
    /// (message id, author) of the message being replied to.
    pub reply_to: Option<(i64, User)>,
    pub media_group_id: Option<String>,
    pub attachment: Option<Attachment>,
    /// Overrides the entities the fake would compute.
    pub entities: Option<Value>,
    /// Reported file size, when it should differ from the stored bytes.
    pub declared_size: Option<u64>,
}

impl MessageSpec {
    pub fn text(chat: Chat, from: User, text: &str) -> Self {
        Self {
            chat,
            from,
            text: text.to_owned(),
            thread_id: None,
            is_topic_message: false,
            reply_to: None,
            media_group_id: None,
            attachment: None,
            entities: None,
            declared_size: None,
        }
    }

    /// A message in a forum topic (`message_thread_id` + `is_topic_message`).
    pub fn in_topic(mut self, thread_id: i64) -> Self {
        self.thread_id = Some(thread_id);
        self.is_topic_message = true;
        self
    }

    pub fn replying_to(mut self, message_id: i64, author: User) -> Self {
        self.reply_to = Some((message_id, author));
        self
    }

    pub fn with_attachment(mut self, attachment: Attachment) -> Self {
        self.attachment = Some(attachment);
        self
    }

    pub fn in_media_group(mut self, media_group_id: &str) -> Self {
        self.media_group_id = Some(media_group_id.to_owned());
        self
    }
}

/// The entities Telegram computes server-side: `@username` mentions and `/command[@bot]`.
pub fn compute_entities(text: &str) -> Vec<Value> {
    let mut entities = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut utf16_offset = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let boundary = i == 0 || chars[i - 1].is_whitespace();
        if boundary && (c == '@' || c == '/') {
            let mut j = i + 1;
            while j < chars.len()
                && (chars[j].is_ascii_alphanumeric()
                    || chars[j] == '_'
                    || (c == '/' && chars[j] == '@'))
            {
                j += 1;
            }
            let length: usize = chars[i..j].iter().map(|c| c.len_utf16()).sum();
            let kind = if c == '@' { "mention" } else { "bot_command" };
            let long_enough = if c == '@' { j - i > 5 } else { j - i > 1 };
            if long_enough {
                entities.push(json!({"type": kind, "offset": utf16_offset, "length": length}));
            }
            utf16_offset += length;
            i = j;
            continue;
        }
        utf16_offset += c.len_utf16();
        i += 1;
    }
    entities
}
