//! The `todo` tool (Python `tools/todo_tool.py`): an in-memory, per-session task list the
//! agent loop owns. Writing replaces the list (or merges by id); every call returns the whole
//! list and a summary. Items are capped at 256, content at 4,000 characters.

use std::sync::{Mutex, MutexGuard};

use serde::Serialize;
use serde_json::{Value, json};

use super::tool_error;

pub const VALID_STATUSES: [&str; 4] = ["pending", "in_progress", "completed", "cancelled"];
pub const MAX_TODO_CONTENT_CHARS: usize = 4000;
pub const MAX_TODO_ITEMS: usize = 256;
const TRUNCATION_MARKER: &str = "… [truncated]";

/// One task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TodoItem {
    pub id: String,
    pub content: String,
    pub status: String,
}

/// The task list of one session; list order is priority.
#[derive(Debug, Default)]
pub struct TodoStore {
    items: Mutex<Vec<TodoItem>>,
}

fn text_of(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(other) => other.to_string().trim().to_owned(),
    }
}

fn cap_content(content: &str) -> String {
    if content.chars().count() > MAX_TODO_CONTENT_CHARS {
        let keep = MAX_TODO_CONTENT_CHARS - TRUNCATION_MARKER.chars().count();
        let head: String = content.chars().take(keep).collect();
        format!("{head}{TRUNCATION_MARKER}")
    } else {
        content.to_owned()
    }
}

fn validate(item: &Value) -> TodoItem {
    if !item.is_object() {
        return TodoItem {
            id: "?".into(),
            content: "(invalid item)".into(),
            status: "pending".into(),
        };
    }
    let id = text_of(item.get("id"));
    let content = text_of(item.get("content"));
    let status = match item.get("status") {
        None => "pending".to_owned(),
        other => text_of(other).to_lowercase(),
    };
    TodoItem {
        id: if id.is_empty() { "?".into() } else { id },
        content: if content.is_empty() {
            "(no description)".into()
        } else {
            cap_content(&content)
        },
        status: if VALID_STATUSES.contains(&status.as_str()) {
            status
        } else {
            "pending".into()
        },
    }
}

/// One item per id: a repeated id keeps the place of its last copy.
fn dedupe_by_id(todos: &[Value]) -> Vec<&Value> {
    let key = |i: usize, item: &Value| -> String {
        if item.is_object() {
            let id = text_of(item.get("id"));
            if id.is_empty() { "?".into() } else { id }
        } else {
            format!("__invalid_{i}")
        }
    };
    let keys: Vec<String> = todos.iter().enumerate().map(|(i, t)| key(i, t)).collect();
    (0..todos.len())
        .filter(|&i| !keys[i + 1..].contains(&keys[i]))
        .map(|i| &todos[i])
        .collect()
}

impl TodoStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn items(&self) -> MutexGuard<'_, Vec<TodoItem>> {
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn read(&self) -> Vec<TodoItem> {
        self.items().clone()
    }

    pub fn has_items(&self) -> bool {
        !self.items().is_empty()
    }

    /// Replaces the list, or with `merge` updates items by id and appends new ones.
    pub fn write(&self, todos: &[Value], merge: bool) -> Vec<TodoItem> {
        let mut items = self.items();
        let unique = dedupe_by_id(todos);
        if !merge {
            *items = unique.into_iter().map(validate).collect();
        } else {
            for todo in unique {
                let id = text_of(todo.get("id"));
                if id.is_empty() {
                    continue;
                }
                match items.iter_mut().find(|item| item.id == id) {
                    Some(existing) => {
                        let content = text_of(todo.get("content"));
                        if !content.is_empty() {
                            existing.content = cap_content(&content);
                        }
                        let status = text_of(todo.get("status")).to_lowercase();
                        if VALID_STATUSES.contains(&status.as_str()) {
                            existing.status = status;
                        }
                    }
                    None => items.push(validate(todo)),
                }
            }
        }
        items.truncate(MAX_TODO_ITEMS);
        items.clone()
    }

    /// The active items for re-injection after context compression, if any.
    pub fn format_for_injection(&self) -> Option<String> {
        let items = self.items();
        let active: Vec<&TodoItem> = items
            .iter()
            .filter(|i| i.status == "pending" || i.status == "in_progress")
            .collect();
        if active.is_empty() {
            return None;
        }
        // Byte-identical: Python's agent/conversation_compression.py matches this prefix to
        // tell a resumed session's synthetic messages from the user's.
        let mut lines =
            vec!["[Your active task list was preserved across context compression]".to_owned()];
        for item in active {
            let marker = if item.status == "in_progress" {
                "[>]"
            } else {
                "[ ]"
            };
            lines.push(format!(
                "- {marker} {}. {} ({})",
                item.id, item.content, item.status
            ));
        }
        Some(lines.join("\n"))
    }
}

/// Runs one todo call: writes when `todos` is given, then returns the list and summary.
pub fn todo_tool(store: Option<&TodoStore>, args: &Value) -> String {
    let Some(store) = store else {
        return tool_error("TodoStore not initialized");
    };
    let merge = args.get("merge").and_then(Value::as_bool).unwrap_or(false);
    let items = match args.get("todos") {
        None | Some(Value::Null) => store.read(),
        Some(Value::Array(todos)) => store.write(todos, merge),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Array(todos)) => store.write(&todos, merge),
            Ok(other) => {
                return tool_error(format!("todos must be a list, got {}", type_name(&other)));
            }
            Err(_) => return tool_error("todos is a string that does not parse as a JSON array"),
        },
        Some(other) => {
            return tool_error(format!("todos must be a list, got {}", type_name(other)));
        }
    };
    let count = |status: &str| items.iter().filter(|i| i.status == status).count();
    json!({
        "todos": items,
        "summary": {
            "total": items.len(),
            "pending": count("pending"),
            "in_progress": count("in_progress"),
            "completed": count("completed"),
            "cancelled": count("cancelled"),
        },
    })
    .to_string()
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

pub fn schema() -> Value {
    json!({
        "name": "todo",
        "description": "This session's task list, for work of three or more steps or several requests at once. Without arguments it returns the list; with todos it replaces the list (merge=false, default) or updates items by id and appends new ones (merge=true). Items are {id, content, status: pending|in_progress|completed|cancelled}, most important first, at most one in_progress. Mark an item completed as soon as it is; cancel a failed one and add its replacement. Every call returns the whole list.",
        "parameters": {
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "Items to write; leave out to just read the list.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "description": "Item id, unique in the list"},
                            "content": {"type": "string", "description": "What the step is"},
                            "status": {"type": "string", "enum": VALID_STATUSES, "description": "Current status"}
                        },
                        "required": ["id", "content", "status"]
                    }
                },
                "merge": {
                    "type": "boolean",
                    "description": "true: update items with matching ids and append the rest; false (default): replace the list.",
                    "default": false
                }
            },
            "required": []
        }
    })
}
