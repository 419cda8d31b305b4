//! One `receive` event from signal-cli's stream → what the adapter does with it. The event's
//! data is `{"envelope": {...}, "account": ...}` as signal-cli's JsonReceiveMessageHandler
//! writes it (signal-cli-jsonrpc(5), "Basic usage"); a user's message is the envelope's
//! `dataMessage` (or `editMessage.dataMessage`), an emoji reaction is
//! `dataMessage.reaction`. Receipts, typing, stories and sync copies are not messages.
//!
//! Chats are named as Hermes names them: a direct chat by the sender's number (or uuid when
//! the number is hidden), a group as `group:<base64 id>`. A message's id is
//! `<timestamp>:<author>`, because Signal identifies a message by both and a quote or a
//! reaction needs both.

use hermes_adapter::{ChatType, MessageEvent, MessageType, PendingMedia, SessionSource};
use serde_json::{Value, json};

use crate::settings::{MAX_ATTACHMENT_BYTES, Settings};

pub const PLATFORM: &str = "signal";
/// Where Signal puts a mention in the text (U+FFFC), replaced by the mentioned name.
const MENTION_PLACEHOLDER: char = '\u{FFFC}';

/// A reaction someone put on a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Reaction {
    pub emoji: String,
    /// The message reacted to: its author and timestamp.
    pub target_author: String,
    pub target_timestamp: i64,
    pub removed: bool,
    /// Who reacted, where; an event built from it answers here.
    pub source: SessionSource,
    pub event_id: String,
    pub timestamp: i64,
}

#[derive(Debug)]
pub enum Decoded {
    Message(Box<MessageEvent>),
    Reaction(Box<Reaction>),
    /// Nothing to hand over, and why (for the debug log).
    Skip(&'static str),
}

/// Decodes one `receive` event's data; `Err` is a payload that is not an envelope at all
/// (kept as a dead letter).
pub fn decode(data: &str, settings: &Settings) -> Result<Decoded, String> {
    let value: Value = serde_json::from_str(data).map_err(|e| format!("not JSON: {e}"))?;
    let envelope = value
        .get("envelope")
        .filter(|e| e.is_object())
        .ok_or("no envelope object")?;
    Ok(decode_envelope(envelope, settings))
}

fn text_of<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key)?.as_str().filter(|s| !s.is_empty())
}

