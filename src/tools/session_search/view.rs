//! The message windows session_search returns (Python `get_anchored_view` /
//! `get_messages_around`): ±N messages around an anchor plus the session's opening and
//! closing exchanges, shaped for the model.

use serde_json::{Map, Value, json};

use crate::state::{Content, Message, Session};
use crate::tools::timefmt::human;

pub(super) fn shape(m: &Message, anchor: Option<i64>) -> Value {
    let mut entry = Map::new();
    entry.insert("id".into(), json!(m.id));
    entry.insert("role".into(), json!(m.role));
    entry.insert(
        "content".into(),
        serde_json::to_value(&m.content).unwrap_or(Value::Null),
    );
    entry.insert("timestamp".into(), json!(m.timestamp));
    if let Some(name) = m.tool_name.as_ref().filter(|n| !n.is_empty()) {
        entry.insert("tool_name".into(), json!(name));
    }
    if let Some(calls) = m
        .tool_calls
        .as_ref()
        .filter(|c| !c.is_null() && c.as_array().is_none_or(|a| !a.is_empty()))
    {
        entry.insert("tool_calls".into(), calls.clone());
    }
    if let Some(id) = m.tool_call_id.as_ref().filter(|i| !i.is_empty()) {
        entry.insert("tool_call_id".into(), json!(id));
    }
    if anchor == Some(m.id) {
        entry.insert("anchor".into(), json!(true));
    }
    Value::Object(entry)
}

fn has_content(m: &Message) -> bool {
    match &m.content {
        Some(Content::Text(t)) => !t.is_empty(),
        Some(Content::Json(_)) => true,
        None => false,
    }
}

/// Window of ±`window` messages around the anchor, and the counts beyond it.
pub(super) struct View {
    pub(super) window: Vec<Value>,
    pub(super) before: usize,
    pub(super) after: usize,
    pub(super) bookend_start: Vec<Value>,
    pub(super) bookend_end: Vec<Value>,
}

/// Python `get_anchored_view` (with `keep_roles=None` for scrolling).
pub(super) fn anchored_view(
    messages: &[Message],
    anchor: i64,
    window: usize,
    bookend: Option<usize>,
) -> Option<View> {
    let at = messages.iter().position(|m| m.id == anchor)?;
    let from = at.saturating_sub(window);
    let to = (at + window).min(messages.len() - 1);
    let slice = &messages[from..=to];
    let keep = |m: &&Message| {
        bookend.is_none() || m.id == anchor || m.role == "user" || m.role == "assistant"
    };
    let conversational =
        |m: &&Message| (m.role == "user" || m.role == "assistant") && has_content(m);
    let (bookend_start, bookend_end) = match bookend {
        Some(n) if n > 0 => {
            let start: Vec<Value> = messages[..from]
                .iter()
                .filter(conversational)
                .take(n)
                .map(|m| shape(m, None))
                .collect();
            let tail: Vec<&Message> = messages[to + 1..].iter().filter(conversational).collect();
            let end: Vec<Value> = tail[tail.len().saturating_sub(n)..]
                .iter()
                .map(|m| shape(m, None))
                .collect();
            (start, end)
        }
        _ => (Vec::new(), Vec::new()),
    };
    Some(View {
        window: slice
            .iter()
            .filter(keep)
            .map(|m| shape(m, Some(anchor)))
            .collect(),
        before: at - from,
        after: to - at,
        bookend_start,
        bookend_end,
    })
}

pub(super) fn session_meta(session: Option<&Session>) -> Value {
    json!({
        "when": session.map_or("unknown".to_owned(), |s| human(s.started_at)),
        "source": session.map(|s| s.source.clone()),
        "model": session.and_then(|s| s.model.clone()),
        "title": session.and_then(|s| s.title.clone()),
    })
}
