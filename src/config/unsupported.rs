//! Settings hermesd accepts but does not act on yet, and the one warning that names those a
//! configuration sets. A user must never believe a feature is on when it is not: `config
//! check`, `doctor` and the daemon's start-up log all print this warning (it is one of
//! [`super::LoadedConfig::warnings`]), and `config check --strict` fails on it.
//!
//! Two kinds of keys end up here: whole Hermes sections and keys listed in
//! [`super::known_keys`] (accepted so a Hermes `config.yaml` loads, never read), and the typed
//! keys below, which are validated like any other but that no part of hermesd reads yet. The
//! full table, implemented and accepted-but-ignored, is `config/KEYS.md`; a test keeps it in
//! step with these lists. When a key gets implemented it leaves its list in the same commit.

use serde_json::Value;

/// Typed keys that are validated (a bad value is still an error) but have no effect yet.
/// `*` stands for any one key (a platform name).
#[rustfmt::skip]
pub const VALIDATED_NOT_HONOURED: &[&str] = &[
    "agent.clarify_timeout", "agent.gateway_auto_continue_freshness",
    "agent.gateway_notify_interval",
    "display.busy_steer_ack_enabled", "display.ephemeral_system_ttl",
    "display.interim_assistant_messages", "display.platforms.*.interim_assistant_messages",
    "display.platforms.*.show_reasoning", "display.platforms.*.tool_preview_length",
    "display.show_reasoning", "display.tool_preview_length",
    "gateway.platforms.*.gateway_restart_notification",
    "gateway.streaming.fresh_final_after_seconds", "gateway.streaming.transport",
    "platforms.*.gateway_restart_notification", "streaming.fresh_final_after_seconds",
    "streaming.transport",
];

/// Keys that are bookkeeping, not settings: never reported.
const NOT_A_SETTING: &[&str] = &["_config_version"];

/// The words every report of these keys carries, so operators (and tests) can find it.
pub const NOT_SUPPORTED_YET: &str = "not supported by hermesd yet";

/// Every key of [`VALIDATED_NOT_HONOURED`] that `tree` (config.yaml plus the `HERMES__*`
/// overrides, before defaults) sets to something other than null, as dotted paths.
pub fn validated_keys_set(tree: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for pattern in VALIDATED_NOT_HONOURED {
        let segments: Vec<&str> = pattern.split('.').collect();
        collect(tree, &segments, String::new(), &mut found);
    }
    found
}

/// Whether a value asks for anything: null and an empty mapping (`mcp_servers: {}`, as
/// Hermes writes its defaults) do not.
pub fn is_set(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Object(map) => !map.is_empty(),
        _ => true,
    }
}

fn collect(node: &Value, segments: &[&str], path: String, found: &mut Vec<String>) {
    let Some((first, rest)) = segments.split_first() else {
        if is_set(node) {
            found.push(path);
        }
        return;
    };
    let Some(map) = node.as_object() else {
        return;
    };
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    if *first == "*" {
        for (key, child) in map {
            collect(child, rest, join(key), found);
        }
    } else if let Some(child) = map.get(*first) {
        collect(child, rest, join(first), found);
    }
}

/// The one warning naming every accepted-but-ignored key that is set (sorted, once each), or
/// nothing when there is none.
pub fn warning(mut keys: Vec<String>) -> Option<String> {
    keys.retain(|key| !NOT_A_SETTING.contains(&key.as_str()));
    keys.sort();
    keys.dedup();
    if keys.is_empty() {
        return None;
    }
    Some(format!(
        "{} {} set but {NOT_SUPPORTED_YET}, so without effect: {}",
        keys.len(),
        if keys.len() == 1 {
            "setting is"
        } else {
            "settings are"
        },
        keys.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_typed_keys_that_are_set_including_per_platform_ones() {
        let tree = json!({
            "agent": {"gateway_notify_interval": 60, "max_turns": 10, "clarify_timeout": null},
            "display": {"platforms": {"telegram": {"show_reasoning": true, "streaming": true}}},
            "platforms": {"slack": {"gateway_restart_notification": false}},
            "streaming": "not a mapping",
        });
        let mut keys = validated_keys_set(&tree);
        keys.sort();
        assert_eq!(
            keys,
            [
                "agent.gateway_notify_interval",
                "display.platforms.telegram.show_reasoning",
                "platforms.slack.gateway_restart_notification",
            ]
        );
    }

    #[test]
    fn one_warning_names_every_key_once_and_skips_bookkeeping() {
        assert_eq!(warning(vec!["_config_version".into()]), None);
        let text = warning(vec!["stt".into(), "lsp".into(), "stt".into()]).unwrap();
        assert_eq!(
            text,
            "2 settings are set but not supported by hermesd yet, so without effect: \
             lsp, stt"
        );
    }

    #[test]
    fn lists_are_sorted_without_duplicates() {
        assert!(
            VALIDATED_NOT_HONOURED
                .windows(2)
                .all(|pair| pair[0] < pair[1])
        );
    }
}

#[cfg(test)]
mod load_tests {
    use super::super::tests::{load_err, load_ok};

    #[test]
    fn typed_keys_nothing_reads_are_named_with_the_ignored_sections() {
        let loaded = load_ok(
            "honcho: {enabled: true}\nagent: {gateway_notify_interval: 60}\n_config_version: 19\n",
            &[("HERMES__STREAMING__TRANSPORT", "edit")],
        );
        assert_eq!(
            loaded.warnings,
            [
                "3 settings are set but not supported by hermesd yet, so without effect: \
              agent.gateway_notify_interval, honcho, streaming.transport"
            ]
        );
        // Still validated: the value is typed as ever.
        assert_eq!(loaded.config.agent.gateway_notify_interval_secs, 60);
        let errors = load_err("agent: {gateway_notify_interval: soon}\n", &[]);
        assert!(
            errors[0].contains("agent.gateway_notify_interval"),
            "{errors:?}"
        );
    }

    #[test]
    fn nothing_set_means_no_warning() {
        let loaded = load_ok("tts: null\nmcp_servers: {}\nagent: {max_turns: 5}\n", &[]);
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    }
}
