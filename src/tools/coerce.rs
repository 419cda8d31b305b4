//! Coerces model-emitted arguments to the types their schema declares (Python
//! `coerce_tool_args`): `"42"` → 42, `"true"` → true, a JSON-encoded array or object string
//! → the value, and a bare scalar where an array is expected → a one-element array.

use serde_json::Value;

/// Returns `args` with top-level values coerced to their schema types where that is safe;
/// values that cannot be coerced are left as they are.
pub fn coerce_tool_args(schema: &Value, args: Value) -> Value {
    let Value::Object(mut map) = args else {
        return args;
    };
    let Some(properties) = schema
        .get("parameters")
        .and_then(|p| p.get("properties"))
        .and_then(Value::as_object)
    else {
        return Value::Object(map);
    };
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let Some(prop) = properties.get(&key) else {
            continue;
        };
        let Some(value) = map.remove(&key) else {
            continue;
        };
        map.insert(key, coerce_value(value, prop));
    }
    Value::Object(map)
}

fn expected_types(prop: &Value) -> Vec<&str> {
    match prop.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn coerce_value(value: Value, prop: &Value) -> Value {
    let types = expected_types(prop);
    let Value::String(text) = &value else {
        // A bare non-null scalar where only an array is allowed: wrap it.
        if types == ["array"] && !matches!(value, Value::Array(_) | Value::Null) {
            return Value::Array(vec![value]);
        }
        return value;
    };
    if types.contains(&"string") {
        return value;
    }
    let trimmed = text.trim();
    for ty in &types {
        let coerced = match *ty {
            "integer" => trimmed.parse::<i64>().ok().map(Value::from),
            "number" => trimmed
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(|f| {
                    if f.fract() == 0.0 && f.abs() < 9.0e15 {
                        Value::from(f as i64)
                    } else {
                        Value::from(f)
                    }
                }),
            "boolean" => match trimmed.to_ascii_lowercase().as_str() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            "array" => match serde_json::from_str::<Value>(trimmed) {
                Ok(parsed @ Value::Array(_)) => Some(parsed),
                _ => None,
            },
            "object" => match serde_json::from_str::<Value>(trimmed) {
                Ok(parsed @ Value::Object(_)) => Some(parsed),
                _ => None,
            },
            "null" if trimmed == "null" => Some(Value::Null),
            _ => None,
        };
        if let Some(coerced) = coerced {
            return coerced;
        }
    }
    if types == ["array"] {
        return Value::Array(vec![value]);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"parameters": {"properties": {
            "n": {"type": "integer"}, "f": {"type": "number"}, "b": {"type": "boolean"},
            "list": {"type": "array"}, "obj": {"type": "object"}, "s": {"type": "string"},
            "either": {"type": ["integer", "string"]}
        }}})
    }

    #[test]
    fn strings_become_their_declared_types() {
        let args = json!({"n": "42", "f": "1.5", "b": "True", "list": "[1,2]",
            "obj": "{\"a\":1}", "s": "7", "either": "9", "unknown": "3"});
        let out = coerce_tool_args(&schema(), args);
        assert_eq!(
            out,
            json!({"n": 42, "f": 1.5, "b": true, "list": [1, 2], "obj": {"a": 1},
                "s": "7", "either": "9", "unknown": "3"})
        );
    }

    #[test]
    fn scalars_are_wrapped_where_arrays_are_expected_and_junk_is_kept() {
        let out = coerce_tool_args(&schema(), json!({"list": "a.com", "n": "many", "b": 1}));
        assert_eq!(out, json!({"list": ["a.com"], "n": "many", "b": 1}));
        let out = coerce_tool_args(&schema(), json!({"list": 5}));
        assert_eq!(out, json!({"list": [5]}));
    }
}
