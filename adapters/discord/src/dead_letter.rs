//! A `MESSAGE_CREATE` or `INTERACTION_CREATE` dispatch whose payload does not decode
//! becomes a [`DeadLetter`] for the core, read loosely for its id and channel so the user
//! can be told. The gateway has no acknowledgement: the core keeps it before we read on.

use hermes_adapter::{ChatType, DeadLetter, SessionSource};
use serde_json::Value;

/// The dead letter for dispatch `name` with payload `data`, whose decoding failed.
pub fn dead_letter(name: &str, data: &Value, error: &serde_json::Error) -> DeadLetter {
    let id = data["id"].as_str().unwrap_or("unknown");
    DeadLetter {
        platform: "discord".to_owned(),
        item_id: format!("{name}:{id}"),
        source: source(data),
        raw: data.to_string(),
        error: error.to_string(),
    }
}

/// The channel and author of a message or interaction payload, if it still names them.
fn source(data: &Value) -> Option<SessionSource> {
    let channel = data["channel_id"].as_str()?;
    let user = [
        &data["author"]["id"],
        &data["member"]["user"]["id"],
        &data["user"]["id"],
    ]
    .into_iter()
    .find_map(Value::as_str)?;
    let mut source = SessionSource::dm("discord", channel, user);
    if let Some(guild) = data["guild_id"].as_str() {
        source.chat_type = ChatType::Group;
        source.scope_id = Some(guild.to_owned());
    }
    Some(source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_channel_and_author_are_read_from_a_broken_message() {
        let data = json!({"id": "9", "channel_id": "5", "guild_id": "1",
            "author": {"id": "42"}, "content": 7});
        let error = serde_json::from_str::<u8>("x").unwrap_err();
        let letter = dead_letter("MESSAGE_CREATE", &data, &error);
        assert_eq!(letter.item_id, "MESSAGE_CREATE:9");
        let source = letter.source.expect("channel known");
        assert_eq!(
            (source.chat_id.as_str(), source.chat_type),
            ("5", ChatType::Group)
        );
        assert!(
            dead_letter("MESSAGE_CREATE", &json!({}), &error)
                .source
                .is_none()
        );
    }
}
