//! A route's declarative filters, in Hermes's shape: `{field, equals|not_equals|contains|in|
//! in_file|regex|exists|missing}`, combined with `all`, `any` and `not`. A field is a dotted
//! path into the payload; it may start with `event`/`event_type` (the event name), `headers`
//! (the request's headers, lower-case names) or `payload`.
//!
//! Filters are checked when the route is loaded (an unknown operator or a bad regex is a
//! configuration error, not a silent mismatch at run time).

use std::path::Path;

use serde_json::Value;

/// What a filter is evaluated against.
pub struct Subject<'a> {
    pub payload: &'a Value,
    pub event_type: &'a str,
    pub headers: &'a Value,
    /// Where relative `in_file` paths start (the Hermes home).
    pub home: &'a Path,
}

const LEAF_OPERATORS: &[&str] = &[
    "equals",
    "not_equals",
    "contains",
    "in",
    "in_file",
    "regex",
    "exists",
    "missing",
];

/// Whether `spec` is a filter this module can evaluate.
pub fn check(spec: &Value) -> Result<(), String> {
    let Some(map) = spec.as_object() else {
        return Err(format!("a filter must be a mapping, not {spec}"));
    };
    if let Some(items) = map.get("all").or_else(|| map.get("any")) {
        let Some(items) = items.as_array() else {
            return Err("`all` and `any` take a list of filters".to_owned());
        };
        return items.iter().try_for_each(check);
    }
    if let Some(inner) = map.get("not") {
        return check(inner);
    }
    if !map.get("field").is_some_and(Value::is_string) {
        return Err(format!("filter {spec} has no `field`"));
    }
    let Some(op) = LEAF_OPERATORS.iter().find(|op| map.contains_key(**op)) else {
        return Err(format!(
            "filter {spec} has none of the operators {}",
            LEAF_OPERATORS.join(", ")
        ));
    };
    match *op {
        "regex" => {
            let pattern = map["regex"].as_str().unwrap_or_default();
            regex::Regex::new(pattern).map_err(|e| format!("bad regex {pattern:?}: {e}"))?;
        }
        "in" if !map["in"].is_array() => return Err("`in` takes a list".to_owned()),
        _ => {}
    }
    Ok(())
}

/// Whether every filter of a route matches.
pub fn all_match(filters: &[Value], subject: &Subject<'_>) -> bool {
    filters.iter().all(|spec| matches(spec, subject))
}

fn matches(spec: &Value, subject: &Subject<'_>) -> bool {
    let Some(map) = spec.as_object() else {
        return false;
    };
    if let Some(items) = map.get("all").and_then(Value::as_array) {
        return items.iter().all(|item| matches(item, subject));
    }
    if let Some(items) = map.get("any").and_then(Value::as_array) {
        return items.iter().any(|item| matches(item, subject));
    }
    if let Some(inner) = map.get("not") {
        return !matches(inner, subject);
    }
    let value = map
        .get("field")
        .and_then(Value::as_str)
        .and_then(|field| resolve(field, subject));
    if let Some(exists) = map.get("exists") {
        return value.is_some() == exists.as_bool().unwrap_or(true);
    }
    if map.get("missing").and_then(Value::as_bool) == Some(true) {
        return value.is_none();
    }
    if let Some(expected) = map.get("equals") {
        return value.as_ref() == Some(expected);
    }
    if let Some(expected) = map.get("not_equals") {
        return value.as_ref() != Some(expected);
    }
    if let Some(needle) = map.get("contains") {
        return match &value {
            None => false,
            Some(Value::Array(items)) => items.contains(needle),
            Some(Value::Object(fields)) => needle.as_str().is_some_and(|k| fields.contains_key(k)),
            Some(value) => text_of(value).contains(&text_of(needle)),
        };
    }
    if let Some(Value::Array(haystack)) = map.get("in") {
        return value.is_some_and(|v| haystack.contains(&v));
    }
    if let Some(file) = map.get("in_file").and_then(Value::as_str) {
        return value.is_some_and(|v| file_values(subject.home, file).contains(&v));
    }
    if let Some(pattern) = map.get("regex").and_then(Value::as_str) {
        let Ok(regex) = regex::Regex::new(pattern) else {
            return false;
        };
        return value.is_some_and(|v| regex.is_match(&text_of(&v)));
    }
    false
}

/// The value at dotted `field`, or `None` when any step is missing.
fn resolve(field: &str, subject: &Subject<'_>) -> Option<Value> {
    let mut parts = field.split('.').filter(|p| !p.is_empty()).peekable();
    let mut value = match parts.peek().copied() {
        Some("event" | "event_type") => {
            parts.next();
            Value::String(subject.event_type.to_owned())
        }
        Some("headers") => {
            parts.next();
            subject.headers.clone()
        }
        Some("payload") => {
            parts.next();
            subject
                .payload
                .get("payload")
                .unwrap_or(subject.payload)
                .clone()
        }
        Some(_) => subject.payload.clone(),
        None => return None,
    };
    for part in parts {
        value = match value {
            Value::Object(mut map) => map.remove(part)?,
            Value::Array(mut items) => {
                let index: usize = part.parse().ok()?;
                (index < items.len()).then(|| items.swap_remove(index))?
            }
            _ => return None,
        };
    }
    Some(value)
}

