//! Meta's webhook payload → the core's events. A delivery is
//! `{object: "whatsapp_business_account", entry: [{changes: [{field: "messages", value:
//! {metadata, contacts, messages, statuses}}]}]}`
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/payload-examples>).
//! Each user message becomes one event keyed by its `wamid` (so a redelivered payload is a
//! duplicate in the journal); delivery statuses are not messages and are only logged (a
//! `failed` one at warning level, with Meta's code: the operator sees an undelivered answer);
//! messages for another phone number of the same business account are not ours.

use hermes_adapter::{ChatType, MessageEvent, MessageType, PendingMedia, SessionSource};
use serde_json::Value;

pub const PLATFORM: &str = "whatsapp_cloud";

/// What one delivery holds for the core.
#[derive(Debug, Default)]
pub struct Parsed {
    pub events: Vec<MessageEvent>,
    /// `(wamid, why)` of messages not handed on (group-shaped, unsupported, another number).
    pub skipped: Vec<(String, String)>,
    /// Meta's failure reports for messages we sent: `(wamid, recipient, code, text)`.
    pub failed_statuses: Vec<(String, String, i64, String)>,
}

/// Why a body is not a delivery at all.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Undecodable {
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error("the JSON is not a WhatsApp Business Account notification (object = {0})")]
    NotWaba(String),
}

fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut at = value;
    for key in path {
        at = at.get(*key)?;
    }
    at.as_str().map(str::trim).filter(|s| !s.is_empty())
}

/// Parses a verified body; `phone_number_id` is ours.
pub fn parse(body: &[u8], phone_number_id: &str) -> Result<Parsed, Undecodable> {
    let payload: Value =
        serde_json::from_slice(body).map_err(|e| Undecodable::NotJson(e.to_string()))?;
    let object = payload.get("object").and_then(Value::as_str).unwrap_or("");
    if object != "whatsapp_business_account" {
        return Err(Undecodable::NotWaba(object.chars().take(64).collect()));
    }
    let mut parsed = Parsed::default();
    let entries = payload.get("entry").and_then(Value::as_array);
    for change in entries.into_iter().flatten().flat_map(|e| {
        e.get("changes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
    }) {
        if change.get("field").and_then(Value::as_str) != Some("messages") {
            continue;
        }
        let Some(value) = change.get("value") else {
            continue;
        };
        let to = str_at(value, &["metadata", "phone_number_id"]).unwrap_or("");
        let ours = to == phone_number_id;
        for status in value
            .get("statuses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if status.get("status").and_then(Value::as_str) != Some("failed") || !ours {
                continue;
            }
            let error = status
                .get("errors")
                .and_then(|e| e.get(0))
                .cloned()
                .unwrap_or_default();
            parsed.failed_statuses.push((
                str_at(status, &["id"]).unwrap_or("").to_owned(),
                str_at(status, &["recipient_id"]).unwrap_or("").to_owned(),
                error.get("code").and_then(Value::as_i64).unwrap_or(0),
                str_at(&error, &["error_data", "details"])
                    .or_else(|| str_at(&error, &["title"]))
                    .unwrap_or("")
                    .to_owned(),
            ));
        }
        let contacts = value.get("contacts").and_then(Value::as_array);
        for message in value
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let wamid = str_at(message, &["id"]).unwrap_or("").to_owned();
            if !ours {
                parsed
                    .skipped
                    .push((wamid, format!("addressed to phone number id {to}")));
                continue;
            }
            match event(message, contacts.map(Vec::as_slice).unwrap_or(&[])) {
                Ok(event) => parsed.events.push(event),
                Err(why) => parsed.skipped.push((wamid, why)),
            }
        }
    }
    Ok(parsed)
}

const MEDIA_TYPES: &[(&str, MessageType)] = &[
    ("image", MessageType::Photo),
    ("video", MessageType::Video),
    ("audio", MessageType::Voice),
    ("document", MessageType::Document),
    ("sticker", MessageType::Sticker),
];

