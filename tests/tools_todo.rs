//! The todo tool: replace and merge writes, the summary, validation and the caps, and the
//! re-injection text after context compression.

use hermesd::tools::todo::{MAX_TODO_CONTENT_CHARS, MAX_TODO_ITEMS, TodoStore, todo_tool};
use serde_json::{Value, json};

fn call(store: &TodoStore, args: Value) -> Value {
    serde_json::from_str(&todo_tool(Some(store), &args)).unwrap()
}

#[test]
fn writes_replace_or_merge_and_report_a_summary() {
    let store = TodoStore::new();
    let empty = call(&store, json!({}));
    assert_eq!(
        empty,
        json!({"todos": [], "summary": {"total": 0, "pending": 0, "in_progress": 0, "completed": 0, "cancelled": 0}})
    );
    let written = call(
        &store,
        json!({"todos": [
            {"id": "1", "content": "Read the code", "status": "in_progress"},
            {"id": "2", "content": "Write tests", "status": "pending"},
            {"id": "3", "content": "", "status": "weird"},
        ]}),
    );
    assert_eq!(
        written["todos"][2],
        json!({"id": "3", "content": "(no description)", "status": "pending"})
    );
    assert_eq!(written["summary"]["pending"], 2);
    let merged = call(
        &store,
        json!({"merge": true, "todos": [
            {"id": "1", "status": "completed"},
            {"id": "4", "content": "Ship", "status": "pending"},
        ]}),
    );
    assert_eq!(
        merged["todos"][0],
        json!({"id": "1", "content": "Read the code", "status": "completed"})
    );
    assert_eq!(merged["todos"][3]["id"], "4");
    assert_eq!(
        merged["summary"],
        json!({"total": 4, "pending": 3, "in_progress": 0, "completed": 1, "cancelled": 0})
    );
    let replaced = call(
        &store,
        json!({"todos": "[{\"id\": \"a\", \"content\": \"x\", \"status\": \"pending\"}, {\"id\": \"a\", \"content\": \"y\", \"status\": \"pending\"}]"}),
    );
    assert_eq!(
        replaced["todos"],
        json!([{"id": "a", "content": "y", "status": "pending"}])
    );
    assert_eq!(
        call(&store, json!({"todos": 5}))["error"],
        "todos must be a list, got int"
    );
    assert_eq!(
        call(&store, json!({"todos": "{oops"}))["error"],
        "todos is a string that does not parse as a JSON array"
    );
    assert_eq!(
        todo_tool(None, &json!({})),
        json!({"error": "TodoStore not initialized"}).to_string()
    );
}

#[test]
fn caps_and_the_injection_text() {
    let store = TodoStore::new();
    let many: Vec<Value> = (0..300)
        .map(|i| json!({"id": i.to_string(), "content": "x", "status": "pending"}))
        .collect();
    assert_eq!(store.write(&many, false).len(), MAX_TODO_ITEMS);
    let long = "y".repeat(MAX_TODO_CONTENT_CHARS + 10);
    let item = &store.write(
        &[json!({"id": "1", "content": long, "status": "pending"})],
        false,
    )[0];
    assert_eq!(item.content.chars().count(), MAX_TODO_CONTENT_CHARS);
    assert!(item.content.ends_with("… [truncated]"));
    store.write(
        &[
            json!({"id": "1", "content": "Plan", "status": "completed"}),
            json!({"id": "2", "content": "Build", "status": "in_progress"}),
            json!({"id": "3", "content": "Test", "status": "pending"}),
        ],
        false,
    );
    assert_eq!(
        store.format_for_injection().unwrap(),
        "[Your active task list was preserved across context compression]\n- [>] 2. Build (in_progress)\n- [ ] 3. Test (pending)"
    );
    store.write(
        &[json!({"id": "1", "content": "Done", "status": "cancelled"})],
        false,
    );
    assert_eq!(store.format_for_injection(), None);
}
