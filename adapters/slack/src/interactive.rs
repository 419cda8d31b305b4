//! Block Kit prompts: the buttons we post (`action_id`/`value` = the core's button data)
//! and the `block_actions` click that comes back as a command event. Once the core has
//! recorded the click, the prompt is rewritten without its buttons so nobody clicks twice
//! (reference `_handle_approval_action`).

use hermes_adapter::{Button, ChatType, MessageEvent, MessageType, SessionSource};
use serde_json::{Value, json};

use crate::inbound::{AfterRecord, Delivery, Handling};
use crate::memory::{SharedMemory, key};

/// Longest text Slack accepts in a section block: 3000 characters.
pub const SECTION_TEXT_LIMIT: usize = 3000;
/// Slack caps a button label at 75 characters and an actions block at 25 elements.
const BUTTON_LABEL_LIMIT: usize = 75;
const ACTIONS_PER_BLOCK: usize = 25;

fn truncate_chars(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(limit.saturating_sub(3)).collect();
    cut.push_str("...");
    cut
}

/// The blocks of a prompt: its (mrkdwn) text, then the buttons.
pub fn prompt_blocks(text: &str, buttons: &[Button]) -> Value {
    let mut blocks = vec![json!({
        "type": "section",
        "text": {"type": "mrkdwn", "text": truncate_chars(text, SECTION_TEXT_LIMIT)},
    })];
    let mut seen = std::collections::HashSet::new();
    let elements: Vec<Value> = buttons
        .iter()
        .enumerate()
        .map(|(i, button)| {
            // action_id must be unique within the message.
            let action_id = if seen.insert(button.data.clone()) {
                button.data.clone()
            } else {
                format!("{}#{i}", button.data)
            };
            json!({
                "type": "button",
                "text": {"type": "plain_text", "text": truncate_chars(&button.label, BUTTON_LABEL_LIMIT)},
                "action_id": action_id,
                "value": button.data,
            })
        })
        .collect();
    for chunk in elements.chunks(ACTIONS_PER_BLOCK) {
        blocks.push(json!({"type": "actions", "elements": chunk}));
    }
    Value::Array(blocks)
}

/// A prompt to rewrite without buttons once its click is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnsweredPrompt {
    pub channel: String,
    pub ts: String,
    pub prompt_text: String,
    pub decision: String,
}

impl AnsweredPrompt {
    /// The `chat.update` body: the original text plus who chose what, no buttons.
    pub fn update_body(&self) -> Value {
        json!({
            "channel": self.channel,
            "ts": self.ts,
            "text": self.decision,
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn", "text": self.prompt_text}},
                {"type": "context", "elements": [{"type": "mrkdwn", "text": self.decision}]},
            ],
        })
    }

    pub fn memory_key(&self) -> String {
        key(&self.channel, &self.ts)
    }
}

fn str_at<'v>(value: &'v Value, pointer: &str) -> Option<&'v str> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The prompt's own text, from its first section block.
fn prompt_text(message: &Value) -> String {
    message
        .get("blocks")
        .and_then(Value::as_array)
        .and_then(|blocks| {
            blocks
                .iter()
                .find(|b| b.get("type").and_then(Value::as_str) == Some("section"))
        })
        .and_then(|b| str_at(b, "/text/text"))
        .or_else(|| str_at(message, "/text"))
        .unwrap_or("")
        .to_owned()
}

/// An `interactive` envelope → a command event carrying the clicked button's data.
pub fn click(payload: &Value, memory: &SharedMemory) -> Handling {
    if str_at(payload, "/type") != Some("block_actions") {
        return Handling::Ack("interaction type not handled");
    }
    let Some(action) = payload.pointer("/actions/0") else {
        return Handling::Ack("click without action");
    };
    let (Some(data), Some(user), Some(channel), Some(message_ts)) = (
        str_at(action, "/value"),
        str_at(payload, "/user/id"),
        str_at(payload, "/channel/id").or_else(|| str_at(payload, "/container/channel_id")),
        str_at(payload, "/container/message_ts").or_else(|| str_at(payload, "/message/ts")),
    ) else {
        return Handling::Ack("click without value, user, channel or message");
    };
    let prompt_key = key(channel, message_ts);
    if memory
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .answered_prompts
        .contains(&prompt_key)
    {
        return Handling::Ack("prompt already answered");
    }
    let message = payload.get("message").cloned().unwrap_or(Value::Null);
    let thread = str_at(&message, "/thread_ts").or_else(|| str_at(payload, "/container/thread_ts"));
    let trigger = str_at(payload, "/trigger_id").unwrap_or(message_ts);
    let label = str_at(action, "/text/text").unwrap_or(data);
    let mut source = SessionSource::dm("slack", channel, user);
    if !channel.starts_with('D') {
        source.chat_type = ChatType::Group;
    }
    source.user_name = str_at(payload, "/user/username")
        .or_else(|| str_at(payload, "/user/name"))
        .map(str::to_owned);
    source.thread_id = thread.map(str::to_owned);
    source.scope_id = str_at(payload, "/team/id").map(str::to_owned);
    let mut event = MessageEvent::text(&format!("cb:{trigger}"), source, data);
    event.message_type = MessageType::Command;
    event.message_id = Some(message_ts.to_owned());
    let answered = AnsweredPrompt {
        channel: channel.to_owned(),
        ts: message_ts.to_owned(),
        prompt_text: prompt_text(&message),
        decision: format!("*{label}* — chosen by <@{user}>"),
    };
    Handling::Deliver(Box::new(Delivery {
        event,
        after: AfterRecord {
            answered_prompt: Some(answered),
            ..AfterRecord::default()
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_blocks_carry_button_data_and_respect_limits() {
        let buttons: Vec<Button> = (0..30)
            .map(|i| Button {
                label: "x".repeat(100),
                data: if i == 1 {
                    "/deny".into()
                } else {
                    format!("/approve {i}")
                },
            })
            .chain([Button {
                label: "again".into(),
                data: "/deny".into(),
            }])
            .collect();
        let blocks = prompt_blocks(&"t".repeat(4000), &buttons);
        let blocks = blocks.as_array().unwrap();
        assert_eq!(blocks.len(), 3, "section + two actions blocks");
        let text = blocks[0]["text"]["text"].as_str().unwrap();
        assert_eq!(text.chars().count(), SECTION_TEXT_LIMIT);
        let first = &blocks[1]["elements"][1];
        assert_eq!(first["value"], "/deny");
        assert_eq!(first["action_id"], "/deny");
        assert_eq!(first["text"]["text"].as_str().unwrap().chars().count(), 75);
        let last = &blocks[2]["elements"][5];
        assert_eq!(last["value"], "/deny");
        assert_eq!(last["action_id"], "/deny#30");
    }
}