fn event(message: &Value, contacts: &[Value]) -> Result<MessageEvent, String> {
    let wamid = str_at(message, &["id"]).ok_or("a message without an id")?;
    let from = str_at(message, &["from"]).ok_or("a message without a sender")?;
    if message.get("chat").is_some() || message.get("group_id").is_some() {
        return Err("a group message; the Cloud API adapter serves direct chats only".into());
    }
    let kind = message
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("text");
    let mut message_type = MessageType::Text;
    let mut pending = Vec::new();
    let text = match kind {
        "text" => str_at(message, &["text", "body"]).unwrap_or("").to_owned(),
        // A tap on one of our reply buttons carries the data we gave the button: the command
        // it stands for, from the user who tapped.
        "interactive" => {
            message_type = MessageType::Command;
            let inner = message.get("interactive").cloned().unwrap_or_default();
            let reply = inner
                .get("button_reply")
                .or_else(|| inner.get("list_reply"))
                .cloned()
                .unwrap_or_default();
            str_at(&reply, &["id"])
                .or_else(|| str_at(&reply, &["title"]))
                .unwrap_or("")
                .to_owned()
        }
        // A template's quick-reply button: its text.
        "button" => str_at(message, &["button", "text"])
            .or_else(|| str_at(message, &["button", "payload"]))
            .unwrap_or("")
            .to_owned(),
        "location" => {
            let at = message.get("location").cloned().unwrap_or_default();
            message_type = MessageType::Location;
            format!(
                "[location: {}, {}{}]",
                at.get("latitude").unwrap_or(&Value::Null),
                at.get("longitude").unwrap_or(&Value::Null),
                str_at(&at, &["name"])
                    .map(|n| format!(" — {n}"))
                    .unwrap_or_default()
            )
        }
        other => {
            let Some((_, media_type)) = MEDIA_TYPES.iter().find(|(k, _)| *k == other) else {
                return Err(format!("a {other} message, which hermesd does not take"));
            };
            message_type = *media_type;
            let media = message.get(other).cloned().unwrap_or_default();
            let id = str_at(&media, &["id"]).ok_or("a media message without a media id")?;
            let mime = str_at(&media, &["mime_type"]).unwrap_or("application/octet-stream");
            let label = str_at(&media, &["filename"]).unwrap_or(other).to_owned();
            pending.push(PendingMedia {
                reference: serde_json::json!({"id": id, "mime_type": mime}),
                label,
            });
            str_at(&media, &["caption"]).unwrap_or("").to_owned()
        }
    };
    if text.is_empty() && pending.is_empty() {
        return Err(format!("an empty {kind} message"));
    }
    let name = contacts
        .iter()
        .find(|c| str_at(c, &["wa_id"]) == Some(from))
        .and_then(|c| str_at(c, &["profile", "name"]))
        .map(str::to_owned);
    let source = SessionSource {
        chat_name: name.clone(),
        user_name: name,
        chat_type: ChatType::Dm,
        ..SessionSource::dm(PLATFORM, from, from)
    };
    let mut event = MessageEvent::text(wamid, source, &text);
    event.message_type = message_type;
    event.message_id = Some(wamid.to_owned());
    event.pending_media = pending;
    event.reply_to_message_id = str_at(message, &["context", "id"]).map(str::to_owned);
    event.timestamp = str_at(message, &["timestamp"])
        .and_then(|t| t.parse::<f64>().ok())
        .unwrap_or(0.0);
    Ok(event)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn delivery(to: &str, messages: Value, statuses: Value) -> Vec<u8> {
        serde_json::to_vec(
            &json!({"object": "whatsapp_business_account", "entry": [{"id": "waba",
            "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550001", "phone_number_id": to},
            "contacts": [{"profile": {"name": "Ada"}, "wa_id": "4915112345"}],
            "messages": messages, "statuses": statuses}}]}]}),
        )
        .unwrap()
    }

    #[test]
    fn texts_taps_and_media_become_events_keyed_by_wamid() {
        let body = delivery(
            "111",
            json!([
                {"from": "4915112345", "id": "wamid.A", "timestamp": "1700000000", "type": "text",
                 "text": {"body": "hello"}, "context": {"from": "15550001", "id": "wamid.OURS"}},
                {"from": "4915112345", "id": "wamid.B", "timestamp": "1700000001", "type": "interactive",
                 "interactive": {"type": "button_reply", "button_reply": {"id": "/approve once", "title": "Yes"}}},
                {"from": "4915112345", "id": "wamid.C", "timestamp": "1700000002", "type": "image",
                 "image": {"id": "9001", "mime_type": "image/png", "caption": "look"}},
                {"from": "4915112345", "id": "wamid.D", "type": "reaction", "reaction": {"emoji": "x"}}
            ]),
            json!([{"id": "wamid.OURS", "status": "delivered", "recipient_id": "4915112345"}]),
        );
        let parsed = parse(&body, "111").unwrap();
        let ids: Vec<&str> = parsed.events.iter().map(|e| e.event_id.as_str()).collect();
        assert_eq!(ids, ["wamid.A", "wamid.B", "wamid.C"]);
        let first = &parsed.events[0];
        assert_eq!(first.source.chat_id, "4915112345");
        assert_eq!(first.source.user_name.as_deref(), Some("Ada"));
        assert_eq!(first.reply_to_message_id.as_deref(), Some("wamid.OURS"));
        assert_eq!(first.timestamp, 1_700_000_000.0);
        assert_eq!(parsed.events[1].text, "/approve once");
        assert_eq!(parsed.events[1].message_type, MessageType::Command);
        assert_eq!(parsed.events[2].text, "look");
        assert_eq!(parsed.events[2].pending_media[0].reference["id"], "9001");
        assert_eq!(
            parsed.skipped.len(),
            1,
            "the reaction is named, not dropped silently"
        );
        assert!(
            parsed.failed_statuses.is_empty(),
            "a delivered status is no failure"
        );
    }

    #[test]
    fn other_numbers_groups_and_failed_statuses_are_sorted_out() {
        let msg = json!([{"from": "1", "id": "wamid.X", "type": "text", "text": {"body": "hi"}}]);
        let elsewhere = parse(&delivery("222", msg, json!([])), "111").unwrap();
        assert!(elsewhere.events.is_empty());
        assert_eq!(elsewhere.skipped.len(), 1);
        let group = json!([{"from": "1", "id": "wamid.G", "chat": "120@g.us", "type": "text",
            "text": {"body": "hi"}}]);
        assert!(
            parse(&delivery("111", group, json!([])), "111")
                .unwrap()
                .events
                .is_empty()
        );
        let failed = json!([{"id": "wamid.S", "status": "failed", "recipient_id": "1",
            "errors": [{"code": 131047, "title": "Re-engagement message",
            "error_data": {"details": "more than 24 hours"}}]}]);
        let parsed = parse(&delivery("111", json!([]), failed), "111").unwrap();
        assert_eq!(parsed.failed_statuses[0].2, 131047);
        let not_json = parse(b"\xff", "111").unwrap_err().to_string();
        assert!(not_json.starts_with("the body is not JSON"), "{not_json}");
        assert!(matches!(
            parse(br#"{"object":"page"}"#, "111"),
            Err(Undecodable::NotWaba(_))
        ));
    }
}
