//! What tests push into the fake: users (with roles, bot or not) and messages (mentions,
//! replies, attachments, backdated ids).

use std::time::Duration;

use serde_json::Value;

use crate::state::user_json;

/// A user of the fake guild (or a DM partner).
#[derive(Debug, Clone)]
pub struct FakeUser {
    pub id: String,
    pub name: String,
    pub bot: bool,
    pub roles: Vec<String>,
}

impl FakeUser {
    pub(crate) fn json(&self) -> Value {
        user_json(&self.id, &self.name, self.bot)
    }
}

/// A message to push live or to seed into history.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub channel_id: String,
    pub author: FakeUser,
    pub content: String,
    pub mentions: Vec<FakeUser>,
    pub reply_to: Option<String>,
    pub attachments: Vec<(String, String, Vec<u8>)>,
    pub age: Duration,
    /// Sent as a voice message: flag 8192 and `duration_secs`/`waveform` on the attachment
    /// (https://discord.com/developers/docs/resources/message#attachment-object).
    pub voice_message: bool,
}

impl Incoming {
    pub fn new(channel_id: &str, author: &FakeUser, content: &str) -> Self {
        Self {
            channel_id: channel_id.to_owned(),
            author: author.clone(),
            content: content.to_owned(),
            mentions: Vec::new(),
            reply_to: None,
            attachments: Vec::new(),
            age: Duration::ZERO,
            voice_message: false,
        }
    }

    /// Adds `user` to the resolved `mentions` list (the content is left as given).
    pub fn mentioning(mut self, user: &FakeUser) -> Self {
        self.mentions.push(user.clone());
        self
    }

    pub fn replying_to(mut self, message_id: &str) -> Self {
        self.reply_to = Some(message_id.to_owned());
        self
    }

    pub fn with_attachment(mut self, file_name: &str, content_type: &str, bytes: &[u8]) -> Self {
        self.attachments.push((
            file_name.to_owned(),
            content_type.to_owned(),
            bytes.to_vec(),
        ));
        self
    }

    /// A voice message recorded in the Discord client: one Ogg/Opus attachment.
    pub fn voice_message(mut self, bytes: &[u8]) -> Self {
        self.attachments.push((
            "voice-message.ogg".to_owned(),
            "audio/ogg".to_owned(),
            bytes.to_vec(),
        ));
        self.voice_message = true;
        self
    }

    /// Backdates the message (its snowflake carries the time).
    pub fn aged(mut self, age: Duration) -> Self {
        self.age = age;
        self
    }
}
