//! Load-level tests of the platform blocks, the API server and the admin endpoint.

use serde_json::json;

use super::tests::{load_err, load_ok};
use super::*;

#[test]
fn allowlists_accept_comma_strings_and_yaml_lists() {
    let loaded = load_ok(
        "platforms:\n  discord:\n    allowed_users: [11, \"22\"]\ngateway:\n  allowed_users: \"a, b\"\n",
        &[("TELEGRAM_ALLOWED_USERS", " 42 ,77,")],
    );
    assert_eq!(loaded.config.platforms.telegram.allowed_users, ["42", "77"]);
    assert_eq!(loaded.config.platforms.discord.allowed_users, ["11", "22"]);
    assert_eq!(loaded.config.gateway.allowed_users, ["a", "b"]);
}

#[test]
fn platform_blocks_merge_across_locations() {
    let yaml = "\
telegram:
  reply_to_mode: all
  allowed_chats: \"-1\"
  extra: {top: 1}
platforms:
  telegram:
    enabled: true
    token: platforms-token
    reply_to_mode: off
    extra: {shared: platforms, mid: 2}
gateway:
  platforms:
    telegram:
      typing_indicator: false
      extra: {shared: gateway, low: 3}
";
    let telegram = load_ok(yaml, &[]).config.platforms.telegram;
    assert!(telegram.enabled);
    assert_eq!(telegram.token.unwrap().expose(), "platforms-token");
    assert_eq!(telegram.reply_to_mode, ReplyToMode::All);
    assert!(!telegram.typing_indicator);
    let extra: Vec<(&str, &serde_json::Value)> = telegram
        .extra
        .0
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    assert_eq!(
        extra,
        [
            ("allowed_chats", &json!("-1")),
            ("low", &json!(3)),
            ("mid", &json!(2)),
            ("shared", &json!("platforms")),
            ("top", &json!(1)),
        ]
    );
}

#[test]
fn env_tokens_enable_platforms_unless_disabled_explicitly() {
    let disabled = "telegram:\n  enabled: false\n";
    let config = load_ok(disabled, &[("TELEGRAM_BOT_TOKEN", "t")]).config;
    assert!(!config.platforms.telegram.enabled);
    assert!(config.platforms.telegram.token.is_some());

    let loaded = load_ok("discord:\n  token: yaml-token\n", &[]);
    assert!(!loaded.config.platforms.discord.enabled);
    assert_eq!(
        loaded.warnings,
        ["discord.token is set but discord is not enabled; add `enabled: true` to use it"]
    );

    let errors = load_err("", &[("SLACK_BOT_TOKEN", "xoxb")]);
    assert_eq!(
        errors,
        [
            "config error: slack.app_token: required when slack is enabled (Socket Mode); set \
          SLACK_APP_TOKEN in .env"
        ]
    );
}

#[test]
fn api_server_and_admin_rules() {
    let key = ("API_SERVER_KEY", "0123456789abcdef");
    assert!(load_ok("", &[key]).config.api_server.enabled);
    let off = "platforms:\n  api_server:\n    enabled: false\n";
    assert!(!load_ok(off, &[key]).config.api_server.enabled);
    let in_extra = "platforms:\n  api_server:\n    enabled: true\n    extra: {key: 0123456789abcdef, port: 9100}\n";
    let api = load_ok(in_extra, &[]).config.api_server;
    assert_eq!((api.enabled, api.port), (true, 9100));

    let errors = load_err("admin:\n  host: 0.0.0.0\n  port: 8642\n", &[key]);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].starts_with("config error: admin.host: must be a loopback address"));
    assert_eq!(
        errors[1],
        "config error: admin.port: conflicts with api_server.port (both 8642)"
    );
    for host in ["localhost", "::1", "[::1]", "127.0.0.2"] {
        let yaml = format!("admin:\n  host: \"{host}\"\n");
        assert_eq!(load_ok(&yaml, &[]).config.admin.host, host);
    }
}

#[test]
fn gateway_nested_settings_are_a_fallback() {
    let yaml = "\
group_sessions_per_user: false
gateway:
  group_sessions_per_user: true
  thread_sessions_per_user: true
  session_reset: {mode: idle, idle_minutes: 30}
  streaming: {mode: edit}
";
    let config = load_ok(yaml, &[]).config;
    assert!(!config.group_sessions_per_user);
    assert!(config.thread_sessions_per_user);
    assert_eq!(config.session_reset.mode, ResetMode::Idle);
    assert_eq!(config.session_reset.idle_minutes, 30);
    assert!(config.streaming.enabled, "`mode` implies enabled");
    assert_eq!(config.streaming.transport, StreamingTransport::Edit);
    let errors = load_err("gateway:\n  session_reset: {mode: weekly}\n", &[]);
    assert_eq!(
        errors,
        [
            "config error: gateway.session_reset.mode: expected one of none, idle, daily, both; got 'weekly'"
        ]
    );
}

