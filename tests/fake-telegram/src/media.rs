//! Files the bot sends (sendPhoto, sendDocument, sendVoice, …): one stored message with the
//! caption as its text, answered with the file object Telegram returns
//! (https://core.telegram.org/bots/api#message); a voice note as a bubble only when its bytes
//! are a format Telegram plays as one (`audio_format`).

use serde_json::{Map, Value, json};

use crate::server::{Reply, bad_request, chat_json, require_i64, str_param};
use crate::state::{Shared, StoredMessage, UploadedFile};

pub(crate) fn send_media(
    shared: &Shared,
    method: &str,
    params: &Map<String, Value>,
    files: &[UploadedFile],
) -> Reply {
    let chat_id = require_i64(params, "chat_id")?;
    let (field, voice) =
        crate::audio_format::shown_as(method.trim_start_matches("send"), params, files);
    if !params.contains_key(field) {
        return Err(bad_request(&format!("there is no {field} in the request")));
    }
    let mut inner = shared.lock();
    let message_id = inner.next_message_id();
    let caption = str_param(params, "caption").unwrap_or_default();
    inner.messages.insert(
        (chat_id, message_id),
        StoredMessage {
            chat_id,
            message_id,
            text: caption.clone(),
            reply_markup: None,
            from_bot: true,
        },
    );
    let chat = chat_json(&inner, chat_id);
    let mut file = json!({"file_id": format!("sent{message_id}"), "file_unique_id": format!("usent{message_id}")});
    if let Some((mime, duration)) = voice {
        file["mime_type"] = json!(mime);
        file["duration"] = json!(duration);
    }
    Ok(
        json!({"message_id": message_id, "date": 1_700_000_000, "chat": chat, "caption": caption,
        field: file}),
    )
}
