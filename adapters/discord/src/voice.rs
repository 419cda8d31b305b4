//! Voice messages: a message flagged `IS_VOICE_MESSAGE` (1 << 13) with exactly one Ogg/Opus
//! attachment that carries `duration_secs` and a base64 `waveform`, and no content
//! (https://discord.com/developers/docs/resources/message#message-object-message-flags and
//! #attachment-object). Where the bot may not send voice messages (error 50173, or a 403),
//! the file goes as an ordinary attachment with the caption as content.

use base64::Engine;
use hermes_adapter::{SendErrorKind, SendResult};
use serde_json::json;

use crate::inner::Inner;
use crate::rest::{RestError, Upload};

const IS_VOICE_MESSAGE: u64 = 1 << 13;
/// "Cannot send voice messages in this channel".
const VOICE_NOT_ALLOWED: u64 = 50173;

/// The file's bytes if it fits the channel's upload limit, else the refusal.
pub(crate) async fn read_for_upload(
    inner: &Inner,
    target: &str,
    path: &str,
) -> Result<Vec<u8>, SendResult> {
    let bytes = tokio::fs::read(path).await.map_err(|error| {
        SendResult::failed(
            SendErrorKind::Unknown,
            format!("cannot read the file to send: {error}"),
        )
    })?;
    let limit = inner.with_directory(|d| d.upload_limit(target));
    if bytes.len() as u64 > limit {
        const MIB: f64 = 1024.0 * 1024.0;
        return Err(SendResult::failed(
            SendErrorKind::BadFormat,
            format!(
                "the file is {:.1} MiB; Discord accepts at most {:.0} MiB here",
                bytes.len() as f64 / MIB,
                limit as f64 / MIB
            ),
        ));
    }
    Ok(bytes)
}

pub(crate) async fn send_voice(
    inner: &Inner,
    target: &str,
    path: &str,
    caption: Option<String>,
    duration_secs: f32,
    waveform: &[u8],
) -> SendResult {
    let bytes = match read_for_upload(inner, target, path).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    let body = json!({
        "flags": IS_VOICE_MESSAGE,
        "attachments": [{
            "id": "0",
            "filename": "voice-message.ogg",
            "duration_secs": duration_secs,
            "waveform": base64::engine::general_purpose::STANDARD.encode(waveform),
        }],
    });
    let upload = Upload {
        file_name: "voice-message.ogg".to_owned(),
        bytes: bytes.clone(),
        content_type: Some("audio/ogg"),
    };
    match inner.rest.create_message(target, &body, &[upload]).await {
        Ok(message) => SendResult::sent(Some(message.id)),
        Err(error) if not_allowed(&error) => {
            tracing::warn!(platform = "discord", %error, "voice messages are not allowed here; sending the audio as a file");
            let body = json!({
                "content": caption.unwrap_or_default(),
                "allowed_mentions": {"parse": ["users"]},
                "attachments": [{"id": 0, "filename": "voice.ogg"}],
            });
            let upload = Upload {
                file_name: "voice.ogg".to_owned(),
                bytes,
                content_type: Some("audio/ogg"),
            };
            match inner.rest.create_message(target, &body, &[upload]).await {
                Ok(message) => SendResult::sent(Some(message.id)),
                Err(error) => SendResult::failed(error.kind, error.to_string()),
            }
        }
        Err(error) => match (error.kind, error.retry_after) {
            (SendErrorKind::RateLimited, Some(after)) => SendResult::rate_limited(after),
            (kind, _) => SendResult::failed(kind, error.to_string()),
        },
    }
}

fn not_allowed(error: &RestError) -> bool {
    error.code == Some(VOICE_NOT_ALLOWED) || error.status == Some(403)
}
