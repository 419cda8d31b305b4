//! The `memory` tool: schema and the dispatcher the agent loop calls with its
//! [`MemoryStore`] (Python `memory_tool`). The registry entry only holds the schema.

mod batch;
mod disk;
mod store;

use std::sync::Arc;

use serde_json::{Value, json};

pub use store::{
    DEFAULT_MEMORY_CHAR_LIMIT, DEFAULT_USER_CHAR_LIMIT, ENTRY_DELIMITER, MemoryStore, Target,
};

use super::tool_error;

/// Runs one memory call (single op or `operations` batch) against `store`.
pub fn memory_tool(store: Option<&MemoryStore>, args: &Value) -> String {
    let Some(store) = store else {
        return json!({"error": "Memory is not available. It may be disabled in config or this environment.", "success": false}).to_string();
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
            return json!({"error": "operations must be a list of {action, content?, old_text?} objects.", "success": false}).to_string();
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
        "description": "Save durable facts to persistent memory that survive across sessions. Memory is injected into every future turn, so keep entries compact and high-signal.\n\nHOW: make ALL your changes in ONE call via an 'operations' array (each item: {action, content?, old_text?}). The batch applies atomically and the char limit is checked only on the FINAL result — so a single call can remove/replace stale entries to free room AND add new ones, even when an add alone would overflow. The response reports current/limit chars and confirms completion; one batch call finishes the update, so don't repeat it. Use the bare action/content/old_text fields only for a single lone change.\n\nWHEN: save proactively when the user states a preference, correction, or personal detail, or you learn a stable fact about their environment, conventions, or workflow. Priority: user preferences & corrections > environment facts > procedures. The best memory stops the user repeating themselves.\n\nIF FULL: an add is rejected with the current entries shown. Reissue as ONE batch that removes or shortens enough stale entries and adds the new one together.\n\nTARGETS: 'user' = who the user is (name, role, preferences, style). 'memory' = your notes (environment, conventions, tool quirks, lessons).\n\nSKIP: trivial/obvious info, easily re-discovered facts, raw data dumps, task progress, completed-work logs, temporary TODO state (use session_search for those). Reusable procedures belong in a skill, not memory.",
        "parameters": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["add", "replace", "remove"], "description": "The action to perform (single-op shape). Omit when using 'operations'."},
                "target": {"type": "string", "enum": ["memory", "user"], "description": "Which memory store: 'memory' for personal notes, 'user' for user profile."},
                "content": {"type": "string", "description": "The entry content. Required for 'add' and 'replace' (single-op shape)."},
                "old_text": {"type": "string", "description": "REQUIRED for 'replace' and 'remove' (single-op shape): a short unique substring identifying the existing entry to modify. Omit only for 'add'."},
                "operations": {
                    "type": "array",
                    "description": "Batch shape: a list of operations applied atomically in one call against the final char budget. Preferred when making multiple changes or consolidating to make room. Each item is {action, content?, old_text?}.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "action": {"type": "string", "enum": ["add", "replace", "remove"]},
                            "content": {"type": "string", "description": "Entry content for add/replace."},
                            "old_text": {"type": "string", "description": "Substring identifying the entry for replace/remove."}
                        },
                        "required": ["action"]
                    }
                }
            },
            "required": ["target"]
        }
    })
}
