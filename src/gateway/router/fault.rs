//! A test-only fault hook: in debug builds (what `cargo test` runs), a turn whose text
//! contains the value of `HERMESD_TEST_PANIC_ON` panics after the slot marks it running, so
//! end-to-end tests can prove a panicking turn never wedges its session. Release builds
//! compile it to nothing.

use std::collections::BTreeMap;

/// The environment variable naming the trigger text.
#[cfg(debug_assertions)]
const TRIGGER: &str = "HERMESD_TEST_PANIC_ON";

#[cfg(debug_assertions)]
pub(super) fn maybe_panic(env: &BTreeMap<String, String>, text: &str) {
    if let Some(marker) = env.get(TRIGGER).filter(|m| !m.is_empty())
        && text.contains(marker.as_str())
    {
        panic!("test fault: this turn panics on purpose ({TRIGGER})");
    }
}

#[cfg(not(debug_assertions))]
pub(super) fn maybe_panic(_env: &BTreeMap<String, String>, _text: &str) {}
