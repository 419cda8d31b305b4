//! The shapes a raw configuration value can take whatever was written: a mapping or not, a
//! list or not, and the keys no field claimed. Every section's raw type (`raw.rs` and the
//! section modules it composes) is built from these.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// Keys of a mapping that no field claimed, with their values.
pub type Unknown = BTreeMap<String, Value>;

/// A mapping-valued key: the parsed mapping, or whatever non-mapping value was written there.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Section<T> {
    Map(T),
    Invalid(Value),
}

/// A list-valued key whose items have structure (`fallback_providers`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ListOf<T> {
    List(Vec<T>),
    Invalid(Value),
}
