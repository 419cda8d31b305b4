//! The core's outbound operations as Graph `messages` bodies
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-messages>): text with
//! an optional quote (`context.message_id`), reply buttons (at most 3, titles of at most 20
//! characters) or a list (at most 10 rows of 24) for prompts
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api/messages/interactive-reply-buttons-messages>),
//! a read receipt with the typing indicator for "typing"
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api/typing-indicators>), and media
//! uploaded first, then sent by id. WhatsApp cannot edit or delete a business message, so
//! those are refused, as the capabilities say.

use std::path::Path;

use hermes_adapter::{Button, SendErrorKind, SendResult};
use serde_json::{Value, json};

use crate::graph::Graph;

/// A text message's body limit.
pub const TEXT_LIMIT: usize = 4096;
/// An interactive message's body limit.
pub const INTERACTIVE_BODY_LIMIT: usize = 1024;
const BUTTON_TITLE_LIMIT: usize = 20;
const ROW_TITLE_LIMIT: usize = 24;
const ID_LIMIT: usize = 256;

fn envelope(to: &str, kind: &str, content: Value) -> Value {
    let mut body = json!({"messaging_product": "whatsapp", "recipient_type": "individual",
        "to": to, "type": kind});
    body[kind] = content;
    body
}

fn message_id(answer: &Value) -> Option<String> {
    answer
        .get("messages")?
        .get(0)?
        .get("id")?
        .as_str()
        .map(str::to_owned)
}

async fn post(graph: &Graph, to: &str, body: Value) -> SendResult {
    match graph.post_message(&body).await {
        Ok(answer) => SendResult::sent(message_id(&answer)),
        Err(failure) => {
            let result = failure.into_result(to);
            if result.kind() == Some(SendErrorKind::Forbidden) {
                // The operator must see this; the core records it with the delivery too.
                if let Some((_, text)) = &result.error {
                    tracing::warn!(platform = "whatsapp_cloud", error = %text, "answer not delivered");
                }
            }
            result
        }
    }
}

pub async fn text(
    graph: &Graph,
    to: &str,
    text: &str,
    reply_to: Option<&str>,
    plain: bool,
) -> SendResult {
    let shown = if plain {
        text.to_owned()
    } else {
        crate::format::to_whatsapp(text)
    };
    let mut body = envelope(to, "text", json!({"body": shown, "preview_url": false}));
    if let Some(quoted) = reply_to {
        body["context"] = json!({"message_id": quoted});
    }
    post(graph, to, body).await
}

fn clip(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let mut clipped: String = text.chars().take(limit - 1).collect();
    clipped.push('…');
    clipped
}

/// The interactive part of a prompt: reply buttons when they fit, a list otherwise.
pub fn interactive(body: &str, buttons: &[Button]) -> Result<Value, String> {
    if buttons.len() > 10 {
        return Err(format!(
            "{} choices; WhatsApp shows at most 10",
            buttons.len()
        ));
    }
    if let Some(long) = buttons.iter().find(|b| b.data.len() > ID_LIMIT) {
        return Err(format!(
            "button data of {} bytes; WhatsApp keeps at most 256",
            long.data.len()
        ));
    }
    if buttons.len() <= 3 {
        let replies: Vec<Value> = buttons
            .iter()
            .map(|b| json!({"type": "reply", "reply": {"id": b.data, "title": clip(&b.label, BUTTON_TITLE_LIMIT)}}))
            .collect();
        return Ok(
            json!({"type": "button", "body": {"text": body}, "action": {"buttons": replies}}),
        );
    }
    let rows: Vec<Value> = buttons
        .iter()
        .map(|b| json!({"id": b.data, "title": clip(&b.label, ROW_TITLE_LIMIT)}))
        .collect();
    Ok(json!({"type": "list", "body": {"text": body},
        "action": {"button": "Choose", "sections": [{"title": "Choices", "rows": rows}]}}))
}

/// A prompt as one interactive message (one Graph call, so a retry can never send half of it
/// twice); a text longer than an interactive body is clipped there, as the reference does.
pub async fn prompt(graph: &Graph, to: &str, prompt: &str, buttons: &[Button]) -> SendResult {
    if buttons.is_empty() {
        return text(graph, to, prompt, None, false).await;
    }
    let body = clip(&crate::format::to_whatsapp(prompt), INTERACTIVE_BODY_LIMIT);
    match interactive(&body, buttons) {
        Ok(content) => post(graph, to, envelope(to, "interactive", content)).await,
        Err(why) => SendResult::failed(SendErrorKind::BadFormat, why),
    }
}

