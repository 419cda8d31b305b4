//! Filling a route's prompt (and `deliver_extra` strings) from the event's payload, with
//! Hermes's template rules: `{a.b.c}` is the value at that path (objects and lists as
//! indented JSON, cut at 2,000 characters), `{event_type}` the event's name, `{__raw__}` the
//! whole payload as indented JSON cut at 4,000; a path that does not resolve stays as written.
//! An empty template gives a short header and the payload.

use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::Value;

static PLACEHOLDER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\{([A-Za-z0-9_.]+)\}").expect("static pattern"));

const RAW_LIMIT: usize = 4000;
const VALUE_LIMIT: usize = 2000;

/// The prompt for one event.
pub fn prompt(template: &str, payload: &Value, event_type: &str, route: &str) -> String {
    if template.trim().is_empty() {
        return format!(
            "Webhook event `{event_type}` arrived on route `{route}`. Payload:\n\n```json\n{}\n```",
            cut(&pretty(payload), RAW_LIMIT)
        );
    }
    fill(template, payload, event_type)
}

/// `template` with every placeholder resolved against `payload`.
pub fn fill(template: &str, payload: &Value, event_type: &str) -> String {
    PLACEHOLDER
        .replace_all(template, |caps: &Captures<'_>| {
            let key = &caps[1];
            match key {
                "__raw__" => cut(&pretty(payload), RAW_LIMIT),
                "event_type" => event_type.to_owned(),
                _ => lookup(payload, key).map_or_else(|| caps[0].to_owned(), text),
            }
        })
        .into_owned()
}

fn lookup<'a>(payload: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(payload, |value, part| match value {
            Value::Object(map) => map.get(part),
            _ => None,
        })
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Object(_) | Value::Array(_) => cut(&pretty(value), VALUE_LIMIT),
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        other => other.to_string(),
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn cut(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_event_type_and_unresolved_placeholders() {
        let payload = json!({"pull_request": {"title": "Fix login", "number": 42,
            "draft": false, "labels": ["a"]}});
        let out = fill(
            "{event_type}: #{pull_request.number} {pull_request.title} draft={pull_request.draft} {nope.x} {pull_request.labels}",
            &payload,
            "pull_request",
        );
        assert_eq!(
            out,
            "pull_request: #42 Fix login draft=False {nope.x} [\n  \"a\"\n]"
        );
    }

    #[test]
    fn raw_payload_is_cut_and_an_empty_template_shows_the_payload() {
        let big = json!({"blob": "x".repeat(10_000)});
        assert_eq!(fill("{__raw__}", &big, "e").chars().count(), RAW_LIMIT);
        let out = prompt("", &json!({"a": 1}), "push", "ci");
        assert!(out.contains("`push`") && out.contains("`ci`") && out.contains("\"a\": 1"));
    }

    #[test]
    fn placeholders_in_values_are_not_expanded_again() {
        let payload = json!({"title": "{secret}", "secret": "s3"});
        assert_eq!(fill("{title}", &payload, "e"), "{secret}");
    }
}
