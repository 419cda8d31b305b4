//! The routing index: which session each session key is talking in, persisted in state.db's
//! `gateway_routing` table (Hermes's primary store) so a restart keeps every conversation.
//!
//! Entries are Hermes `SessionEntry` dicts. hermesd reads and writes the fields it uses and
//! keeps every other field it finds (a Python gateway's token counters, flags) untouched.
//! Times are ISO-8601 without a zone like Python's; hermesd writes UTC.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Map, Value, json};

use crate::state::{Store, StoreResult};

/// One routing entry.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteEntry {
    pub session_key: String,
    pub session_id: String,
    /// Epoch seconds of the last activity (the reset policies measure from it).
    pub updated_at: f64,
    /// The rest of the Hermes dict (origin, counters, flags), kept as found.
    pub fields: Map<String, Value>,
}

impl RouteEntry {
    pub fn new(session_key: &str, session_id: &str, now: f64, origin: Value) -> Self {
        let mut fields = Map::new();
        fields.insert("created_at".into(), Value::String(iso_utc(now)));
        fields.insert("origin".into(), origin.clone());
        for key in ["platform", "chat_type"] {
            if let Some(v) = origin.get(key) {
                fields.insert(key.into(), v.clone());
            }
        }
        if let Some(name) = origin.get("chat_name").filter(|v| !v.is_null()) {
            fields.insert("display_name".into(), name.clone());
        }
        Self {
            session_key: session_key.to_owned(),
            session_id: session_id.to_owned(),
            updated_at: now,
            fields,
        }
    }

    /// Reads a stored Hermes dict; `None` when it has no usable session id.
    pub fn from_json(session_key: &str, value: &Value) -> Option<Self> {
        value.as_object()?;
        Self::from_value(session_key, value.clone())
    }

    /// [`RouteEntry::from_json`] taking the dict by value, so nothing is copied.
    fn from_value(session_key: &str, value: Value) -> Option<Self> {
        let Value::Object(mut fields) = value else {
            return None;
        };
        let session_id = match fields.remove("session_id")? {
            Value::String(id) => id,
            _ => return None,
        };
        fields.remove("session_key");
        let updated_at = fields
            .remove("updated_at")
            .and_then(|v| v.as_str().and_then(parse_iso))
            .unwrap_or(0.0);
        Some(Self {
            session_key: session_key.to_owned(),
            session_id,
            updated_at,
            fields,
        })
    }

    pub fn to_json(&self) -> Value {
        let mut map = self.fields.clone();
        map.insert("session_key".into(), json!(self.session_key));
        map.insert("session_id".into(), json!(self.session_id));
        map.insert("updated_at".into(), json!(iso_utc(self.updated_at)));
        Value::Object(map)
    }

    pub fn flag(&self, name: &str) -> bool {
        self.fields
            .get(name)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    pub fn set(&mut self, name: &str, value: Value) {
        self.fields.insert(name.to_owned(), value);
    }

    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.fields.get(name).and_then(Value::as_str)
    }
}

/// An entry as the index holds it: the fields hermesd reads on every event typed, the rest
/// of the Hermes dict as its compact JSON text. A parsed `serde_json` map costs about 1.5 KB
/// per entry (a tree node and a `String` per key and value); the text is a tenth of that,
/// which is what keeps a gateway with 10,000 conversations within its memory target. The
/// text is parsed again only when an entry is read whole (`get`, a move).
#[derive(Debug)]
struct Packed {
    session_id: Box<str>,
    updated_at: f64,
    /// `serde_json` text of [`RouteEntry::fields`]: written by `serde_json` from a map, so it
    /// parses back to the same map (keys sorted either way, floats exact with
    /// `float_roundtrip`).
    fields: Box<str>,
}

impl Packed {
    fn pack(entry: RouteEntry) -> (String, Self) {
        let packed = Self {
            session_id: entry.session_id.into_boxed_str(),
            updated_at: entry.updated_at,
            fields: Value::Object(entry.fields).to_string().into_boxed_str(),
        };
        (entry.session_key, packed)
    }

