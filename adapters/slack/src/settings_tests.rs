use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::*;

const BOT: &str = "xoxb-secret-bot-token-123";
const APP: &str = "xapp-secret-app-token-456";

fn extra(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn defaults_follow_the_reference() {
    let s = Settings::from_config(BOT, APP, &Map::new(), &BTreeMap::new()).unwrap();
    assert_eq!(s.api_base_url, DEFAULT_API_BASE_URL);
    assert!(s.reply_in_thread);
    assert!(s.dm_top_level_threads_as_sessions);
    assert!(s.require_mention);
    assert!(!s.strict_mention);
    assert_eq!(s.allow_bots, AllowBots::None);
    assert!(s.reactions);
    assert_eq!(s.typing_status_text, "is thinking...");
    assert_eq!(s.max_attachment_bytes, 20 * 1024 * 1024);
}

#[test]
fn env_wins_over_extra_when_set_and_non_empty() {
    let extra = extra(json!({
        "require_mention": true, "allow_bots": "none",
        "free_response_channels": ["C1", "C2"], "allowed_channels": "C9",
        "mention_patterns": ["^hermes\\b"], "reply_in_thread": false,
        "api_base_url": "http://127.0.0.1:9/api/",
    }));
    let env = env(&[
        ("SLACK_REQUIRE_MENTION", "false"),
        ("SLACK_ALLOW_BOTS", "mentions"),
        ("SLACK_FREE_RESPONSE_CHANNELS", "C3, C4"),
        ("SLACK_ALLOWED_CHANNELS", "  "),
        ("SLACK_MENTION_PATTERNS", "[\"hey bot\"]"),
        ("HERMES_HOME", "/srv/hermes"),
    ]);
    let s = Settings::from_config(BOT, APP, &extra, &env).unwrap();
    assert!(!s.require_mention);
    assert_eq!(s.allow_bots, AllowBots::Mentions);
    assert_eq!(
        s.free_response_channels.into_iter().collect::<Vec<_>>(),
        ["C3", "C4"]
    );
    // An empty env var does not override the config key.
    assert_eq!(s.allowed_channels.into_iter().collect::<Vec<_>>(), ["C9"]);
    assert_eq!(s.mention_patterns, ["hey bot"]);
    assert!(!s.reply_in_thread);
    assert_eq!(s.api_base_url, "http://127.0.0.1:9/api");
    assert_eq!(s.cache_dir, PathBuf::from("/srv/hermes/cache/slack"));
}

#[test]
fn every_error_is_reported_naming_its_key() {
    let extra = extra(json!({
        "api_base_url": "http://slack.example.com/api",
        "reply_in_thread": "perhaps",
        "mention_patterns": ["(unclosed"],
        "max_attachment_bytes": -5,
    }));
    let env = env(&[("SLACK_ALLOW_BOTS", "some")]);
    let errors = Settings::from_config(BOT, "xoxb-wrong-kind", &extra, &env).unwrap_err();
    let joined = errors.join("\n");
    for needle in [
        "SLACK_APP_TOKEN",
        "slack.extra.api_base_url",
        "slack.extra.reply_in_thread",
        "slack.extra.mention_patterns",
        "slack.extra.max_attachment_bytes",
        "SLACK_ALLOW_BOTS",
    ] {
        assert!(joined.contains(needle), "{needle} missing from {joined}");
    }
    assert_eq!(errors.len(), 6, "{joined}");
    assert!(
        !joined.contains("xoxb-wrong-kind"),
        "a token leaked: {joined}"
    );
}

#[test]
fn missing_tokens_are_errors() {
    let errors = Settings::from_config("", "", &Map::new(), &BTreeMap::new()).unwrap_err();
    assert_eq!(errors.len(), 2);
}

#[test]
fn debug_never_shows_tokens() {
    let s = Settings::from_config(BOT, APP, &Map::new(), &BTreeMap::new()).unwrap();
    let shown = format!("{s:?}");
    assert!(!shown.contains(BOT) && !shown.contains(APP), "{shown}");
    assert!(shown.contains("***"));
}

#[test]
fn socket_timings_come_from_extra_and_must_be_positive() {
    let s = Settings::from_config(BOT, APP, &Map::new(), &BTreeMap::new()).unwrap();
    assert_eq!(s.socket_ping_interval, Duration::from_secs(10));
    assert_eq!(s.socket_silence_window, Duration::from_secs(30));
    let short = extra(json!({"socket_ping_interval_seconds": 0.5, "socket_silence_seconds": "2"}));
    let s = Settings::from_config(BOT, APP, &short, &BTreeMap::new()).unwrap();
    assert_eq!(s.socket_ping_interval, Duration::from_millis(500));
    assert_eq!(s.socket_silence_window, Duration::from_secs(2));
    let bad = extra(json!({"socket_ping_interval_seconds": 0, "socket_silence_seconds": "soon"}));
    let errors = Settings::from_config(BOT, APP, &bad, &BTreeMap::new()).unwrap_err();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].contains("slack.extra.socket_ping_interval_seconds"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("slack.extra.socket_silence_seconds"),
        "{errors:?}"
    );
}
