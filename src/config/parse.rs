//! Typing one leaf value at a time: a bad value becomes a named error in [`Issues`] and the
//! default is used, so validation carries on and reports every problem in one pass.

use serde_json::Value;

use super::choice::Choice;
use super::error::ConfigError;
use super::secret::{REDACTED, Secret};
use super::shape::Section;

/// A value together with the name to blame for it: a dotted config key or an env var name.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    pub key: String,
    pub value: Value,
}

/// A config-file value at `key`, if one was written (null counts as unset).
pub fn at(key: impl Into<String>, value: Option<&Value>) -> Option<Leaf> {
    value.filter(|v| !v.is_null()).map(|v| Leaf {
        key: key.into(),
        value: v.clone(),
    })
}

/// Errors and warnings collected while validating.
#[derive(Debug, Default)]
pub struct Issues {
    pub errors: Vec<ConfigError>,
    pub warnings: Vec<String>,
    /// Accepted keys hermesd ignores that are set, as dotted paths (reported once, together).
    pub ignored: Vec<String>,
}

/// How a value is shown in an error: strings quoted and cut short, containers by kind.
pub fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => {
            let mut short: String = text.chars().take(60).collect();
            if short.len() < text.len() {
                short.push('…');
            }
            format!("'{short}'")
        }
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "a mapping".to_owned(),
        other => other.to_string(),
    }
}

/// The kind of a value, for shape errors where even a short preview could leak a token.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

