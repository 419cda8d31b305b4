//! An envelope whose payload does not have the shape Slack documents for its type becomes a
//! [`DeadLetter`]: handed to the core, then acknowledged once the core has kept it.

use hermes_adapter::{ChatType, DeadLetter, SessionSource};
use serde_json::Value;

/// Why `payload` cannot be read as an envelope of `kind`, or `None` when it can.
/// <https://api.slack.com/apis/socket-mode#events>: every envelope carries an object
/// `payload`; an `events_api` payload carries its `event` object.
pub fn undecodable(kind: &str, payload: &Value) -> Option<String> {
    if !payload.is_object() {
        return Some(format!("{kind} envelope payload is not an object"));
    }
    if kind == "events_api" && !payload["event"].is_object() {
        return Some("events_api payload without an event object".to_owned());
    }
    None
}

/// The dead letter for envelope `envelope_id`.
pub fn dead_letter(envelope_id: &str, kind: &str, payload: &Value, error: String) -> DeadLetter {
    DeadLetter {
        platform: "slack".to_owned(),
        item_id: envelope_id.to_owned(),
        source: source(payload),
        raw: serde_json::json!({"envelope_id": envelope_id, "type": kind, "payload": payload})
            .to_string(),
        error,
    }
}

/// The channel and user, if the payload still names them (an event, a slash command).
fn source(payload: &Value) -> Option<SessionSource> {
    let event = &payload["event"];
    let channel = event["channel"]
        .as_str()
        .or_else(|| payload["channel_id"].as_str())?;
    let user = event["user"]
        .as_str()
        .or_else(|| payload["user_id"].as_str())?;
    let mut source = SessionSource::dm("slack", channel, user);
    if !channel.starts_with('D') {
        source.chat_type = ChatType::Group;
    }
    Some(source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes_slack_does_not_send_are_undecodable() {
        assert!(undecodable("events_api", &json!("text")).is_some());
        assert!(undecodable("events_api", &json!({"event": 3})).is_some());
        assert!(undecodable("events_api", &json!({"event": {"type": "message"}})).is_none());
        let letter = dead_letter(
            "e1",
            "slash_commands",
            &json!({"channel_id": "D1", "user_id": "U1"}),
            "x".into(),
        );
        assert_eq!(letter.source.expect("known").chat_type, ChatType::Dm);
    }
}
