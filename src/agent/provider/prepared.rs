//! A request made ready for the wire: the history checked against the alternation rules and
//! the system prompt gathered in one place.

use serde_json::Value;

use super::types::ModelRequest;
use crate::agent::message::{ChatMessage, HistoryError, Role, enforce_alternation};

/// What every wire format is built from. `messages` holds no system message.
#[derive(Debug)]
pub(crate) struct Prepared<'a> {
    pub system: Option<String>,
    pub messages: Vec<ChatMessage>,
    pub tools: &'a [Value],
    pub max_tokens: Option<u32>,
    pub stream: bool,
}

impl<'a> Prepared<'a> {
    pub fn new(request: &'a ModelRequest) -> Result<Self, HistoryError> {
        let mut messages = enforce_alternation(request.messages.clone())?;
        let leading_system = match messages.first() {
            Some(first) if first.role == Role::System => messages.remove(0).content,
            _ => None,
        };
        let system = [request.system.clone(), leading_system]
            .into_iter()
            .flatten()
            .filter(|text| !text.trim().is_empty())
            .collect::<Vec<_>>();
        Ok(Self {
            system: (!system.is_empty()).then(|| system.join("\n\n")),
            messages,
            tools: &request.tools,
            max_tokens: request.max_tokens,
            stream: request.stream,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_prompt_and_leading_system_message_combine() {
        let request = ModelRequest {
            system: Some("prompt".into()),
            messages: vec![ChatMessage::system("extra"), ChatMessage::user("hi")],
            ..ModelRequest::default()
        };
        let prepared = Prepared::new(&request).unwrap();
        assert_eq!(prepared.system.as_deref(), Some("prompt\n\nextra"));
        assert_eq!(prepared.messages, vec![ChatMessage::user("hi")]);
    }
}