    fn unpack(&self, session_key: &str) -> RouteEntry {
        let fields = match serde_json::from_str::<Map<String, Value>>(&self.fields) {
            Ok(map) => map,
            // Not expected: the text is a map serde_json wrote, no deeper than the stored
            // dict it came from (which serde_json read under the same nesting limit).
            Err(e) => {
                tracing::error!(session_key, error = %e, "packed routing entry did not parse back");
                Map::new()
            }
        };
        RouteEntry {
            session_key: session_key.to_owned(),
            session_id: self.session_id.to_string(),
            updated_at: self.updated_at,
            fields,
        }
    }
}

/// The in-memory index, loaded once at start and written through on every change.
#[derive(Debug)]
pub struct RoutingIndex {
    scope: String,
    entries: Mutex<HashMap<String, Packed>>,
}

impl RoutingIndex {
    /// Loads the entries stored for `scope` (Hermes: the resolved `sessions` directory).
    pub async fn load(store: &Store, scope: String) -> StoreResult<Self> {
        let stored = store.load_routing(&scope).await?;
        let mut entries = HashMap::with_capacity(stored.len());
        // Each stored tree is dropped as soon as its entry is packed.
        for (key, value) in stored {
            if key.starts_with('_') {
                continue;
            }
            if let Some(entry) = RouteEntry::from_value(&key, value) {
                let (key, packed) = Packed::pack(entry);
                entries.insert(key, packed);
            }
        }
        entries.shrink_to_fit();
        Ok(Self {
            scope,
            entries: Mutex::new(entries),
        })
    }

    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// Reads the stored entry of `key` again (PostgreSQL: another instance may have routed
    /// the session to a new session id since this one loaded it).
    pub async fn reload_key(&self, store: &Store, key: &str) -> StoreResult<()> {
        let entry = store
            .load_routing_entry(&self.scope, key)
            .await?
            .and_then(|value| RouteEntry::from_value(key, value));
        let mut entries = self.lock();
        match entry {
            Some(entry) => {
                let (key, packed) = Packed::pack(entry);
                entries.insert(key, packed)
            }
            None => entries.remove(key),
        };
        Ok(())
    }

