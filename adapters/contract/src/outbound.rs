//! Outbound operations the core asks an adapter to perform, and their results.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How a platform measures message length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LengthUnit {
    /// UTF-16 code units (Telegram).
    Utf16,
    /// Unicode scalar values (Discord, Slack).
    Chars,
    Bytes,
}

impl LengthUnit {
    pub fn measure(self, text: &str) -> usize {
        match self {
            LengthUnit::Utf16 => text.encode_utf16().count(),
            LengthUnit::Chars => text.chars().count(),
            LengthUnit::Bytes => text.len(),
        }
    }
}

/// What a platform can do; the core adapts delivery to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    pub message_limit: usize,
    pub length_unit: LengthUnit,
    pub edits: bool,
    pub typing: bool,
    pub buttons: bool,
    pub threads: bool,
    /// The prefix users type for commands (`/`, or `!` on Slack).
    pub command_prefix: char,
    /// The longest caption a voice note can carry, in [`Self::length_unit`]s; `None`: a
    /// voice note takes no caption (the text goes as its own message).
    pub voice_caption_limit: Option<usize>,
}

/// An inline button (approval and clarify prompts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Button {
    pub label: String,
    /// Opaque data returned with the click.
    pub data: String,
}

/// One outbound operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Outbound {
    pub chat_id: String,
    pub thread_id: Option<String>,
    pub kind: OutboundKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OutboundKind {
    /// A text message (already chunked to the platform's limit), optionally as a reply.
    Text {
        text: String,
        reply_to: Option<String>,
        /// Send without platform formatting (the fallback after a formatting rejection).
        plain: bool,
    },
    Edit {
        message_id: String,
        text: String,
    },
    Delete {
        message_id: String,
    },
    Typing,
    /// A prompt with buttons (approval, clarify); platforms without buttons get the text.
    Prompt {
        text: String,
        buttons: Vec<Button>,
    },
    /// A local file sent as a native attachment.
    Media {
        path: String,
        caption: Option<String>,
    },
    /// An Ogg/Opus file sent as a voice note (a voice bubble where the platform has them;
    /// an audio file elsewhere). `duration_secs` and `waveform` (at most 256 loudness bytes)
    /// were measured from the file; `caption` is only set when the platform takes one.
    Voice {
        path: String,
        caption: Option<String>,
        duration_secs: f32,
        waveform: Vec<u8>,
    },
}

/// Why a send failed, as far as the core needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SendErrorKind {
    TooLong,
    BadFormat,
    Forbidden,
    NotFound,
    RateLimited,
    Transient,
    /// The request may or may not have reached the platform (a timed-out send): never
    /// blindly re-send; reconcile.
    Ambiguous,
    Unknown,
}

/// The outcome of one outbound operation.
#[derive(Debug, Clone, PartialEq)]
pub struct SendResult {
    pub message_id: Option<String>,
    pub error: Option<(SendErrorKind, String)>,
    pub retry_after: Option<Duration>,
}

impl SendResult {
    pub fn sent(message_id: Option<String>) -> Self {
        Self {
            message_id,
            error: None,
            retry_after: None,
        }
    }

    pub fn failed(kind: SendErrorKind, message: impl Into<String>) -> Self {
        Self {
            message_id: None,
            error: Some((kind, message.into())),
            retry_after: None,
        }
    }

    pub fn rate_limited(retry_after: Duration) -> Self {
        Self {
            message_id: None,
            error: Some((SendErrorKind::RateLimited, "rate limited".into())),
            retry_after: Some(retry_after),
        }
    }

    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }

    pub fn kind(&self) -> Option<SendErrorKind> {
        self.error.as_ref().map(|(k, _)| *k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_in_each_unit() {
        let text = "a😀中";
        assert_eq!(LengthUnit::Utf16.measure(text), 4);
        assert_eq!(LengthUnit::Chars.measure(text), 3);
        assert_eq!(LengthUnit::Bytes.measure(text), 8);
    }
}
