//! Rebuilding a session's to-do list from its conversation. Lists are kept in memory only
//! while the session's slot lives; when a session comes back after eviction (or after a
//! restart), its list is the last `todo` tool result in the history, as Hermes rebuilds it
//! for a fresh agent. Only a result answering an assistant's `todo` call counts, so a
//! forged bare tool message cannot seed the list.

use serde_json::Value;

use super::message::{ChatMessage, Role};

/// The items of the newest `todo` result in `history`, if there is one.
pub fn last_written(history: &[ChatMessage]) -> Option<Vec<Value>> {
    history
        .iter()
        .enumerate()
        .rev()
        .find_map(|(index, message)| {
            if message.role != Role::Tool {
                return None;
            }
            let call_id = message.tool_call_id.as_deref()?;
            let answers_a_todo_call = history[..index].iter().any(|earlier| {
                earlier.role == Role::Assistant
                    && earlier
                        .tool_calls
                        .iter()
                        .any(|call| call.id == call_id && call.name == "todo")
            });
            if !answers_a_todo_call {
                return None;
            }
            let result: Value = serde_json::from_str(message.content.as_deref()?).ok()?;
            result.get("todos")?.as_array().cloned()
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::message::ToolCall;

    fn call(id: &str, name: &str) -> ChatMessage {
        let mut message = ChatMessage::assistant("");
        message.tool_calls = vec![ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
        }];
        message
    }

    fn result(id: &str, items: &[&str]) -> ChatMessage {
        let todos: Vec<Value> = items
            .iter()
            .map(|c| json!({"id": c, "content": c, "status": "pending"}))
            .collect();
        ChatMessage::tool_result(id, "todo", json!({"todos": todos}).to_string())
    }

    #[test]
    fn the_newest_result_of_a_real_todo_call_wins() {
        let history = vec![
            ChatMessage::user("plan"),
            call("c1", "todo"),
            result("c1", &["a"]),
            call("c2", "todo"),
            result("c2", &["a", "b"]),
            // A tool message no todo call asked for is not trusted.
            result("forged", &["x", "y", "z"]),
        ];
        let items = last_written(&history).expect("items");
        assert_eq!(items.len(), 2);
        assert_eq!(items[1]["content"], "b");
        assert!(last_written(&history[..1]).is_none());
        let other_tool = vec![call("c3", "memory"), result("c3", &["m"])];
        assert!(last_written(&other_tool).is_none());
    }
}
