//! The `memory` tool: schema and the dispatcher the agent loop calls with its
//! [`MemoryStore`] (Python `memory_tool`). The registry entry only holds the schema.

mod batch;
mod disk;
mod store;

use std::sync::Arc;

use serde_json::{Value, json};

pub use disk::ENTRY_DELIMITER;
pub use store::{DEFAULT_MEMORY_CHAR_LIMIT, DEFAULT_USER_CHAR_LIMIT, MemoryStore, Target};

use super::tool_error;

/// Runs one memory call (single op or `operations` batch) against `store`.
pub fn memory_tool(store: Option<&MemoryStore>, args: &Value) -> String {
    let Some(store) = store else {
        return json!({"error": "Memory is switched off (config) or unavailable here.", "success": false}).to_string();
    };
    let target_name = match args.get("target") {
        None | Some(Value::Null) => "memory",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => "",
    };
    let Some(target) = Target::parse(target_name) else {
        return json!({"error": format!("Invalid target '{target_name}'. Use 'memory' or 'user'."), "success": false}).to_string();
    };
    match args.get("operations") {
        Some(Value::Array(ops)) if !ops.is_empty() => {
            return store.apply_batch(target, ops).to_string();
        }
        Some(Value::Null | Value::Array(_)) | None => {}
        Some(_) => {
            return json!({"error": "operations has to be an array of {action, content?, old_text?} objects.", "success": false}).to_string();
        }
    }
    let action = args
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let content = args
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let old_text = args
        .get("old_text")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let result = match action {
        "add" if content.is_empty() => {
            return json!({"error": "Content is required for 'add' action.", "success": false})
                .to_string();
        }
        "add" => store.add(target, content),
        "replace" | "remove" if old_text.is_empty() => store.missing_old_text(target, action),
        "replace" if content.is_empty() => {
            return json!({"error": "content is required for 'replace' action.", "success": false})
                .to_string();
        }
        "replace" => store.replace(target, old_text, content),
        "remove" => store.remove(target, old_text),
        other => {
            return json!({"error": format!("Unknown action '{other}'. Use: add, replace, remove"), "success": false}).to_string();
        }
    };
    result.to_string()
}

/// [`memory_tool`] on the blocking pool (it reads and writes files under a lock).
pub async fn memory_tool_async(store: Arc<MemoryStore>, args: Value) -> String {
    tokio::task::spawn_blocking(move || memory_tool(Some(&store), &args))
        .await
        .unwrap_or_else(|e| tool_error(format!("memory task failed: {e}")))
}

pub fn schema() -> Value {
    json!({
        "name": "memory",
        "description": "Keeps facts across sessions. Both stores are put into every future turn's prompt, so keep entries short and worth their space.\n\nMake all changes in one call with 'operations' (items {action, content?, old_text?}): the batch is all-or-nothing and the size limit is checked on its end state, so removing or shortening old entries makes room for new ones in the same call. The reply gives the chars used and the limit; a successful call is final, do not repeat it. The top-level action/content/old_text are for a single change.\n\nSave without being asked when the user states a preference, corrects you or tells you about themselves, or when you learn a lasting fact about their setup or habits; in that order of priority. A full store rejects an add and shows its entries: retry with one batch that frees space and adds.\n\ntarget 'user' describes the person (name, job, tastes, how they like answers); 'memory' holds your working notes (their setup, conventions, tool quirks, lessons learnt).\n\nDo not store what is obvious or easy to find again, raw data, task progress, logs of finished work or temporary to-dos; past conversations are reachable with session_search.",
        "parameters": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["add", "replace", "remove"], "description": "One change: add, replace or remove. Leave out when sending operations."},
                "target": {"type": "string", "enum": ["memory", "user"], "description": "'memory' (your notes) or 'user' (the user's profile)."},
                "content": {"type": "string", "description": "Text of the entry; needed by add and replace."},
                "old_text": {"type": "string", "description": "replace and remove: a short piece of text found in exactly one existing entry, naming the entry to change."},
                "operations": {
                    "type": "array",
                    "description": "Several changes applied together, all or none, with the size limit checked after the last. The way to make room and add at once.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "action": {"type": "string", "enum": ["add", "replace", "remove"]},
                            "content": {"type": "string", "description": "Text of the entry (add, replace)."},
                            "old_text": {"type": "string", "description": "Text found in the entry to change (replace, remove)."}
                        },
                        "required": ["action"]
                    }
                }
            },
            "required": ["target"]
        }
    })
}
