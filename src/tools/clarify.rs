//! The `clarify` tool (Python `tools/clarify_tool.py`): a multiple-choice or open-ended
//! question the loop forwards to the user through a [`ClarifyCallback`]. It is interactive,
//! so the loop runs it on its own, never alongside other tool calls.

use serde_json::{Value, json};

pub use super::clarify_request::{ClarifyCallback, ClarifyError, ClarifyRequest};
use super::context::ToolCtx;
use super::error::ToolError;
use super::registry::{ToolEntry, handler};
use super::tool_error;

/// Predefined answers offered at most; the UI always adds "Other (type your answer)".
pub const MAX_CHOICES: usize = 4;

/// One choice as display text: strings as they are; objects by `label`, `description`,
/// `text` or `title`; lists joined. Anything else unusable is dropped.
fn flatten_choice(choice: &Value) -> String {
    match choice {
        Value::Null => String::new(),
        Value::String(s) => s.trim().to_owned(),
        Value::Object(map) => ["label", "description", "text", "title"]
            .iter()
            .find_map(|key| {
                map.get(*key)
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
            })
            .unwrap_or_default()
            .to_owned(),
        Value::Array(items) => items
            .iter()
            .map(flatten_choice)
            .collect::<Vec<_>>()
            .join(" ")
            .trim()
            .to_owned(),
        other => other.to_string().trim().to_owned(),
    }
}

/// Arguments that do not make a question; the text is the error the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadQuestion {
    #[error("Question text is required.")]
    NoQuestion,
    #[error("choices must be a list of strings.")]
    ChoicesNotAList,
}

/// Validates the arguments into a request.
pub fn parse_request(session_id: &str, args: &Value) -> Result<ClarifyRequest, BadQuestion> {
    let question = args
        .get("question")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim();
    if question.is_empty() {
        return Err(BadQuestion::NoQuestion);
    }
    let choices = match args.get("choices") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let mut list: Vec<String> = items
                .iter()
                .map(flatten_choice)
                .filter(|c| !c.is_empty())
                .collect();
            list.truncate(MAX_CHOICES);
            (!list.is_empty()).then_some(list)
        }
        Some(_) => return Err(BadQuestion::ChoicesNotAList),
    };
    Ok(ClarifyRequest {
        session_id: session_id.to_owned(),
        question: question.to_owned(),
        choices,
    })
}

/// Runs the tool: asks through `callback` and reports the answer as Python does.
pub async fn clarify(callback: Option<&ClarifyCallback>, session_id: &str, args: &Value) -> String {
    let request = match parse_request(session_id, args) {
        Ok(request) => request,
        Err(error) => return tool_error(error.to_string()),
    };
    let Some(callback) = callback else {
        return tool_error("No user can be asked from here, so clarify is unavailable.");
    };
    let question = request.question.clone();
    let choices = request.choices.clone();
    match callback(request).await {
        Ok(answer) => json!({
            "question": question,
            "choices_offered": choices,
            "user_response": answer.trim(),
        })
        .to_string(),
        Err(e) => tool_error(format!("Failed to get user input: {e}")),
    }
}

pub fn schema() -> Value {
    json!({
        "name": "clarify",
        "description": "Puts a question to the user and waits for the answer: to settle an ambiguous task, choose between approaches with real trade-offs, or ask how something turned out. With choices (up to 4) the user picks one or writes their own answer under a fifth 'Other' row; without, they answer freely. Options go only in choices, never in the question text, where they cannot be picked: question='Which database?', choices=['SQLite', 'Postgres']. Not for approving dangerous commands (terminal asks for that itself), and not for small decisions you can make with a sensible default.",
        "parameters": {
            "type": "object",
            "properties": {
                "question": {
                    "type": "string",
                    "description": "Just the question, e.g. 'Which database?'; answer options belong in choices."
                },
                "choices": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": MAX_CHOICES,
                    "description": "The options, one per element (at most 4), shown as rows to pick from plus an 'Other' row for a written answer. Leave out only for an open question."
                }
            },
            "required": ["question"]
        }
    })
}

pub fn entry() -> ToolEntry {
    ToolEntry::new(
        "clarify",
        "clarify",
        schema(),
        handler(|ctx: ToolCtx, args: Value| async move {
            Ok::<_, ToolError>(clarify(ctx.clarify.as_ref(), &ctx.session_id, &args).await)
        }),
    )
    .with_emoji("❓")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_are_flattened_trimmed_and_capped() {
        let args = json!({"question": " Which? ", "choices": [
            " a ", {"description": "b"}, {"name": "dropped"}, ["c", "d"], 5, "e", "f"]});
        let request = parse_request("s", &args).unwrap();
        assert_eq!(request.question, "Which?");
        assert_eq!(request.choices.unwrap(), ["a", "b", "c d", "5"]);
        let open = parse_request("s", &json!({"question": "x", "choices": []})).unwrap();
        assert_eq!(open.choices, None);
        assert!(parse_request("s", &json!({"question": "  "})).is_err());
        assert!(parse_request("s", &json!({"question": "x", "choices": "a"})).is_err());
    }
}
