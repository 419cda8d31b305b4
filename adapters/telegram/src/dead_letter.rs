//! An update that does not decode becomes a [`DeadLetter`]: its raw JSON, its id and, when
//! the raw JSON still names a chat, where to tell the user that it could not be read.

use hermes_adapter::{ChatType, DeadLetter, SessionSource};
use serde_json::Value;

use crate::inbound::{PLATFORM, chat_type};

/// The dead letter for `raw`, whose decoding failed with `error`.
pub fn dead_letter(update_id: i64, raw: &Value, error: &serde_json::Error) -> DeadLetter {
    DeadLetter {
        platform: PLATFORM.to_owned(),
        item_id: update_id.to_string(),
        source: source(raw),
        raw: raw.to_string(),
        error: error.to_string(),
    }
}

/// The chat (and sender) read loosely from an undecodable update's message, if any.
fn source(raw: &Value) -> Option<SessionSource> {
    let message = ["message", "edited_message", "channel_post"]
        .iter()
        .map(|k| &raw[k])
        .chain([&raw["callback_query"]["message"]])
        .find(|m| m.is_object())?;
    let chat_id = message["chat"]["id"].as_i64()?.to_string();
    let kind = chat_type(message["chat"]["type"].as_str().unwrap_or("private"));
    let user_id = raw["callback_query"]["from"]["id"]
        .as_i64()
        .or_else(|| message["from"]["id"].as_i64())
        .map(|id| id.to_string())
        .or_else(|| matches!(kind, ChatType::Dm).then(|| chat_id.clone()));
    let mut source = SessionSource::dm(PLATFORM, &chat_id, "");
    source.chat_type = kind;
    source.user_id = user_id;
    source.thread_id = message["message_thread_id"].as_i64().map(|t| t.to_string());
    Some(source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_chat_is_read_from_a_broken_message() {
        let raw = json!({"update_id": 7, "message": {"message_id": "not a number",
            "chat": {"id": 42, "type": "private"}, "from": {"id": 42}}});
        let error = serde_json::from_str::<u8>("x").unwrap_err();
        let letter = dead_letter(7, &raw, &error);
        let source = letter.source.expect("chat known");
        assert_eq!(
            (source.chat_id.as_str(), source.user_id.as_deref()),
            ("42", Some("42"))
        );
        assert_eq!(letter.item_id, "7");
        assert!(
            dead_letter(8, &json!({"update_id": 8}), &error)
                .source
                .is_none()
        );
    }
}
