//! How an MCP server's tool is shown to the model: its registry name
//! (`mcp__<server>__<tool>`, Hermes 0.19's scheme, each part reduced to `[A-Za-z0-9_]`) and
//! its input schema, repaired into a form every provider accepts.
//!
//! The repairs follow Hermes (`_normalize_mcp_input_schema`): draft-07 `definitions` become
//! `$defs` (Moonshot rejects the old form); an object node without `type` gets it, and
//! `properties` when missing; `required` keeps only names `properties` has (Gemini rejects
//! dangling ones); a nullable union (`anyOf: [X, {type: null}]`) becomes `X` marked
//! `nullable` (Anthropic rejects null branches; optionality stays with `required`).

use serde_json::{Map, Value, json};

/// Every MCP tool's registry name starts with this.
pub const TOOL_PREFIX: &str = "mcp__";

/// A name part with every character outside `[A-Za-z0-9_]` replaced by `_`.
pub fn name_part(value: &str) -> String {
    value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The registry name of `tool` on `server`.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{TOOL_PREFIX}{}__{}", name_part(server), name_part(tool))
}

/// The input schema as the model gets it.
pub fn normalize(schema: &Map<String, Value>) -> Value {
    if schema.is_empty() {
        return json!({"type": "object", "properties": {}});
    }
    let mut value = Value::Object(schema.clone());
    promote_definitions(&mut value);
    collapse_nullable(&mut value);
    repair_objects(&mut value);
    if let Value::Object(top) = &mut value
        && top.get("type").and_then(Value::as_str) == Some("object")
    {
        top.entry("properties").or_insert_with(|| json!({}));
    }
    value
}

/// `definitions` → `$defs` where it is a schema keyword (never a property's name), and
/// `#/definitions/…` references with it.
fn promote_definitions(node: &mut Value) {
    match node {
        Value::Object(map) => {
            if let Some(defs) = map.remove("definitions") {
                map.insert("$defs".to_owned(), defs);
            }
            if let Some(Value::String(reference)) = map.get_mut("$ref")
                && let Some(rest) = reference.strip_prefix("#/definitions/")
            {
                *reference = format!("#/$defs/{rest}");
            }
            for (key, child) in map.iter_mut() {
                if key == "properties" || key == "patternProperties" {
                    // The keys here are user-facing property names: only their schemas
                    // are schema nodes.
                    if let Value::Object(props) = child {
                        props.values_mut().for_each(promote_definitions);
                    }
                } else {
                    promote_definitions(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(promote_definitions),
        _ => {}
    }
}

fn is_null_branch(value: &Value) -> bool {
    value.get("type").and_then(Value::as_str) == Some("null")
}

/// `anyOf`/`oneOf` with one non-null branch and a null one becomes that branch, marked
/// `nullable: true`, keeping the node's other keys (description, default).
fn collapse_nullable(node: &mut Value) {
    match node {
        Value::Object(map) => {
            map.values_mut().for_each(collapse_nullable);
            for key in ["anyOf", "oneOf"] {
                let Some(Value::Array(branches)) = map.get(key) else {
                    continue;
                };
                let non_null: Vec<&Value> =
                    branches.iter().filter(|b| !is_null_branch(b)).collect();
                if non_null.len() != 1 || non_null.len() == branches.len() {
                    continue;
                }
                let Value::Object(kept) = non_null[0].clone() else {
                    continue;
                };
                map.remove(key);
                for (k, v) in kept {
                    map.entry(k).or_insert(v);
                }
                map.insert("nullable".to_owned(), Value::Bool(true));
                if map.get("default") == Some(&Value::Null) {
                    map.remove("default");
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(collapse_nullable),
        _ => {}
    }
}

fn repair_objects(node: &mut Value) {
    match node {
        Value::Object(map) => {
            map.values_mut().for_each(repair_objects);
            let typeless = map.get("type").is_none_or(Value::is_null);
            if typeless && (map.contains_key("properties") || map.contains_key("required")) {
                map.insert("type".to_owned(), json!("object"));
            }
            if map.get("type").and_then(Value::as_str) != Some("object") {
                return;
            }
            if !map.get("properties").is_some_and(Value::is_object) {
                map.insert("properties".to_owned(), json!({}));
            }
            let known: Vec<String> = map["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            if let Some(Value::Array(required)) = map.get_mut("required") {
                required.retain(|r| r.as_str().is_some_and(|r| known.iter().any(|k| k == r)));
                if required.is_empty() {
                    map.remove("required");
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(repair_objects),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(value: Value) -> Value {
        normalize(value.as_object().unwrap())
    }

    #[test]
    fn names_follow_the_hermes_scheme() {
        assert_eq!(
            tool_name("my-server", "get.file"),
            "mcp__my_server__get_file"
        );
        assert_eq!(tool_name("gh", "search_code"), "mcp__gh__search_code");
    }

    #[test]
    fn schemas_are_repaired_for_every_provider() {
        assert_eq!(norm(json!({})), json!({"type": "object", "properties": {}}));
        let fixed = norm(json!({
            "properties": {
                "definitions": {"type": "array", "items": {"$ref": "#/definitions/Id"}},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null,
                          "description": "max"},
                "filter": {"required": ["x"]},
            },
            "required": ["definitions", "ghost"],
            "definitions": {"Id": {"type": "string"}},
        }));
        assert_eq!(fixed["type"], "object");
        assert_eq!(fixed["$defs"]["Id"]["type"], "string");
        assert!(fixed.get("definitions").is_none());
        let props = &fixed["properties"];
        assert!(
            props.get("definitions").is_some(),
            "a property's name is kept"
        );
        assert_eq!(props["definitions"]["items"]["$ref"], "#/$defs/Id");
        assert_eq!(
            props["limit"],
            json!({"type": "integer", "nullable": true, "description": "max"})
        );
        assert_eq!(props["filter"], json!({"type": "object", "properties": {}}));
        assert_eq!(fixed["required"], json!(["definitions"]));
    }
}