/// A value as text: strings as they are, anything else as compact JSON with sorted keys.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The values an `in_file` filter lists: a JSON list, a JSON object's keys, or one value per
/// non-empty line. An unreadable file lists nothing (and is logged).
fn file_values(home: &Path, file: &str) -> Vec<Value> {
    let path = match file.strip_prefix("~/.hermes/") {
        Some(rest) => home.join(rest),
        None if Path::new(file).is_absolute() => Path::new(file).to_path_buf(),
        None => home.join(file),
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "webhook filter: cannot read in_file");
            return Vec::new();
        }
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(items)) => items,
        Ok(Value::Object(map)) => map.keys().map(|k| Value::String(k.clone())).collect(),
        Ok(other) => vec![other],
        Err(_) => text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| Value::String(l.to_owned()))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(spec: Value, payload: Value) -> bool {
        check(&spec).unwrap();
        let headers = json!({"x-github-event": "pull_request"});
        let subject = Subject {
            payload: &payload,
            event_type: "pull_request",
            headers: &headers,
            home: Path::new("/nonexistent"),
        };
        all_match(&[spec], &subject)
    }

    #[test]
    fn leaf_operators() {
        let pr = json!({"action": "opened", "pull_request": {"labels": ["bug", "ui"], "draft": false,
            "title": "Fix the login page"}});
        assert!(eval(
            json!({"field": "action", "equals": "opened"}),
            pr.clone()
        ));
        assert!(!eval(
            json!({"field": "action", "equals": "closed"}),
            pr.clone()
        ));
        assert!(eval(
            json!({"field": "pull_request.draft", "equals": false}),
            pr.clone()
        ));
        assert!(eval(
            json!({"field": "action", "not_equals": "closed"}),
            pr.clone()
        ));
        assert!(eval(
            json!({"field": "pull_request.labels", "contains": "bug"}),
            pr.clone()
        ));
        assert!(eval(
            json!({"field": "pull_request.title", "contains": "login"}),
            pr.clone()
        ));
        assert!(eval(
            json!({"field": "action", "in": ["opened", "reopened"]}),
            pr.clone()
        ));
        assert!(eval(
            json!({"field": "pull_request.title", "regex": "^Fix"}),
            pr.clone()
        ));
        assert!(eval(
            json!({"field": "pull_request.labels.1", "equals": "ui"}),
            pr.clone()
        ));
        assert!(eval(
            json!({"field": "pull_request.merged", "missing": true}),
            pr.clone()
        ));
        assert!(eval(
            json!({"field": "pull_request", "exists": true}),
            pr.clone()
        ));
        assert!(eval(
            json!({"field": "event", "equals": "pull_request"}),
            pr.clone()
        ));
        assert!(eval(
            json!({"field": "headers.x-github-event", "equals": "pull_request"}),
            pr
        ));
    }

    #[test]
    fn combinators() {
        let p = json!({"a": 1, "b": 2});
        assert!(eval(
            json!({"all": [{"field": "a", "equals": 1}, {"field": "b", "equals": 2}]}),
            p.clone()
        ));
        assert!(!eval(
            json!({"all": [{"field": "a", "equals": 1}, {"field": "b", "equals": 3}]}),
            p.clone()
        ));
        assert!(eval(
            json!({"any": [{"field": "a", "equals": 9}, {"field": "b", "equals": 2}]}),
            p.clone()
        ));
        assert!(eval(json!({"not": {"field": "a", "equals": 9}}), p));
    }

    #[test]
    fn bad_filters_are_configuration_errors() {
        assert!(
            check(&json!({"field": "a"}))
                .unwrap_err()
                .contains("none of the operators")
        );
        assert!(
            check(&json!({"field": "a", "regex": "("}))
                .unwrap_err()
                .contains("bad regex")
        );
        assert!(
            check(&json!({"equals": 1}))
                .unwrap_err()
                .contains("no `field`")
        );
        assert!(check(&json!({"all": {"field": "a"}})).is_err());
    }

    #[test]
    fn in_file_reads_lines_or_json_from_the_home() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("repos.txt"), "acme/web\nacme/api\n").unwrap();
        let payload = json!({"repository": {"full_name": "acme/api"}});
        let headers = json!({});
        let subject = Subject {
            payload: &payload,
            event_type: "push",
            headers: &headers,
            home: home.path(),
        };
        let spec = json!({"field": "repository.full_name", "in_file": "~/.hermes/repos.txt"});
        assert!(all_match(&[spec], &subject));
        let spec = json!({"field": "repository.full_name", "in_file": "absent.txt"});
        assert!(!all_match(&[spec], &subject));
    }
}
