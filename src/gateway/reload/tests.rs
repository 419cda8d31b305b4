use std::collections::BTreeMap;

use super::*;
use crate::config::{FallbackProvider, ResetMode, Secret, ToolProgress};

fn loaded(config: Config, env: &[(&str, &str)]) -> LoadedConfig {
    LoadedConfig {
        config,
        warnings: Vec::new(),
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
    }
}

fn base() -> Config {
    let mut config = Config::default();
    config.platforms.telegram.enabled = true;
    config.platforms.telegram.token = Some(Secret::new("111:old-telegram-token"));
    config.api_server.key = Some(Secret::new("old-api-server-key-0123"));
    config.model.provider = "openai".to_owned();
    config.model.default = Some("model-a".to_owned());
    config
}

#[test]
fn nothing_changed_is_empty() {
    let old = loaded(base(), &[("TELEGRAM_ALLOWED_USERS", "1")]);
    assert!(changes(&old, &old.clone()).is_empty());
}

#[test]
fn an_allowlist_from_the_environment_is_applied_as_authorization() {
    let old = loaded(base(), &[]);
    let new = loaded(base(), &[("TELEGRAM_ALLOWED_USERS", "9001")]);
    let found = changes(&old, &new);
    assert_eq!(found.applied, vec!["auth.telegram.allowed_users"]);
    assert!(found.need_restart.is_empty(), "{found:?}");
}

#[test]
fn an_allowlist_in_config_is_reported_once_as_authorization() {
    let old = loaded(base(), &[]);
    let mut config = base();
    config.platforms.telegram.allowed_users = vec!["42".to_owned()];
    config.gateway.allow_all_users = true;
    let found = changes(&old, &loaded(config, &[]));
    assert_eq!(
        found.applied,
        vec![
            "auth.gateway.allow_all_users",
            "auth.telegram.allowed_users"
        ]
    );
    assert!(found.need_restart.is_empty(), "{found:?}");
}

#[test]
fn model_fallbacks_display_and_resets_are_applied() {
    let old = loaded(base(), &[]);
    let mut config = base();
    config.model.default = Some("model-b".to_owned());
    config.model.api_key = Some(Secret::new("new-model-key-000"));
    config.fallback_providers.push(FallbackProvider {
        provider: "openrouter".to_owned(),
        model: "backup".to_owned(),
        api_mode: None,
        base_url: None,
        api_key: None,
    });
    config.display.tool_progress = ToolProgress::Off;
    config.streaming.enabled = true;
    config.session_reset.mode = ResetMode::Idle;
    config.agent.max_turns = 7;
    let found = changes(&old, &loaded(config, &[]));
    assert_eq!(
        found.applied,
        vec![
            "agent.max_turns",
            "display.tool_progress",
            "fallback_providers",
            "model.api_key",
            "model.default",
            "session_reset.mode",
            "streaming.enabled",
        ]
    );
    assert!(found.need_restart.is_empty(), "{found:?}");
}

#[test]
fn a_fallback_key_alone_is_a_change() {
    let fallback = |key: &str| FallbackProvider {
        provider: "openrouter".to_owned(),
        model: "backup".to_owned(),
        api_mode: None,
        base_url: None,
        api_key: Some(Secret::new(key)),
    };
    let mut a = base();
    a.fallback_providers.push(fallback("fallback-key-one"));
    let mut b = base();
    b.fallback_providers.push(fallback("fallback-key-two"));
    let found = changes(&loaded(a, &[]), &loaded(b, &[]));
    assert_eq!(found.applied, vec!["fallback_providers"]);
}

#[test]
fn tokens_ports_keys_switches_and_adapter_settings_need_a_restart() {
    let old = loaded(base(), &[("HERMESD_DRAIN_TIMEOUT_SECS", "30")]);
    let mut config = base();
    config.platforms.telegram.token = Some(Secret::new("222:new-telegram-token"));
    config.platforms.discord.enabled = true;
    config.api_server.port = 9999;
    config.api_server.key = Some(Secret::new("new-api-server-key-0123"));
    config
        .platforms
        .telegram
        .extra
        .0
        .insert("base_url".to_owned(), serde_json::json!("http://x"));
    config.approvals.timeout_secs = 5;
    config.group_sessions_per_user = false;
    let new = loaded(config, &[("HERMESD_DRAIN_TIMEOUT_SECS", "5")]);
    let found = changes(&old, &new);
    assert!(found.applied.is_empty(), "{found:?}");
    assert_eq!(
        found.need_restart,
        vec![
            "HERMESD_DRAIN_TIMEOUT_SECS",
            "api_server.key",
            "api_server.port",
            "approvals.timeout",
            "group_sessions_per_user",
            "platforms.discord.enabled",
            "platforms.telegram.extra.base_url",
            "platforms.telegram.token",
        ]
    );
    let shown = format!("{found:?}");
    for secret in [
        "new-telegram-token",
        "new-api-server-key",
        "old-telegram-token",
    ] {
        assert!(!shown.contains(secret), "{shown}");
    }
}

#[test]
fn extra_keys_authorization_reads_count_as_authorization() {
    let old = loaded(base(), &[]);
    let mut config = base();
    config
        .platforms
        .telegram
        .extra
        .0
        .insert("allow_from".to_owned(), serde_json::json!(["77"]));
    let found = changes(&old, &loaded(config, &[]));
    assert_eq!(found.applied, vec!["auth.telegram.allowed_users"]);
    assert!(found.need_restart.is_empty(), "{found:?}");
}

#[test]
fn photo_and_voice_settings_are_applied_live() {
    let old = loaded(base(), &[]);
    let mut config = base();
    config.media.stt.provider = "groq".to_owned();
    config.media.supports_vision = Some(true);
    let found = changes(&old, &loaded(config, &[]));
    assert_eq!(
        found.applied,
        vec!["media.stt.provider", "media.supports_vision"]
    );
    assert!(found.need_restart.is_empty(), "{found:?}");
}

#[test]
fn per_tick_cron_settings_apply_live_and_the_pool_size_needs_a_restart() {
    let old = loaded(base(), &[]);
    let mut config = base();
    config.cron.tick_seconds = 5;
    config.cron.max_parallel_jobs = 9;
    let found = changes(&old, &loaded(config, &[]));
    assert_eq!(found.applied, vec!["cron.tick_seconds"]);
    assert_eq!(found.need_restart, vec!["cron.max_parallel_jobs"]);
}