fn decode_envelope(envelope: &Value, settings: &Settings) -> Decoded {
    let Some(sender) = text_of(envelope, "sourceNumber")
        .or_else(|| text_of(envelope, "sourceUuid"))
        .or_else(|| text_of(envelope, "source"))
    else {
        return Decoded::Skip("no sender");
    };
    let uuid = text_of(envelope, "sourceUuid");
    if sender == settings.account || uuid == Some(settings.account.as_str()) {
        return Decoded::Skip("our own message");
    }
    if envelope.get("storyMessage").is_some() && settings.ignore_stories {
        return Decoded::Skip("a story");
    }
    let data = envelope
        .get("dataMessage")
        .or_else(|| envelope.pointer("/editMessage/dataMessage"))
        .filter(|d| d.is_object());
    let Some(data) = data else {
        return Decoded::Skip("no data message (receipt, typing, sync)");
    };
    let timestamp = envelope
        .get("timestamp")
        .and_then(Value::as_i64)
        .or_else(|| data.get("timestamp").and_then(Value::as_i64))
        .unwrap_or(0);
    let group_id = data.pointer("/groupInfo/groupId").and_then(Value::as_str);
    if let Some(group) = group_id
        && !settings.groups.allows(group)
    {
        return Decoded::Skip("a group not in SIGNAL_GROUP_ALLOWED_USERS");
    }
    let source = SessionSource {
        platform: PLATFORM.to_owned(),
        chat_id: group_id.map_or_else(|| sender.to_owned(), |g| format!("group:{g}")),
        chat_name: match group_id {
            Some(_) => data
                .pointer("/groupInfo/groupName")
                .and_then(Value::as_str)
                .map(str::to_owned),
            None => text_of(envelope, "sourceName").map(str::to_owned),
        },
        chat_type: if group_id.is_some() {
            ChatType::Group
        } else {
            ChatType::Dm
        },
        user_id: Some(sender.to_owned()),
        user_name: Some(text_of(envelope, "sourceName").unwrap_or(sender).to_owned()),
        thread_id: None,
        chat_topic: None,
        user_id_alt: uuid.filter(|u| *u != sender).map(str::to_owned),
        user_id_alt_is_stable: true,
        is_bot: false,
        scope_id: None,
        role_authorized: false,
    };
    // Signal ids a message by its author's uuid (stable) and timestamp.
    let author_key = uuid.unwrap_or(sender);
    let event_id = format!("{author_key}:{timestamp}");
    if let Some(reaction) = data.get("reaction").filter(|r| r.is_object()) {
        let target_author = text_of(reaction, "targetAuthorNumber")
            .or_else(|| text_of(reaction, "targetAuthor"))
            .or_else(|| text_of(reaction, "targetAuthorUuid"))
            .unwrap_or("")
            .to_owned();
        return Decoded::Reaction(Box::new(Reaction {
            emoji: text_of(reaction, "emoji").unwrap_or("").to_owned(),
            target_author,
            target_timestamp: reaction
                .get("targetSentTimestamp")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            removed: reaction
                .get("isRemove")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            source,
            event_id: format!("{event_id}:reaction"),
            timestamp,
        }));
    }
    let (text, mentioned) = render_mentions(
        text_of(data, "message").unwrap_or(""),
        data.get("mentions"),
        &settings.account,
    );
    if group_id.is_some() && settings.require_mention && !mentioned {
        return Decoded::Skip("a group message that does not mention the bot");
    }
    let mut event = MessageEvent::text(&event_id, source, text.trim());
    event.message_id = Some(format!("{timestamp}:{sender}"));
    event.timestamp = timestamp as f64 / 1000.0;
    if let Some(quote) = data.get("quote").filter(|q| q.is_object()) {
        let author = text_of(quote, "authorNumber")
            .or_else(|| text_of(quote, "author"))
            .or_else(|| text_of(quote, "authorUuid"));
        if let (Some(id), Some(author)) = (quote.get("id").and_then(Value::as_i64), author) {
            event.reply_to_message_id = Some(format!("{id}:{author}"));
            event.reply_to_is_own_message = author == settings.account;
        }
        event.reply_to_text = text_of(quote, "text").map(str::to_owned);
    }
    let mut notes = Vec::new();
    for attachment in data
        .get("attachments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(id) = text_of(attachment, "id") else {
            continue;
        };
        let label = text_of(attachment, "filename").unwrap_or(id).to_owned();
        let size = attachment.get("size").and_then(Value::as_u64).unwrap_or(0);
        if size > MAX_ATTACHMENT_BYTES {
            notes.push(format!(
                "[attachment {label} is too large to fetch: {size} bytes]"
            ));
            continue;
        }
        let content_type = text_of(attachment, "contentType").unwrap_or("application/octet-stream");
        if event.pending_media.is_empty() {
            event.message_type = message_type(content_type);
        }
        let mut reference = json!({"id": id, "contentType": content_type});
        match group_id {
            Some(group) => reference["groupId"] = json!(group),
            None => reference["recipient"] = json!(sender),
        }
        event.pending_media.push(PendingMedia { reference, label });
    }
    for note in notes {
        event.text = if event.text.is_empty() {
            note
        } else {
            format!("{}\n{note}", event.text)
        };
    }
    if event.text.is_empty() && event.pending_media.is_empty() {
        return Decoded::Skip("no text and no attachment");
    }
    Decoded::Message(Box::new(event))
}

fn message_type(content_type: &str) -> MessageType {
    match content_type.split('/').next().unwrap_or("") {
        "image" => MessageType::Photo,
        "audio" => MessageType::Voice,
        "video" => MessageType::Video,
        _ => MessageType::Document,
    }
}