    pub fn get(&self, key: &str) -> Option<RouteEntry> {
        self.lock().get(key).map(|packed| packed.unpack(key))
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key currently routed to `session_id`, if any.
    pub fn key_for_session(&self, session_id: &str) -> Option<String> {
        self.lock()
            .iter()
            .find(|(_, packed)| &*packed.session_id == session_id)
            .map(|(key, _)| key.clone())
    }

    /// Stores `entry` durably, then in memory.
    pub async fn save(&self, store: &Store, entry: RouteEntry) -> StoreResult<()> {
        store
            .save_routing_entry(&self.scope, &entry.session_key, &entry.to_json())
            .await?;
        let (key, packed) = Packed::pack(entry);
        self.lock().insert(key, packed);
        Ok(())
    }

    /// Moves every conversation routed to group chat `old` on `platform` to chat `new` (a
    /// group that became a supergroup): same sessions, keys and origin naming the new chat.
    /// Returns how many moved.
    pub async fn move_chat(
        &self,
        store: &Store,
        platform: &str,
        old: &str,
        new: &str,
    ) -> StoreResult<usize> {
        let marker = format!(":{platform}:group:{old}");
        let moving: Vec<RouteEntry> = self
            .lock()
            .iter()
            .filter(|(key, _)| {
                key.find(&marker).is_some_and(|at| {
                    let rest = &key[at + marker.len()..];
                    rest.is_empty() || rest.starts_with(':')
                })
            })
            .map(|(key, packed)| packed.unpack(key))
            .collect();
        for mut entry in moving.iter().cloned() {
            let old_key = entry.session_key.clone();
            entry.session_key = old_key.replacen(&marker, &format!(":{platform}:group:{new}"), 1);
            if let Some(origin) = entry
                .fields
                .get_mut("origin")
                .and_then(Value::as_object_mut)
            {
                origin.insert("chat_id".into(), Value::String(new.to_owned()));
            }
            self.save(store, entry).await?;
            store.delete_routing_entry(&self.scope, &old_key).await?;
            self.lock().remove(&old_key);
        }
        Ok(moving.len())
    }

    /// Moves the entry under `old` to `new` (same session, new key); false when `old` has
    /// none.
    pub async fn rename(&self, store: &Store, old: &str, new: &str) -> StoreResult<bool> {
        let Some(mut entry) = self.get(old) else {
            return Ok(false);
        };
        entry.session_key = new.to_owned();
        self.save(store, entry).await?;
        store.delete_routing_entry(&self.scope, old).await?;
        self.lock().remove(old);
        Ok(true)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Packed>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `2026-11-29T17:44:25.123456` (UTC, no zone, microseconds as Python's `isoformat()`).
pub fn iso_utc(epoch: f64) -> String {
    let secs = epoch.floor() as i64;
    let micros = ((epoch - secs as f64) * 1e6).round().min(999_999.0) as u32;
    let (y, m, d) = crate::clock::civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.ffffff]` (read as UTC); `None` if malformed.
pub fn parse_iso(text: &str) -> Option<f64> {
    let (date, time) = text.split_once('T').or_else(|| text.split_once(' '))?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let time = time.trim_end_matches('Z');
    let time = time.split(['+']).next()?;
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    let frac: f64 = format!("0.{frac}").parse().ok()?;
    let days = days_from_civil(y, m, day);
    Some((days * 86_400 + hh * 3600 + mm * 60 + ss) as f64 + frac)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_round_trips() {
        for epoch in [0.0, 1_764_438_265.25, 1_900_000_000.999_999] {
            let text = iso_utc(epoch);
            let back = parse_iso(&text).unwrap();
            assert!((back - epoch).abs() < 1e-5, "{epoch} -> {text} -> {back}");
        }
        assert_eq!(iso_utc(1_764_438_265.0), "2025-11-29T17:44:25.000000");
        assert_eq!(parse_iso("garbage"), None);
    }

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let stored = json!({
            "session_key": "agent:main:telegram:dm:42",
            "session_id": "20261129_174425_b88c7b79",
            "updated_at": "2026-11-29T17:44:25.000000",
            "input_tokens": 12,
            "suspended": false,
        });
        let entry = RouteEntry::from_json("agent:main:telegram:dm:42", &stored).unwrap();
        assert_eq!(entry.session_id, "20261129_174425_b88c7b79");
        let back = entry.to_json();
        assert_eq!(back["input_tokens"], 12);
        assert_eq!(back["updated_at"], stored["updated_at"]);
        assert!(RouteEntry::from_json("k", &json!({"no": "id"})).is_none());
        assert!(RouteEntry::from_json("k", &json!({"session_id": 7})).is_none());
        assert!(RouteEntry::from_json("k", &json!(["session_id"])).is_none());
    }

    #[test]
    fn a_packed_entry_reads_back_as_it_was_stored() {
        let stored = json!({
            "session_key": "agent:main:telegram:group:-100:7",
            "session_id": "20261129_174425_b88c7b79",
            "created_at": "2026-11-29T17:44:25.000000",
            "updated_at": "2026-11-29T17:44:26.500000",
            "origin": {"platform": "telegram", "chat_id": "-100", "chat_name": "Café ☕ \"quoted\"",
                       "thread": null, "nested": {"list": [1, -2, 3.000_000_000_000_1, 1e300]}},
            "input_tokens": u64::MAX,
            "cost": 0.1,
            "suspended": false,
        });
        let entry = RouteEntry::from_json("agent:main:telegram:group:-100:7", &stored).unwrap();
        let (key, packed) = Packed::pack(entry.clone());
        assert_eq!(key, entry.session_key);
        assert!(packed.fields.len() < 400, "{}", packed.fields);
        let back = packed.unpack(&key);
        assert_eq!(back, entry);
        assert_eq!(back.to_json(), stored);
        assert_eq!(back.to_json().to_string(), entry.to_json().to_string());
    }
}
