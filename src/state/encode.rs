//! How message fields are encoded in state.db, compatible with the Python Hermes.
//!
//! Structured content is stored as `"\x00json:" + json`; JSON columns (`tool_calls`,
//! `reasoning_details`, codex items) as JSON text or NULL when empty. Text read back is decoded
//! leniently: rows written by other programs may hold invalid UTF-8 (lone surrogates encoded
//! CESU-style), which become U+FFFD instead of failing the read.

use rusqlite::Row;
use rusqlite::types::ValueRef;
use serde_json::Value;

use super::model::Content;

const JSON_PREFIX: &str = "\x00json:";

pub fn encode_content(content: &Option<Content>) -> Option<String> {
    match content {
        None => None,
        Some(Content::Text(text)) => Some(text.clone()),
        Some(Content::Json(value)) => Some(format!("{JSON_PREFIX}{value}")),
    }
}

pub fn decode_content(raw: Option<String>) -> Option<Content> {
    let raw = raw?;
    if let Some(json) = raw.strip_prefix(JSON_PREFIX)
        && let Ok(value) = serde_json::from_str(json)
    {
        return Some(Content::Json(value));
    }
    Some(Content::Text(raw))
}

/// The text of a content value, for previews and search context.
pub fn content_text(content: &Option<Content>) -> String {
    match content {
        None => String::new(),
        Some(Content::Text(text)) => text.clone(),
        Some(Content::Json(Value::Array(parts))) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            if texts.is_empty() {
                "[multimodal content]".to_owned()
            } else {
                texts.join(" ")
            }
        }
        Some(Content::Json(other)) => other.to_string(),
    }
}

/// JSON columns: NULL for absent or "falsy" values (null, empty list/object/string).
pub fn encode_json(value: &Option<Value>) -> Option<String> {
    match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => None,
        Some(Value::Array(a)) if a.is_empty() => None,
        Some(Value::Object(o)) if o.is_empty() => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(v) => Some(v.to_string()),
    }
}

pub fn decode_json(raw: Option<String>) -> Option<Value> {
    raw.map(|s| serde_json::from_str(&s).unwrap_or(Value::String(s)))
}

/// `tool_calls` decode: a decode failure becomes an empty list, as in Hermes.
pub fn decode_tool_calls(raw: Option<String>) -> Option<Value> {
    raw.map(|s| serde_json::from_str(&s).unwrap_or(Value::Array(Vec::new())))
}

/// How many tool calls a `tool_calls` value counts for (a non-list counts as one).
pub fn tool_call_count(value: &Option<Value>) -> i64 {
    match encode_json(value) {
        None => 0,
        Some(_) => match value {
            Some(Value::Array(a)) => a.len() as i64,
            _ => 1,
        },
    }
}

/// Reads a text column leniently (invalid UTF-8 becomes U+FFFD; numbers become text).
pub fn text(row: &Row<'_>, idx: usize) -> rusqlite::Result<Option<String>> {
    Ok(match row.get_ref(idx)? {
        ValueRef::Null => None,
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => {
            Some(String::from_utf8_lossy(bytes).into_owned())
        }
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
    })
}

pub fn text_or_empty(row: &Row<'_>, idx: usize) -> rusqlite::Result<String> {
    Ok(text(row, idx)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_round_trips() {
        let json_content = Some(Content::Json(json!([{"type": "text", "text": "hi"}])));
        let stored = encode_content(&json_content).unwrap();
        assert!(stored.starts_with("\x00json:"));
        assert_eq!(decode_content(Some(stored)), json_content);
        assert_eq!(content_text(&json_content), "hi");
        let text = Some(Content::Text("plain".into()));
        assert_eq!(decode_content(encode_content(&text)), text);
    }

    #[test]
    fn falsy_json_is_null_and_counts() {
        assert_eq!(encode_json(&Some(json!([]))), None);
        assert_eq!(tool_call_count(&Some(json!([{"id": 1}, {"id": 2}]))), 2);
        assert_eq!(tool_call_count(&Some(json!({"id": 1}))), 1);
        assert_eq!(tool_call_count(&None), 0);
        assert_eq!(decode_tool_calls(Some("not json".into())), Some(json!([])));
    }
}
