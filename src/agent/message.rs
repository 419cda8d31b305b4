//! The conversation's message format: OpenAI-style `role`/`content`/`tool_calls`, the shape
//! every API mode converts from and back to, and the role-alternation rules.

mod alternation;
mod image;

use serde::de::{self, Deserializer};
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use alternation::{
    HistoryError, INTERRUPTED_TURN, INVALID_TOOL_NAME, MISSING_TOOL_RESULT, OPENING_PLACEHOLDER,
    enforce_alternation,
};
pub use image::ImagePart;

/// Who wrote a message. `developer` (OpenAI's newer name for the system role) reads as
/// `System`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[serde(alias = "developer")]
    System,
    User,
    Assistant,
    Tool,
}

/// One function call the model asked for. `arguments` is the raw JSON text the model wrote:
/// it may be invalid, and deciding what to do about that is the tool runner's business.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One message of a conversation, in the OpenAI chat shape. `reasoning` holds the model's
/// thinking, kept for display and storage; it is never sent back to a provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    #[serde(default, deserialize_with = "content_text")]
    pub content: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "reasoning_content"
    )]
    pub reasoning: Option<String>,
    /// Images attached to a user message (photos from a chat). In memory only: never
    /// serialized or stored, and sent only to the model call of the turn they came with.
    #[serde(skip)]
    pub images: Vec<ImagePart>,
}

impl ChatMessage {
    fn new(role: Role, content: Option<String>) -> Self {
        Self {
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            reasoning: None,
            images: Vec::new(),
        }
    }

    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, Some(text.into()))
    }

    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, Some(text.into()))
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, Some(text.into()))
    }

    /// An assistant turn that asks for tools, with whatever text came with the calls.
    pub fn assistant_tool_calls(content: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls,
            ..Self::new(Role::Assistant, content)
        }
    }

    /// The answer to one tool call.
    pub fn tool_result(
        call_id: impl Into<String>,
        name: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            name: Some(name.into()),
            ..Self::new(Role::Tool, Some(text.into()))
        }
    }

    /// The text content, or `""` when there is none.
    pub fn text(&self) -> &str {
        self.content.as_deref().unwrap_or("")
    }
}

impl ToolCall {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            arguments: &'a str,
        }
        let mut call = serializer.serialize_struct("ToolCall", 3)?;
        call.serialize_field("id", &self.id)?;
        call.serialize_field("type", "function")?;
        call.serialize_field(
            "function",
            &Function {
                name: &self.name,
                arguments: &self.arguments,
            },
        )?;
        call.end()
    }
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default)]
            id: Option<String>,
            function: Function,
        }
        #[derive(Deserialize)]
        struct Function {
            #[serde(default)]
            name: Option<String>,
            #[serde(default)]
            arguments: Value,
        }
        let wire = Wire::deserialize(deserializer)?;
        Ok(ToolCall {
            id: wire.id.unwrap_or_default(),
            name: wire.function.name.unwrap_or_default(),
            arguments: arguments_text(wire.function.arguments),
        })
    }
}

/// Tool-call arguments as JSON text: some stores and providers hold them as an object.
pub(crate) fn arguments_text(arguments: Value) -> String {
    match arguments {
        Value::Null => "{}".to_owned(),
        Value::String(text) if text.trim().is_empty() => "{}".to_owned(),
        Value::String(text) => text,
        other => other.to_string(),
    }
}

/// The text of a content field: a string, `null`, or a list of content parts whose text parts
/// are joined (images and other parts have no text form here).
pub(crate) fn content_value_text(value: Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(text) => Some(text),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|part| match part {
                    Value::String(text) => Some(text.as_str()),
                    Value::Object(map) => map.get("text").and_then(Value::as_str),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(""),
        ),
        other => Some(other.to_string()),
    }
}

fn content_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(content_value_text(Value::deserialize(deserializer)?))
}

fn null_as_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<ToolCall>, D::Error> {
    match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(value) => serde_json::from_value(value).map_err(de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serializes_to_the_openai_shape() {
        let message = ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new("call_1", "terminal", r#"{"command":"ls"}"#)],
        );
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "terminal", "arguments": "{\"command\":\"ls\"}"}
                }]
            })
        );
        let result = ChatMessage::tool_result("call_1", "terminal", "a.txt");
        assert_eq!(
            serde_json::to_value(&result).unwrap(),
            json!({"role": "tool", "content": "a.txt", "tool_call_id": "call_1", "name": "terminal"})
        );
    }

    #[test]
    fn reads_real_world_variants() {
        let message: ChatMessage = serde_json::from_value(json!({
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}],
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}],
            "reasoning_content": "thought"
        }))
        .unwrap();
        assert_eq!(message.content.as_deref(), Some("ab"));
        assert_eq!(
            message.tool_calls,
            vec![ToolCall::new("c", "f", r#"{"x":1}"#)]
        );
        assert_eq!(message.reasoning.as_deref(), Some("thought"));

        let message: ChatMessage =
            serde_json::from_value(json!({"role": "developer", "tool_calls": null})).unwrap();
        assert_eq!(message.role, Role::System);
        assert_eq!(message.content, None);
        assert!(message.tool_calls.is_empty());
    }

    #[test]
    fn round_trips() {
        let mut message = ChatMessage::assistant("hi");
        message.reasoning = Some("because".into());
        let text = serde_json::to_string(&message).unwrap();
        assert_eq!(serde_json::from_str::<ChatMessage>(&text).unwrap(), message);
    }
}
