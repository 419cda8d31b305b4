//! The data `tests/state_migrate.rs` moves around: a state.db made through our Store with
//! every kind of row, and a dump of its copied tables to compare copies by.

use std::path::Path;

use hermesd::state::{
    Content, InboundState, NewMessage, NewObligation, NewSession, Store, UsageDelta,
};
use serde_json::json;

/// The tables the command copies (those both backends have).
pub const TABLES: [(&str, &str); 9] = [
    ("sessions", "id"),
    ("messages", "id"),
    ("state_meta", "key"),
    ("gateway_routing", "scope, session_key"),
    ("delivery_obligations", "obligation_id"),
    ("hermesd_inbound_events", "platform, event_id"),
    ("hermesd_reply_edits", "obligation_id"),
    ("hermesd_dead_letters", "platform, item_id"),
    ("hermesd_cron_runs", "job_id, scheduled_at"),
];

/// What `migrate` writes into a target to know its source; not part of the user's data.
pub const MARKER_KEY: &str = "hermesd_migrated_from";

/// A state.db written through our Store: sessions with CJK text and titles, a parent whose id
/// sorts after its child's, usage counters, JSON multimodal content, tool calls, reasoning,
/// and rows in every gateway table.
pub async fn populated_state_db(path: &Path, tag: &str) {
    let store = Store::open(path).unwrap();
    store.ensure_gateway_schema().await.unwrap();
    let mut parent = NewSession::new(format!("z-parent-{tag}"), "telegram");
    parent.model = Some("gpt-test".into());
    parent.model_config = Some(json!({"temperature": 0.7}));
    parent.system_prompt = Some("You are терпеливый and 耐心".into());
    parent.started_at = Some(1_700_000_000.123_456_7);
    store.create_session(parent).await.unwrap();
    let mut child = NewSession::new(format!("a-child-{tag}"), "telegram");
    child.parent_session_id = Some(format!("z-parent-{tag}"));
    child.user_id = Some("42".into());
    store.create_session(child).await.unwrap();
    store
        .set_session_title(
            &format!("z-parent-{tag}"),
            Some(&format!("部署 Docker {tag}")),
        )
        .await
        .unwrap();
    store
        .record_usage(UsageDelta {
            session_id: format!("z-parent-{tag}"),
            model: Some("gpt-test".into()),
            input_tokens: 1234,
            output_tokens: 567,
            cache_read_tokens: 89,
            cache_write_tokens: 10,
            reasoning_tokens: 11,
            api_calls: 3,
            estimated_cost_usd: Some(0.1 + 0.2),
            billing_provider: Some("openrouter".into()),
            billing_base_url: None,
        })
        .await
        .unwrap();
    let parent_id = format!("z-parent-{tag}");
    let child_id = format!("a-child-{tag}");
    for i in 0..7 {
        store
            .append_message(NewMessage::text(
                &parent_id,
                "user",
                &format!("the docker build fails #{i} 😀"),
            ))
            .await
            .unwrap();
    }
    let mut call = NewMessage::text(&parent_id, "assistant", "我们需要部署环境");
    call.tool_calls = Some(json!([{"id": "c1", "type": "function",
        "function": {"name": "terminal", "arguments": "{\"cmd\":\"ls\"}"}}]));
    call.reasoning = Some("thinking…".into());
    call.token_count = Some(77);
    call.finish_reason = Some("tool_calls".into());
    store.append_message(call).await.unwrap();
    let mut tool = NewMessage::text(&parent_id, "tool", "file_a\nfile_b");
    tool.tool_call_id = Some("c1".into());
    tool.tool_name = Some("terminal".into());
    store.append_message(tool).await.unwrap();
    let mut image = NewMessage::text(&child_id, "user", "");
    image.content = Some(Content::Json(json!([
        {"type": "text", "text": "what is in this picture?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    ])));
    store.append_message(image).await.unwrap();
    store.end_session(&parent_id, "compression").await.unwrap();

    store
        .save_routing_entry(
            "",
            &format!("agent:main:telegram:dm:{tag}"),
            &json!({"session_id": parent_id}),
        )
        .await
        .unwrap();
    for n in 0..3 {
        let event = format!("{tag}-{n}");
        store
            .record_inbound(
                "telegram",
                &event,
                "key",
                json!({"text": format!("héllo {n}")}),
            )
            .await
            .unwrap();
        let reply = NewObligation {
            session_key: "key".into(),
            message_ref: event.clone(),
            platform: "telegram".into(),
            chat_id: "42".into(),
            thread_id: None,
            content: format!("reply {n} ✓"),
        };
        if n == 2 {
            store
                .answer_inbound_by_edit("telegram", &event, reply, "msg-9")
                .await
                .unwrap();
        } else {
            store
                .answer_inbound("telegram", &event, vec![reply])
                .await
                .unwrap();
        }
    }
    store
        .mark_inbound("telegram", &format!("{tag}-0"), InboundState::Answered)
        .await
        .unwrap();
    store
        .record_dead_letter(
            "discord",
            &format!("dl-{tag}"),
            Some("c9"),
            "{\"raw\":1}",
            "bad json",
        )
        .await
        .unwrap();
    store
        .claim_cron_run(&format!("job-{tag}"), 1_700_000_100, &parent_id)
        .await
        .unwrap();
    store.close().await;
}

/// Every copied table of a state.db, in key order (the migration marker left out).
pub fn dump(path: &Path) -> Vec<(String, Vec<Vec<rusqlite::types::Value>>)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    TABLES
        .iter()
        .map(|(table, key)| {
            let filter = if *table == "state_meta" {
                format!("WHERE key != '{MARKER_KEY}'")
            } else {
                String::new()
            };
            let sql = format!("SELECT * FROM {table} {filter} ORDER BY {key}");
            let mut stmt = conn.prepare(&sql).unwrap();
            let width = stmt.column_count();
            let rows = stmt
                .query_map([], |row| (0..width).map(|i| row.get(i)).collect())
                .unwrap()
                .collect::<Result<Vec<Vec<rusqlite::types::Value>>, _>>()
                .unwrap();
            ((*table).to_owned(), rows)
        })
        .collect()
}

pub fn row_count(dump: &[(String, Vec<Vec<rusqlite::types::Value>>)], table: &str) -> usize {
    dump.iter()
        .find(|(t, _)| t == table)
        .map_or(0, |(_, rows)| rows.len())
}
