//! The records inside the pairing JSON files, in the reference's shapes. Anything that does
//! not have the expected shape (legacy plaintext-keyed entries, hand edits) is kept verbatim
//! as [`Slot::Other`], so rewriting a file never destroys what we do not understand.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::files::JsonObject;

/// One value of a data file: our record, or anything else, preserved as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Slot<T> {
    Known(T),
    Other(Value),
}

/// `{platform}-pending.json` values: `{hash, salt, user_id, user_name, created_at}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingEntry {
    /// `sha256(salt + CODE)`, lowercase hex.
    pub hash: String,
    /// 16 random bytes, lowercase hex.
    pub salt: String,
    pub user_id: String,
    #[serde(default, deserialize_with = "string_or_null")]
    pub user_name: String,
    /// Seconds since the Unix epoch.
    pub created_at: f64,
    /// Fields another version wrote; carried along unchanged.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// `{platform}-approved.json` values (keyed by user id): `{user_name, approved_at}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovedEntry {
    #[serde(default, deserialize_with = "string_or_null")]
    pub user_name: String,
    /// Seconds since the Unix epoch.
    pub approved_at: f64,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl Slot<PendingEntry> {
    /// `created_at` when it is a number; the reference treats anything else as expired.
    pub fn created_at(&self) -> Option<f64> {
        match self {
            Slot::Known(entry) => Some(entry.created_at),
            Slot::Other(value) => value.get("created_at").and_then(Value::as_f64),
        }
    }

    /// The stored hash, for the entry's listing label.
    pub fn hash(&self) -> Option<&str> {
        match self {
            Slot::Known(entry) => Some(&entry.hash),
            Slot::Other(value) => value.get("hash").and_then(Value::as_str),
        }
    }
}

impl<T: Serialize> Slot<T> {
    /// A field as the reference's `info.get(name, "")` would show it.
    pub fn text_field(&self, name: &str) -> String {
        let value = match self {
            Slot::Known(known) => serde_json::to_value(known).ok(),
            Slot::Other(value) => Some(value.clone()),
        };
        match value.as_ref().and_then(|v| v.get(name)) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        }
    }
}

/// A user name written as `null` reads as empty (the reference shows `None` as "").
fn string_or_null<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_default())
}

/// A number in `_rate_limits.json` (timestamps; counters), 0 when absent or not a number,
/// as the reference's `limits.get(key, 0)` arithmetic assumes.
pub fn number(limits: &JsonObject<Value>, key: &str) -> f64 {
    limits.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reference_entries_round_trip_and_odd_ones_survive() {
        let text = r#"{
  "a1": {"hash": "h", "salt": "00", "user_id": "42", "user_name": "bob", "created_at": 10, "note": 1},
  "LEGACYCODE": {"user_id": "7", "created_at": 5.5},
  "junk": [1, 2]
}"#;
        let parsed: indexmap::IndexMap<String, Slot<PendingEntry>> =
            serde_json::from_str(text).unwrap();
        let Slot::Known(known) = &parsed["a1"] else {
            panic!("a reference entry must parse as known: {:?}", parsed["a1"]);
        };
        assert_eq!(known.created_at, 10.0);
        assert_eq!(known.rest.get("note"), Some(&json!(1)));
        assert_eq!(parsed["LEGACYCODE"].created_at(), Some(5.5));
        assert_eq!(parsed["LEGACYCODE"].hash(), None);
        assert_eq!(parsed["junk"].created_at(), None);
        let back = serde_json::to_value(&parsed).unwrap();
        assert_eq!(back["a1"]["note"], json!(1));
        assert_eq!(back["junk"], json!([1, 2]));
        assert_eq!(
            back["LEGACYCODE"],
            json!({"user_id": "7", "created_at": 5.5})
        );
    }
}
