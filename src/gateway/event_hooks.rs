//! The contexts the gateway hands its event hooks (`crate::hooks::gateway_hooks`), with
//! the fields Hermes's `gateway/hooks.py` documents: who wrote where, the session, and the
//! message and reply cut to 500 characters.

use hermes_adapter::SessionSource;
use serde_json::{Value, json};

const TEXT_CHARS: usize = 500;

fn cut(text: &str) -> String {
    text.chars().take(TEXT_CHARS).collect()
}

/// `agent:start` (and the base of `agent:end`): the chat, the sender and the message.
pub fn agent_context(source: &SessionSource, session_id: &str, message: &str) -> Value {
    let mut context = source_fields(source);
    context["session_id"] = json!(session_id);
    context["message"] = json!(cut(message));
    context
}

/// `agent:end`: [`agent_context`] plus the reply.
pub fn agent_end_context(
    source: &SessionSource,
    session_id: &str,
    message: &str,
    response: &str,
) -> Value {
    let mut context = agent_context(source, session_id, message);
    context["response"] = Value::String(cut(response));
    context
}

/// `session:*` and `command:*`: the chat and the session key (plus what the caller adds).
pub fn chat_context(source: &SessionSource, session_key: &str) -> Value {
    let mut context = source_fields(source);
    context["session_key"] = json!(session_key);
    context
}

/// The chat and sender fields every gateway hook event carries.
fn source_fields(source: &SessionSource) -> Value {
    json!({
        "platform": source.platform,
        "user_id": source.user_id.clone().unwrap_or_default(),
        "chat_id": source.chat_id,
        "thread_id": source.thread_id.clone().unwrap_or_default(),
        "chat_type": source.chat_type.as_str(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_cut_to_five_hundred_characters() {
        let source = SessionSource::dm("telegram", "42", "7");
        let long = "é".repeat(600);
        let context = agent_end_context(&source, "s1", &long, &long);
        assert_eq!(context["message"].as_str().unwrap().chars().count(), 500);
        assert_eq!(context["response"].as_str().unwrap().chars().count(), 500);
        assert_eq!(context["chat_type"], "dm");
        assert_eq!(context["user_id"], "7");
    }
}