#[test]
fn the_webhook_block_and_its_env_vars_as_hermes_reads_them() {
    // Off by default, even with routes written.
    let yaml =
        "platforms:\n  webhook:\n    extra:\n      port: 9000\n      routes: {a: {secret: s}}\n";
    let off = load_ok(yaml, &[]).config.platforms.webhook;
    assert!(!off.enabled);
    assert_eq!(off.extra.get("port"), Some(&json!(9000)));
    // WEBHOOK_ENABLED turns it on; WEBHOOK_PORT and WEBHOOK_SECRET go into `extra`.
    let on = load_ok(
        yaml,
        &[
            ("WEBHOOK_ENABLED", "true"),
            ("WEBHOOK_PORT", "8700"),
            ("WEBHOOK_SECRET", "env-secret"),
        ],
    )
    .config
    .platforms
    .webhook;
    assert!(on.enabled);
    assert_eq!(on.extra.get("port"), Some(&json!("8700")));
    assert_eq!(on.extra.get("secret"), Some(&json!("env-secret")));
    assert!(on.extra.get("routes").is_some());
    // The block also counts under gateway.platforms; a typo next to it is reported.
    let nested = load_ok(
        "gateway:\n  platforms:\n    webhook:\n      enabled: true\n      colour: red\n",
        &[],
    );
    assert!(nested.config.platforms.webhook.enabled);
    assert!(
        nested
            .warnings
            .iter()
            .any(|w| w.contains("gateway.platforms.webhook.colour")),
        "{:?}",
        nested.warnings
    );
}

#[test]
fn whatsapp_cloud_is_on_with_both_variables_as_hermes_reads_it() {
    let both = [
        ("WHATSAPP_CLOUD_PHONE_NUMBER_ID", "106540352242922"),
        ("WHATSAPP_CLOUD_ACCESS_TOKEN", "EAAG-token"),
        ("WHATSAPP_CLOUD_ALLOWED_USERS", "+49 151 1, 4915112"),
    ];
    let on = load_ok("", &both).config.platforms.whatsapp_cloud;
    assert!(on.enabled);
    assert_eq!(on.allowed_users, ["+49 151 1", "4915112"]);
    assert_eq!(
        on.token, None,
        "the access token stays with the adapter's settings"
    );
    // One variable alone is not enough; `enabled: false` beats both.
    assert!(
        !load_ok("", &both[..1])
            .config
            .platforms
            .whatsapp_cloud
            .enabled
    );
    let off = load_ok("platforms:\n  whatsapp_cloud:\n    enabled: false\n", &both);
    assert!(!off.config.platforms.whatsapp_cloud.enabled);
    // The block's extra goes to the adapter; a `token` there is pointed at the right key.
    let block = load_ok(
        "platforms:\n  whatsapp_cloud:\n    enabled: true\n    token: t\n    extra: {phone_number_id: '1'}\n",
        &[],
    );
    let wa = &block.config.platforms.whatsapp_cloud;
    assert!(wa.enabled);
    assert_eq!(wa.extra.get("phone_number_id"), Some(&json!("1")));
    assert!(
        block
            .warnings
            .iter()
            .any(|w| w.contains("extra.access_token")),
        "{:?}",
        block.warnings
    );
}

/// Signal has no bot token: its daemon address with its account enable it (as Hermes reads
/// `SIGNAL_HTTP_URL` and `SIGNAL_ACCOUNT`), and both land in `extra` for the adapter.
#[test]
fn signal_is_enabled_by_its_daemon_and_account() {
    let both = [
        ("SIGNAL_HTTP_URL", "http://127.0.0.1:8080"),
        ("SIGNAL_ACCOUNT", "+15550001"),
        ("SIGNAL_ALLOWED_USERS", "+15550002, +15550003"),
    ];
    let loaded = load_ok("", &both);
    let signal = &loaded.config.platforms.signal;
    assert!(signal.enabled);
    assert_eq!(signal.token, None);
    assert_eq!(
        signal.extra.get("http_url"),
        Some(&json!("http://127.0.0.1:8080"))
    );
    assert_eq!(signal.extra.get("account"), Some(&json!("+15550001")));
    assert_eq!(signal.allowed_users, ["+15550002", "+15550003"]);
    let url_only = load_ok("", &[("SIGNAL_HTTP_URL", "http://127.0.0.1:8080")]);
    assert!(!url_only.config.platforms.signal.enabled);
    let off = load_ok("signal: {enabled: false}\n", &both);
    assert!(!off.config.platforms.signal.enabled);
    let file = load_ok(
        "platforms:\n  signal:\n    extra: {http_url: \"http://h:1\", account: \"+1\"}\n",
        &[],
    );
    assert!(file.config.platforms.signal.enabled);
    let token = load_ok("signal: {token: abc}\n", &[]);
    assert!(
        token.warnings.iter().any(|w| w.contains("signal.token")),
        "{:?}",
        token.warnings
    );
}
