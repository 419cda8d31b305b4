//! Converting between the conversation format and state.db rows.

use serde_json::json;

use super::message::{ChatMessage, Role, ToolCall};
use super::provider::{FinishReason, ModelReply};
use crate::state::{Content, Message, NewMessage};

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// The row for `message`; `reply` adds the model's finish reason and token count.
pub fn to_stored(
    session_id: &str,
    message: &ChatMessage,
    reply: Option<&ModelReply>,
) -> NewMessage {
    let tool_calls = (!message.tool_calls.is_empty()).then(|| {
        json!(
            message
                .tool_calls
                .iter()
                .map(|c| json!({"id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments}}))
                .collect::<Vec<_>>()
        )
    });
    NewMessage {
        session_id: session_id.to_owned(),
        role: role_name(message.role).to_owned(),
        content: message.content.clone().map(Content::Text),
        tool_call_id: message.tool_call_id.clone(),
        tool_calls,
        tool_name: message.name.clone(),
        reasoning: message.reasoning.clone(),
        finish_reason: reply.map(|r| finish_reason_name(&r.finish_reason)),
        token_count: reply.map(|r| r.usage.output_tokens as i64),
        ..NewMessage::default()
    }
}

fn finish_reason_name(reason: &FinishReason) -> String {
    match reason {
        FinishReason::Stop => "stop".into(),
        FinishReason::ToolCalls => "tool_calls".into(),
        FinishReason::Length => "length".into(),
        FinishReason::ContentFilter => "content_filter".into(),
        FinishReason::Other(other) => other.clone(),
    }
}

/// Rebuilds the conversation from stored rows (rows of unknown roles are skipped).
pub fn from_stored(rows: &[Message]) -> Vec<ChatMessage> {
    rows.iter()
        .filter_map(|row| {
            let role = match row.role.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                "tool" => Role::Tool,
                _ => return None,
            };
            let content = match &row.content {
                None => None,
                Some(Content::Text(t)) => Some(t.clone()),
                Some(Content::Json(v)) => {
                    Some(crate::state::content_text(&Some(Content::Json(v.clone()))))
                }
            };
            let tool_calls = row
                .tool_calls
                .as_ref()
                .and_then(|v| v.as_array())
                .map(|calls| {
                    calls
                        .iter()
                        .map(|c| ToolCall {
                            id: c["id"].as_str().unwrap_or_default().to_owned(),
                            name: c["function"]["name"]
                                .as_str()
                                .unwrap_or_default()
                                .to_owned(),
                            arguments: c["function"]["arguments"]
                                .as_str()
                                .unwrap_or("{}")
                                .to_owned(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(ChatMessage {
                role,
                content,
                tool_calls,
                tool_call_id: row.tool_call_id.clone(),
                name: row.tool_name.clone(),
                reasoning: row.reasoning.clone(),
                images: Vec::new(),
            })
        })
        .collect()
}