impl Issues {
    pub fn error(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ConfigError::new(key, message));
    }

    pub fn warn(&mut self, message: impl Into<String>) {
        self.warnings.push(message.into());
    }

    /// A mapping-valued section; anything else is an error and yields the defaults.
    pub fn section<T: Clone>(&mut self, key: &str, section: Option<&Section<T>>) -> Option<T> {
        match section? {
            Section::Map(map) => Some(map.clone()),
            Section::Invalid(Value::Null) => None,
            Section::Invalid(other) => {
                self.error(key, format!("expected a mapping, got {}", kind(other)));
                None
            }
        }
    }

    pub fn bool(&mut self, leaf: Option<Leaf>, default: bool) -> bool {
        self.opt_bool(leaf).unwrap_or(default)
    }

    /// Accepts YAML booleans and the spellings Hermes treats as booleans in env vars.
    pub fn opt_bool(&mut self, leaf: Option<Leaf>) -> Option<bool> {
        let leaf = leaf?;
        let parsed = match &leaf.value {
            Value::Bool(value) => Some(*value),
            Value::Number(number) => match number.as_i64() {
                Some(1) => Some(true),
                Some(0) => Some(false),
                _ => None,
            },
            Value::String(text) => match text.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => Some(true),
                "false" | "0" | "no" | "off" => Some(false),
                _ => None,
            },
            _ => None,
        };
        if parsed.is_none() {
            self.error(
                &leaf.key,
                format!("expected true or false, got {}", shown(&leaf.value)),
            );
        }
        parsed
    }

    /// A whole number within `min..=max`.
    pub fn opt_uint(&mut self, leaf: Option<Leaf>, min: u64, max: u64) -> Option<u64> {
        let leaf = leaf?;
        let parsed = match &leaf.value {
            Value::Number(number) => number
                .as_i64()
                .map(i128::from)
                .or_else(|| number.as_u64().map(i128::from)),
            Value::String(text) => text.trim().parse::<i128>().ok(),
            _ => None,
        };
        match parsed {
            None => {
                self.error(
                    &leaf.key,
                    format!("expected a whole number, got {}", shown(&leaf.value)),
                );
                None
            }
            Some(n) if n < i128::from(min) || n > i128::from(max) => {
                // Upper bounds that only guard the integer type are not worth mentioning.
                let range = if max >= u64::from(u32::MAX) {
                    format!("at least {min}")
                } else {
                    format!("between {min} and {max}")
                };
                self.error(
                    &leaf.key,
                    format!("must be {range}, got {}", shown(&leaf.value)),
                );
                None
            }
            Some(n) => u64::try_from(n).ok(),
        }
    }

    pub fn uint(&mut self, leaf: Option<Leaf>, default: u64, min: u64, max: u64) -> u64 {
        self.opt_uint(leaf, min, max).unwrap_or(default)
    }

    /// A number accepted by `valid`; `requirement` completes "must be ...".
    pub fn float(
        &mut self,
        leaf: Option<Leaf>,
        default: f64,
        valid: impl Fn(f64) -> bool,
        requirement: &str,
    ) -> f64 {
        let Some(leaf) = leaf else { return default };
        let parsed = match &leaf.value {
            Value::Number(number) => number.as_f64(),
            Value::String(text) => text.trim().parse::<f64>().ok(),
            _ => None,
        };
        match parsed {
            Some(n) if n.is_finite() && valid(n) => n,
            Some(_) => {
                self.error(
                    &leaf.key,
                    format!("must be {requirement}, got {}", shown(&leaf.value)),
                );
                default
            }
            None => {
                self.error(
                    &leaf.key,
                    format!("expected a number, got {}", shown(&leaf.value)),
                );
                default
            }
        }
    }

    pub fn choice<C: Choice>(&mut self, leaf: Option<Leaf>, default: C) -> C {
        self.opt_choice(leaf).unwrap_or(default)
    }

    pub fn opt_choice<C: Choice>(&mut self, leaf: Option<Leaf>) -> Option<C> {
        let leaf = leaf?;
        let parsed = match &leaf.value {
            Value::String(text) => C::from_name(&text.trim().to_ascii_lowercase()),
            Value::Bool(value) => C::from_bool(*value),
            _ => None,
        };
        if parsed.is_none() {
            self.error(
                &leaf.key,
                format!(
                    "expected one of {}; got {}",
                    C::NAMES.join(", "),
                    shown(&leaf.value)
                ),
            );
        }
        parsed
    }

    /// Text kept exactly as written, empty included (`streaming.cursor`).
    pub fn text(&mut self, leaf: Option<Leaf>) -> Option<String> {
        let leaf = leaf?;
        match &leaf.value {
            Value::String(text) => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            other => {
                self.error(&leaf.key, format!("expected text, got {}", shown(other)));
                None
            }
        }
    }

    /// Optional text where an empty string means unset, as in Hermes' own defaults.
    pub fn string(&mut self, leaf: Option<Leaf>) -> Option<String> {
        self.text(leaf)
            .map(|text| text.trim().to_owned())
            .filter(|text| !text.is_empty())
    }

    /// An `http(s)://` URL.
    pub fn url(&mut self, leaf: Option<Leaf>) -> Option<String> {
        let key = leaf.as_ref().map(|leaf| leaf.key.clone())?;
        let url = self.string(leaf)?;
        if url.starts_with("http://") || url.starts_with("https://") {
            Some(url)
        } else {
            self.error(
                key,
                format!("expected an http:// or https:// URL, got '{url}'"),
            );
            None
        }
    }

    /// A credential. Its value never appears in a message.
    pub fn secret(&mut self, leaf: Option<Leaf>) -> Option<Secret> {
        let leaf = leaf?;
        match &leaf.value {
            Value::String(text) if text.trim().is_empty() => None,
            Value::String(text) => Some(Secret::new(text.trim())),
            Value::Number(number) => Some(Secret::new(number.to_string())),
            other => {
                self.error(
                    &leaf.key,
                    format!("expected text, got {} ({REDACTED})", kind(other)),
                );
                None
            }
        }
    }

    /// A list of strings: a YAML list, or one string split on commas when `split_commas`
    /// (allowlists such as `TELEGRAM_ALLOWED_USERS=1,2`). Items are trimmed; empty ones dropped.
    pub fn list(&mut self, leaf: Option<Leaf>, split_commas: bool) -> Option<Vec<String>> {
        let leaf = leaf?;
        let split = |text: &str| -> Vec<String> {
            let parts: Vec<&str> = if split_commas {
                text.split(',').collect()
            } else {
                vec![text]
            };
            parts
                .into_iter()
                .map(str::trim)
                .filter(|part| !part.is_empty())
                .map(str::to_owned)
                .collect()
        };
        match &leaf.value {
            Value::String(text) => Some(split(text)),
            Value::Number(number) => Some(vec![number.to_string()]),
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    match item {
                        Value::String(text) if !text.trim().is_empty() => {
                            out.push(text.trim().to_owned())
                        }
                        Value::String(_) | Value::Null => {}
                        Value::Number(number) => out.push(number.to_string()),
                        other => self.error(
                            format!("{}[{index}]", leaf.key),
                            format!("expected text, got {}", shown(other)),
                        ),
                    }
                }
                Some(out)
            }
            other => {
                self.error(&leaf.key, format!("expected a list, got {}", shown(other)));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::choice::ApprovalMode;
    use serde_json::json;

    fn leaf(value: Value) -> Option<Leaf> {
        at("k.v", Some(&value))
    }

    #[test]
    fn comma_lists() {
        let mut issues = Issues::default();
        assert_eq!(
            issues.list(leaf(json!(" 42, 77 ,,alice@x ")), true),
            Some(vec!["42".to_owned(), "77".to_owned(), "alice@x".to_owned()])
        );
        assert_eq!(issues.list(leaf(json!("")), true), Some(vec![]));
        assert_eq!(
            issues.list(leaf(json!([1, " b ", ""])), true),
            Some(vec!["1".into(), "b".into()])
        );
        assert_eq!(
            issues.list(leaf(json!("rm -rf a,b")), false),
            Some(vec!["rm -rf a,b".into()])
        );
        assert!(issues.errors.is_empty());
        assert_eq!(issues.list(leaf(json!({"a": 1})), true), None);
        assert_eq!(
            issues.errors[0].to_string(),
            "config error: k.v: expected a list, got a mapping"
        );
    }

    #[test]
    fn numbers_bools_and_choices_report_key_and_value() {
        let mut issues = Issues::default();
        assert_eq!(issues.uint(leaf(json!("30")), 60, 1, 100), 30);
        assert_eq!(issues.uint(leaf(json!("abc")), 60, 1, 100), 60);
        assert_eq!(issues.uint(leaf(json!(700)), 60, 1, 50), 60);
        assert_eq!(issues.uint(leaf(json!(-1)), 60, 0, 100), 60);
        assert!(issues.bool(leaf(json!("yes")), false));
        assert!(issues.bool(leaf(json!("maybe")), true));
        assert_eq!(
            issues.choice(leaf(json!("OFF")), ApprovalMode::Manual),
            ApprovalMode::Off
        );
        assert_eq!(
            issues.choice(leaf(json!(false)), ApprovalMode::Manual),
            ApprovalMode::Off
        );
        assert_eq!(
            issues.choice(leaf(json!("sometimes")), ApprovalMode::Off),
            ApprovalMode::Off
        );
        let messages: Vec<String> = issues.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "config error: k.v: expected a whole number, got 'abc'",
                "config error: k.v: must be between 1 and 50, got 700",
                "config error: k.v: must be between 0 and 100, got -1",
                "config error: k.v: expected true or false, got 'maybe'",
                "config error: k.v: expected one of manual, off; got 'sometimes'",
            ]
        );
    }

    #[test]
    fn secrets_never_show_their_value() {
        let mut issues = Issues::default();
        assert_eq!(issues.secret(leaf(json!("  "))), None);
        assert_eq!(issues.secret(leaf(json!(" tok "))).unwrap().expose(), "tok");
        assert_eq!(issues.secret(leaf(json!(["hunter2-token"]))), None);
        let message = issues.errors[0].to_string();
        assert!(!message.contains("hunter2"), "{message}");
        assert_eq!(
            message,
            "config error: k.v: expected text, got a list (***)"
        );
    }

    #[test]
    fn floats_urls_and_empty_strings() {
        let mut issues = Issues::default();
        let in_range = |t: f64| t > 0.0 && t <= 1.0;
        assert_eq!(
            issues.float(leaf(json!("0.7")), 0.5, in_range, "in (0, 1]"),
            0.7
        );
        assert_eq!(
            issues.float(leaf(json!(1.5)), 0.5, in_range, "in (0, 1]"),
            0.5
        );
        assert_eq!(issues.string(leaf(json!(""))), None);
        assert_eq!(issues.text(leaf(json!(""))), Some(String::new()));
        assert_eq!(issues.url(leaf(json!("ftp://x"))), None);
        assert_eq!(
            issues.url(leaf(json!("https://x/v1"))),
            Some("https://x/v1".to_owned())
        );
        assert_eq!(issues.errors.len(), 2);
        assert_eq!(issues.errors[0].message, "must be in (0, 1], got 1.5");
    }
}