/// The text with each mention placeholder replaced by `@name` (the bot's own mention
/// dropped, so the model does not read it as someone to contact), and whether the bot was
/// mentioned. Mention positions are UTF-16 offsets (signal-cli(1), `send --mention`).
fn render_mentions(text: &str, mentions: Option<&Value>, account: &str) -> (String, bool) {
    let mut mentioned = false;
    let mut by_start: Vec<(usize, String)> = Vec::new();
    for mention in mentions.and_then(Value::as_array).into_iter().flatten() {
        let number = text_of(mention, "number");
        let uuid = text_of(mention, "uuid");
        let is_bot = number == Some(account) || uuid == Some(account);
        mentioned |= is_bot;
        let Some(start) = mention.get("start").and_then(Value::as_u64) else {
            continue;
        };
        let name = if is_bot {
            String::new()
        } else {
            let shown = text_of(mention, "name")
                .or(number)
                .or(uuid)
                .unwrap_or("someone");
            format!("@{shown}")
        };
        by_start.push((start as usize, name));
    }
    let mut out = String::with_capacity(text.len());
    let mut unit = 0usize;
    for c in text.chars() {
        let here = unit;
        unit += c.len_utf16();
        if c == MENTION_PLACEHOLDER
            && let Some((_, name)) = by_start.iter().find(|(start, _)| *start == here)
        {
            out.push_str(name);
            continue;
        }
        out.push(c);
    }
    // A removed self-mention leaves a doubled space behind.
    while out.contains("  ") {
        out = out.replace("  ", " ");
    }
    (out, mentioned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Groups;
    use std::collections::BTreeMap;

    const BOT: &str = "+15550000001";

    fn settings(groups: Groups, require_mention: bool) -> Settings {
        let env: BTreeMap<String, String> = [
            ("SIGNAL_HTTP_URL", "http://127.0.0.1:1"),
            ("SIGNAL_ACCOUNT", BOT),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let mut s = Settings::from_config(&Default::default(), &env).unwrap();
        s.groups = groups;
        s.require_mention = require_mention;
        s
    }

    fn receive(data_message: Value) -> String {
        json!({"envelope": {"source": "+15551234567", "sourceNumber": "+15551234567",
            "sourceUuid": "u-1", "sourceName": "Ann", "sourceDevice": 1,
            "timestamp": 1700000000123_i64, "dataMessage": data_message},
            "account": BOT})
        .to_string()
    }

    fn message(data: &str, s: &Settings) -> MessageEvent {
        match decode(data, s).unwrap() {
            Decoded::Message(event) => *event,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_direct_message_is_keyed_like_hermes() {
        let s = settings(Groups::Off, false);
        let event = message(
            &receive(json!({"timestamp": 1700000000123_i64, "message": "hi",
            "quote": {"id": 1699, "author": BOT, "authorNumber": BOT, "text": "earlier"}})),
            &s,
        );
        assert_eq!(event.event_id, "u-1:1700000000123");
        assert_eq!(event.source.chat_id, "+15551234567");
        assert_eq!(event.source.chat_type, ChatType::Dm);
        assert_eq!(event.source.user_id_alt.as_deref(), Some("u-1"));
        assert!(
            event.source.user_id_alt_is_stable,
            "the ACI uuid outlives the number"
        );
        assert_eq!(
            event.message_id.as_deref(),
            Some("1700000000123:+15551234567")
        );
        assert_eq!(
            event.reply_to_message_id.as_deref(),
            Some(&*format!("1699:{BOT}"))
        );
        assert!(event.reply_to_is_own_message);
        assert_eq!(event.reply_to_text.as_deref(), Some("earlier"));
    }

    #[test]
    fn groups_are_gated_by_the_allowlist_and_the_mention_rule() {
        let group = json!({"message": "\u{FFFC} hello \u{FFFC}", "groupInfo": {"groupId": "G1=="},
            "mentions": [{"start": 0, "length": 1, "number": BOT},
                         {"start": 8, "length": 1, "number": "+1999", "name": "Bob"}]});
        let unmentioned = json!({"message": "chatter", "groupInfo": {"groupId": "G1=="}});
        assert!(matches!(
            decode(&receive(group.clone()), &settings(Groups::Off, false)).unwrap(),
            Decoded::Skip(_)
        ));
        let s = settings(Groups::Only(vec!["G1==".into()]), true);
        let event = message(&receive(group), &s);
        assert_eq!(event.source.chat_id, "group:G1==");
        assert_eq!(event.source.chat_type, ChatType::Group);
        assert_eq!(event.text, "hello @Bob");
        assert!(matches!(
            decode(&receive(unmentioned), &s).unwrap(),
            Decoded::Skip(_)
        ));
    }

    #[test]
    fn attachments_wait_as_pending_media_and_reactions_are_told_apart() {
        let s = settings(Groups::Off, false);
        let event = message(
            &receive(json!({"attachments": [
            {"id": "att1", "contentType": "image/png", "filename": "a.png", "size": 10},
            {"id": "big", "contentType": "video/mp4", "size": 200_000_000_u64}]})),
            &s,
        );
        assert_eq!(event.message_type, MessageType::Photo);
        assert_eq!(event.pending_media.len(), 1);
        assert_eq!(
            event.pending_media[0].reference["recipient"],
            "+15551234567"
        );
        assert!(event.text.contains("too large"), "{}", event.text);
        let reaction = decode(
            &receive(json!({"reaction": {"emoji": "1️⃣",
            "targetAuthorNumber": BOT, "targetSentTimestamp": 42, "isRemove": false}})),
            &s,
        );
        match reaction.unwrap() {
            Decoded::Reaction(r) => {
                assert_eq!((r.target_author.as_str(), r.target_timestamp), (BOT, 42));
                assert_eq!(r.emoji, "1️⃣");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn receipts_our_own_echo_and_garbage_are_not_messages() {
        let s = settings(Groups::Off, false);
        let receipt = json!({"envelope": {"sourceNumber": "+1", "timestamp": 1,
            "receiptMessage": {"isRead": true}}})
        .to_string();
        assert!(matches!(decode(&receipt, &s).unwrap(), Decoded::Skip(_)));
        let own = json!({"envelope": {"sourceNumber": BOT, "timestamp": 1,
            "dataMessage": {"message": "x"}}})
        .to_string();
        assert!(matches!(decode(&own, &s).unwrap(), Decoded::Skip(_)));
        assert!(decode("{not json", &s).is_err());
        assert!(decode("{\"account\": \"x\"}", &s).is_err());
    }
}