/// Marks `wamid` read and shows "typing…" until the answer (or 25 s).
pub async fn typing(graph: &Graph, to: &str, wamid: &str) -> SendResult {
    let body = json!({"messaging_product": "whatsapp", "status": "read", "message_id": wamid,
        "typing_indicator": {"type": "text"}});
    match graph.post_message(&body).await {
        Ok(_) => SendResult::sent(None),
        Err(failure) => failure.into_result(to),
    }
}

/// The WhatsApp media kind, MIME type and size limit for a file name
/// (<https://developers.facebook.com/docs/whatsapp/cloud-api/reference/media#supported-media-types>).
pub fn media_kind(path: &Path) -> (&'static str, &'static str, u64) {
    const MB: u64 = 1024 * 1024;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_lowercase)
        .unwrap_or_default();
    match ext.as_str() {
        "jpg" | "jpeg" => ("image", "image/jpeg", 5 * MB),
        "png" => ("image", "image/png", 5 * MB),
        "webp" => ("sticker", "image/webp", 500 * 1024),
        "mp4" => ("video", "video/mp4", 16 * MB),
        "3gp" => ("video", "video/3gpp", 16 * MB),
        "mp3" => ("audio", "audio/mpeg", 16 * MB),
        "ogg" | "opus" => ("audio", "audio/ogg", 16 * MB),
        "m4a" => ("audio", "audio/mp4", 16 * MB),
        "aac" => ("audio", "audio/aac", 16 * MB),
        "pdf" => ("document", "application/pdf", 100 * MB),
        "txt" | "md" | "log" => ("document", "text/plain", 100 * MB),
        "csv" => ("document", "text/csv", 100 * MB),
        _ => ("document", "application/octet-stream", 100 * MB),
    }
}

pub async fn media(graph: &Graph, to: &str, path: &str, caption: Option<&str>) -> SendResult {
    let file = Path::new(path);
    let (kind, mime, limit) = media_kind(file);
    let bytes = match tokio::fs::read(file).await {
        Ok(bytes) => bytes,
        Err(e) => {
            return SendResult::failed(SendErrorKind::NotFound, format!("cannot read {path}: {e}"));
        }
    };
    if bytes.len() as u64 > limit {
        return SendResult::failed(
            SendErrorKind::TooLong,
            format!(
                "{path} is {} bytes; WhatsApp takes a {kind} of at most {limit}",
                bytes.len()
            ),
        );
    }
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("file")
        .to_owned();
    let id = match graph.upload(&name, mime, bytes).await {
        Ok(id) => id,
        Err(failure) => return failure.into_result(to),
    };
    let mut content = json!({"id": id});
    if let Some(caption) = caption.filter(|c| !c.is_empty())
        && matches!(kind, "image" | "video" | "document")
    {
        content["caption"] = json!(crate::format::to_whatsapp(caption));
    }
    if kind == "document" {
        content["filename"] = json!(name);
    }
    post(graph, to, envelope(to, kind, content)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn button(label: &str, data: &str) -> Button {
        Button {
            label: label.into(),
            data: data.into(),
        }
    }

    #[test]
    fn three_buttons_are_replies_and_more_a_list() {
        let two = interactive(
            "go?",
            &[
                button("Approve this one please", "/approve"),
                button("No", "/deny"),
            ],
        )
        .unwrap();
        assert_eq!(two["type"], "button");
        assert_eq!(two["action"]["buttons"][0]["reply"]["id"], "/approve");
        assert_eq!(
            two["action"]["buttons"][0]["reply"]["title"]
                .as_str()
                .unwrap()
                .chars()
                .count(),
            20
        );
        let four: Vec<Button> = (0..4)
            .map(|i| button(&format!("c{i}"), &format!("/pick {i}")))
            .collect();
        let list = interactive("pick", &four).unwrap();
        assert_eq!(list["type"], "list");
        assert_eq!(list["action"]["sections"][0]["rows"][3]["id"], "/pick 3");
        let long = clip(&"x".repeat(3000), INTERACTIVE_BODY_LIMIT);
        assert_eq!(long.chars().count(), INTERACTIVE_BODY_LIMIT);
        assert!(long.ends_with('…'));
        let eleven: Vec<Button> = (0..11).map(|i| button("x", &i.to_string())).collect();
        assert!(interactive("too many", &eleven).is_err());
    }

    #[test]
    fn media_kinds_follow_the_extension() {
        assert_eq!(media_kind(Path::new("a.PNG")).0, "image");
        assert_eq!(media_kind(Path::new("a.ogg")).1, "audio/ogg");
        assert_eq!(media_kind(Path::new("report")).0, "document");
    }
}
