//! The parts of Bot API objects the adapter reads. Unknown fields are ignored and every
//! optional field defaults, so new Telegram fields never break decoding.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
pub struct Update {
    pub update_id: i64,
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(default)]
    pub edited_message: Option<Message>,
    #[serde(default)]
    pub channel_post: Option<Message>,
    #[serde(default)]
    pub callback_query: Option<CallbackQuery>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct User {
    pub id: i64,
    #[serde(default)]
    pub is_bot: bool,
    #[serde(default)]
    pub first_name: String,
    #[serde(default)]
    pub last_name: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
}

impl User {
    pub fn full_name(&self) -> String {
        match &self.last_name {
            Some(last) if !last.is_empty() => format!("{} {last}", self.first_name),
            _ => self.first_name.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Chat {
    pub id: i64,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub first_name: Option<String>,
    #[serde(default)]
    pub last_name: Option<String>,
    #[serde(default)]
    pub is_forum: bool,
}

impl Chat {
    pub fn is_group(&self) -> bool {
        matches!(self.kind.as_str(), "group" | "supergroup")
    }

    pub fn name(&self) -> Option<String> {
        if let Some(title) = &self.title {
            return Some(title.clone());
        }
        let first = self.first_name.clone()?;
        Some(match &self.last_name {
            Some(last) if !last.is_empty() => format!("{first} {last}"),
            _ => first,
        })
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Entity {
    #[serde(rename = "type")]
    pub kind: String,
    pub offset: usize,
    pub length: usize,
    #[serde(default)]
    pub user: Option<User>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PhotoSize {
    pub file_id: String,
    #[serde(default)]
    pub file_size: Option<u64>,
    #[serde(default)]
    pub width: u32,
    #[serde(default)]
    pub height: u32,
}

/// A document, voice note, audio file or video: the fields they share.
#[derive(Debug, Clone, Deserialize)]
pub struct FileRef {
    pub file_id: String,
    #[serde(default)]
    pub file_size: Option<u64>,
    #[serde(default)]
    pub file_name: Option<String>,
    #[serde(default)]
    pub mime_type: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub message_id: i64,
    #[serde(default)]
    pub date: i64,
    pub chat: Chat,
    #[serde(default, rename = "from")]
    pub from_user: Option<User>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub caption: Option<String>,
    #[serde(default)]
    pub entities: Vec<Entity>,
    #[serde(default)]
    pub caption_entities: Vec<Entity>,
    #[serde(default)]
    pub message_thread_id: Option<i64>,
    #[serde(default)]
    pub is_topic_message: bool,
    #[serde(default)]
    pub reply_to_message: Option<Box<Message>>,
    #[serde(default)]
    pub quote: Option<TextQuote>,
    #[serde(default)]
    pub media_group_id: Option<String>,
    #[serde(default)]
    pub photo: Vec<PhotoSize>,
    #[serde(default)]
    pub document: Option<FileRef>,
    #[serde(default)]
    pub voice: Option<FileRef>,
    #[serde(default)]
    pub audio: Option<FileRef>,
    #[serde(default)]
    pub video: Option<FileRef>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TextQuote {
    #[serde(default)]
    pub text: Option<String>,
}

impl Message {
    /// Text and caption, each with its entities.
    pub fn sources(&self) -> [(&str, &[Entity]); 2] {
        [
            (self.text.as_deref().unwrap_or(""), &self.entities),
            (
                self.caption.as_deref().unwrap_or(""),
                &self.caption_entities,
            ),
        ]
    }

    pub fn has_media(&self) -> bool {
        !self.photo.is_empty()
            || self.document.is_some()
            || self.voice.is_some()
            || self.audio.is_some()
            || self.video.is_some()
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct CallbackQuery {
    pub id: String,
    pub from: User,
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(default)]
    pub data: Option<String>,
}

/// `getFile`'s answer.
#[derive(Debug, Clone, Deserialize)]
pub struct File {
    #[serde(default)]
    pub file_path: Option<String>,
    #[serde(default)]
    pub file_size: Option<u64>,
}

/// `getMe`'s answer, the part the adapter needs.
#[derive(Debug, Clone, Deserialize)]
pub struct Me {
    pub id: i64,
    #[serde(default)]
    pub username: Option<String>,
    /// False while privacy mode is on (https://core.telegram.org/bots/api#user).
    #[serde(default)]
    pub can_read_all_group_messages: Option<bool>,
}

/// Slices `text` by a UTF-16 offset and length (entity coordinates).
pub fn utf16_slice(text: &str, offset: usize, length: usize) -> Option<String> {
    let units: Vec<u16> = text.encode_utf16().collect();
    let end = offset.checked_add(length)?;
    let slice = units.get(offset..end)?;
    String::from_utf16(slice).ok()
}
