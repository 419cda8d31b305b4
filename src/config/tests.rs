//! Load-level tests: temporary homes, explicit env maps, never the process environment.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use super::*;
use crate::home::HermesHome;

const DEFAULT_YAML: &str = include_str!("../../config/default.yaml");

pub(super) fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

/// A temporary home holding the given `config.yaml` and `.env` (when non-empty).
pub(super) fn home_with(config_yaml: &str, dotenv: &str) -> (tempfile::TempDir, HermesHome) {
    let dir = tempfile::tempdir().unwrap();
    write_home(dir.path(), config_yaml, dotenv);
    let home = HermesHome::at(dir.path());
    (dir, home)
}

pub(super) fn write_home(path: &Path, config_yaml: &str, dotenv: &str) {
    std::fs::create_dir_all(path).unwrap();
    if !config_yaml.is_empty() {
        std::fs::write(path.join("config.yaml"), config_yaml).unwrap();
    }
    if !dotenv.is_empty() {
        std::fs::write(path.join(".env"), dotenv).unwrap();
    }
}

pub(super) fn load_ok(config_yaml: &str, pairs: &[(&str, &str)]) -> LoadedConfig {
    let (_dir, home) = home_with(config_yaml, "");
    load(&home, &env(pairs)).unwrap_or_else(|errors| panic!("{errors}"))
}

pub(super) fn load_err(config_yaml: &str, pairs: &[(&str, &str)]) -> Vec<String> {
    let (_dir, home) = home_with(config_yaml, "");
    match load(&home, &env(pairs)) {
        Ok(loaded) => panic!("expected errors, got {:?}", loaded.config),
        Err(errors) => errors.0.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn empty_home_gives_defaults_without_warnings() {
    let loaded = load_ok("", &[]);
    assert_eq!(loaded.config, Config::default());
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn default_yaml_loads_to_the_built_in_defaults() {
    let loaded = load_ok(DEFAULT_YAML, &[]);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.config, Config::default());
}

#[test]
fn layering_precedence_defaults_yaml_dotenv_env() {
    let yaml = "approvals:\n  timeout: 30\ntelegram:\n  reply_to_mode: all\n";
    let dotenv = "HERMES__APPROVALS__TIMEOUT=40\nTELEGRAM_REPLY_TO_MODE=off\n";
    let process = [
        ("HERMES__APPROVALS__TIMEOUT", "50"),
        ("TELEGRAM_REPLY_TO_MODE", "first"),
    ];
    // (config.yaml, .env, process env) → expected approvals.timeout and telegram.reply_to_mode
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], u64, ReplyToMode);
    let cases: [Case; 4] = [
        ("", "", &[], 60, ReplyToMode::First),
        (yaml, "", &[], 30, ReplyToMode::All),
        (yaml, dotenv, &[], 40, ReplyToMode::Off),
        (yaml, dotenv, &process, 50, ReplyToMode::First),
    ];
    for (config_yaml, dotenv, pairs, timeout, reply_to_mode) in cases {
        let (_dir, home) = home_with(config_yaml, dotenv);
        let loaded = load(&home, &env(pairs)).unwrap();
        assert_eq!(
            loaded.config.approvals.timeout_secs, timeout,
            "{config_yaml:?} {dotenv:?}"
        );
        assert_eq!(
            loaded.config.platforms.telegram.reply_to_mode,
            reply_to_mode
        );
    }
}

#[test]
fn dotenv_never_overrides_a_set_variable_and_is_returned() {
    let (_dir, home) = home_with("", "TELEGRAM_BOT_TOKEN=from-dotenv\nONLY_IN_DOTENV=1\n");
    let process = env(&[("TELEGRAM_BOT_TOKEN", "from-process")]);
    let loaded = load(&home, &process).unwrap();
    let token = loaded.config.platforms.telegram.token.as_ref().unwrap();
    assert_eq!(token.expose(), "from-process");
    assert_eq!(loaded.env["TELEGRAM_BOT_TOKEN"], "from-process");
    assert_eq!(loaded.env["ONLY_IN_DOTENV"], "1");
    assert_eq!(process.len(), 1, "the caller's map is untouched");
    assert!(!format!("{loaded:?}").contains("from-process"));
}

#[test]
fn every_hermes_env_name_is_mapped() {
    let loaded = load_ok(
        "",
        &[
            ("TELEGRAM_BOT_TOKEN", "tg-token"),
            ("TELEGRAM_ALLOWED_USERS", "1, 2"),
            ("DISCORD_BOT_TOKEN", "dc-token"),
            ("DISCORD_ALLOWED_USERS", "3"),
            ("SLACK_BOT_TOKEN", "xoxb-token"),
            ("SLACK_APP_TOKEN", "xapp-token"),
            ("SLACK_ALLOWED_USERS", "U1,U2"),
            ("GATEWAY_ALLOWED_USERS", "9,,10"),
            ("GATEWAY_ALLOW_ALL_USERS", "yes"),
            ("API_SERVER_ENABLED", "true"),
            ("API_SERVER_KEY", "0123456789abcdef"),
            ("API_SERVER_HOST", "0.0.0.0"),
            ("API_SERVER_PORT", "9000"),
            ("OPENAI_API_KEY", "sk-openai"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:1234/v1"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("OPENROUTER_API_KEY", "sk-or"),
            ("HERMES_GATEWAY_BUSY_INPUT_MODE", "queue"),
            ("TELEGRAM_HOME_CHANNEL", "-100"),
            ("TELEGRAM_HOME_CHANNEL_THREAD_ID", "7"),
        ],
    );
    let config = &loaded.config;
    let telegram = &config.platforms.telegram;
    assert!(telegram.enabled);
    assert_eq!(telegram.token.as_ref().unwrap().expose(), "tg-token");
    assert_eq!(telegram.allowed_users, ["1", "2"]);
    assert_eq!(
        telegram.home_channel,
        Some(HomeChannel {
            chat_id: "-100".into(),
            name: "Home".into(),
            thread_id: Some("7".into())
        })
    );
    let discord = &config.platforms.discord;
    assert!(discord.enabled);
    assert_eq!(discord.token.as_ref().unwrap().expose(), "dc-token");
    assert_eq!(discord.allowed_users, ["3"]);
    let slack = &config.platforms.slack;
    assert!(slack.enabled);
    assert_eq!(slack.token.as_ref().unwrap().expose(), "xoxb-token");
    assert_eq!(slack.app_token.as_ref().unwrap().expose(), "xapp-token");
    assert_eq!(slack.allowed_users, ["U1", "U2"]);
    assert_eq!(config.gateway.allowed_users, ["9", "10"]);
    assert!(config.gateway.allow_all_users);
    let api = &config.api_server;
    assert!(api.enabled);
    assert_eq!(api.key.as_ref().unwrap().expose(), "0123456789abcdef");
    assert_eq!((api.host.as_str(), api.port), ("0.0.0.0", 9000));
    let provider = |name: &str| config.providers.get(name).unwrap();
    assert_eq!(
        provider("openai").api_key.as_ref().unwrap().expose(),
        "sk-openai"
    );
    assert_eq!(
        provider("openai").base_url.as_deref(),
        Some("http://127.0.0.1:1234/v1")
    );
    assert_eq!(
        provider("anthropic").api_key.as_ref().unwrap().expose(),
        "sk-ant"
    );
    assert_eq!(
        provider("openrouter").api_key.as_ref().unwrap().expose(),
        "sk-or"
    );
    assert_eq!(config.display.busy_input_mode, BusyInputMode::Queue);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn every_error_is_reported_at_once_with_its_key() {
    let yaml = "\
approvals:
  mode: sometimes
  timeout: soon
session_reset:
  at_hour: 25
unauthorized_dm_behavior: block
discord:
  enabled: true
admin:
  port: 70000
";
    let errors = load_err(
        yaml,
        &[("API_SERVER_ENABLED", "1"), ("API_SERVER_PORT", "http")],
    );
    assert_eq!(
        errors,
        [
            "config error: approvals.mode: expected one of manual, off; got 'sometimes'",
            "config error: approvals.timeout: expected a whole number, got 'soon'",
            "config error: session_reset.at_hour: must be between 0 and 23, got 25",
            "config error: unauthorized_dm_behavior: expected one of pair, ignore; got 'block'",
            "config error: api_server.key: required when the API server is enabled; set \
             API_SERVER_KEY (at least 16 characters)",
            "config error: API_SERVER_PORT: expected a whole number, got 'http'",
            "config error: admin.port: must be between 0 and 65535, got 70000",
            "config error: discord.token: required when discord is enabled; set \
             DISCORD_BOT_TOKEN in .env or discord.token",
        ]
    );
}

#[test]
fn errors_never_show_secrets() {
    let errors = load_err(
        "model:\n  api_key: [sk-in-a-list-SECRET1]\ntelegram: \"123:SECRET2\"\n",
        &[("API_SERVER_KEY", "short-SECRET3")],
    );
    let all = errors.join("\n");
    for secret in ["SECRET1", "SECRET2", "SECRET3"] {
        assert!(!all.contains(secret), "{all}");
    }
    assert!(
        all.contains("config error: telegram: expected a mapping, got a string"),
        "{all}"
    );
    assert!(
        all.contains(
            "config error: API_SERVER_KEY: must be at least 16 characters when the API server is \
             enabled, got *** (13 characters)"
        ),
        "{all}"
    );
}

#[test]
fn unknown_keys_warn_and_set_hermes_keys_we_ignore_are_named_in_one_warning() {
    let yaml = "\
terminal: {backend: local, modal_image: x, surprise: 1}
browser: {headed: false}
mcp_servers: {github: {command: npx, keepalive_interval: 30}}
toolsets: [hermes-cli]
whatsapp: {}
model: {default: gpt-5, api_mode: chat_completions}
agent: {max_turns: 90, reasoning_effort: high}
display: {busy_input_mod: queue, compact: true}
discord: {require_mention: false, free_response_channels: \"1,2\"}
telegram: {tokn: abc}
platforms: {discord: {tokn: abc}, matrix: {enabled: true}}
gateway: {delivery_ledger: true, surprise: 1}
totally_unknown: 1
";
    let loaded = load_ok(yaml, &[("HERMES__SLACK__SURPRISE", "1")]);
    assert_eq!(
        loaded.warnings,
        [
            "unknown key 'totally_unknown'",
            "unknown key 'gateway.surprise'",
            "unknown key 'display.busy_input_mod'",
            "terminal.modal_image is not supported by hermesd yet (the modal backend); it has no effect",
            "unknown key 'terminal.surprise'",
            "unknown key 'telegram.tokn'",
            "unknown key 'platforms.discord.tokn'",
            "unknown key 'slack.surprise'",
            "7 settings are set but not supported by hermesd yet, so without effect: \
             agent.reasoning_effort, browser, display.compact, gateway.delivery_ledger, \
             mcp_servers.github.keepalive_interval, platforms.matrix, toolsets",
        ]
    );
    let discord = &loaded.config.platforms.discord;
    assert_eq!(discord.extra.get("require_mention"), Some(&json!(false)));
    assert_eq!(
        discord.extra.get("free_response_channels"),
        Some(&json!("1,2"))
    );
    assert_eq!(loaded.config.agent.max_turns, 90);
    assert_eq!(loaded.config.model.default.as_deref(), Some("gpt-5"));
}

#[test]
fn profile_homes_read_their_own_files() {
    let root = tempfile::tempdir().unwrap();
    write_home(root.path(), "approvals:\n  timeout: 10\n", "");
    write_home(
        &root.path().join("profiles").join("coder"),
        "approvals:\n  timeout: 20\n",
        "TELEGRAM_BOT_TOKEN=coder-token\n",
    );
    let process = env(&[("HERMES_HOME", root.path().to_str().unwrap())]);
    let default_home = HermesHome::resolve(None, None, &process).unwrap();
    let coder_home = HermesHome::resolve(None, Some("coder"), &process).unwrap();
    let default_config = load(&default_home, &process).unwrap().config;
    let coder_config = load(&coder_home, &process).unwrap().config;
    assert_eq!(default_config.approvals.timeout_secs, 10);
    assert!(!default_config.platforms.telegram.enabled);
    assert_eq!(coder_config.approvals.timeout_secs, 20);
    assert!(coder_config.platforms.telegram.enabled);
}

#[test]
fn model_and_fallback_forms() {
    let config = load_ok("model: anthropic/claude-sonnet-4\n", &[]).config;
    assert_eq!(
        config.model.default.as_deref(),
        Some("anthropic/claude-sonnet-4")
    );
    assert_eq!(config.model.provider, "auto");
    let yaml = "\
model: {provider: openrouter, default: x/y, base_url: \"https://openrouter.ai/api/v1\", context_length: 200000}
fallback_providers:
  - {provider: anthropic, model: claude-haiku}
  - {provider: openrouter}
  - just-a-string
";
    let errors = load_err(yaml, &[]);
    assert_eq!(
        errors,
        [
            "config error: fallback_providers[1].model: required",
            "config error: fallback_providers[2]: expected a mapping with provider and model, got a string",
        ]
    );
    let good = load_ok(
        &yaml.replace("  - {provider: openrouter}\n  - just-a-string\n", ""),
        &[],
    );
    assert_eq!(good.config.model.context_length, Some(200_000));
    assert_eq!(good.config.fallback_providers[0].model, "claude-haiku");
}

#[test]
fn api_modes_are_one_of_three_and_empty_means_unset() {
    let yaml = "\
model: {default: m, api_mode: anthropic_messages}
fallback_providers:
  - {provider: openai, model: gpt-5, api_mode: Codex_Responses}
  - {provider: openrouter, model: x, api_mode: \"\"}
";
    let config = load_ok(yaml, &[]).config;
    assert_eq!(config.model.api_mode, Some(ApiMode::AnthropicMessages));
    let fallback_modes: Vec<_> = config
        .fallback_providers
        .iter()
        .map(|f| f.api_mode)
        .collect();
    assert_eq!(fallback_modes, [Some(ApiMode::CodexResponses), None]);
    let errors = load_err("model: {api_mode: bedrock_converse}\n", &[]);
    assert_eq!(
        errors,
        [
            "config error: model.api_mode: expected one of chat_completions, anthropic_messages, \
          codex_responses; got 'bedrock_converse'"
        ]
    );
}

#[test]
fn approvals_smart_falls_back_to_manual_with_a_warning() {
    let loaded = load_ok("approvals: {mode: smart, cron_mode: deny}\n", &[]);
    assert_eq!(loaded.config.approvals.mode, ApprovalMode::Manual);
    assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);
    assert!(loaded.warnings[0].starts_with("approvals.mode 'smart'"));
    assert!(loaded.warnings[1].ends_with("without effect: approvals.cron_mode"));
    let off = load_ok("approvals: {mode: false}\n", &[]);
    assert_eq!(off.config.approvals.mode, ApprovalMode::Off);
}

/// Values that reach `Duration::from_secs_f64` are bounded here: past `u64::MAX` seconds it
/// panics, which once happened mid-turn (`edit_interval`) or at start (the drain timeout).
#[test]
fn intervals_too_long_for_a_duration_are_errors_naming_the_key() {
    let (_dir, home) = home_with(
        "streaming: {edit_interval: 1e20, fresh_final_after_seconds: 1e300}\n",
        "",
    );
    let env: BTreeMap<String, String> =
        [("HERMESD_DRAIN_TIMEOUT_SECS".to_owned(), "1e30".to_owned())].into();
    let errors = load(&home, &env).unwrap_err();
    let keys: Vec<&str> = errors.0.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "streaming.edit_interval",
            "streaming.fresh_final_after_seconds",
            "HERMESD_DRAIN_TIMEOUT_SECS"
        ],
        "{errors}"
    );
}

#[test]
fn malformed_files_are_errors_together() {
    let (_dir, home) = home_with("a: [1,\n", "BROKEN='unterminated\n");
    let errors = load(&home, &BTreeMap::new()).unwrap_err();
    assert_eq!(errors.0.len(), 2, "{errors}");
    assert!(errors.0[0].key.ends_with(".env:1"), "{errors}");
    assert!(errors.0[1].key.ends_with("config.yaml"), "{errors}");
    assert!(errors.0[1].message.contains("line 2"), "{errors}");
}

#[test]
fn env_references_in_yaml_expand_from_dotenv_and_env() {
    let yaml = "platforms:\n  telegram:\n    enabled: true\n    token: ${MY_TG_TOKEN}\nmodel:\n  default: ${MODEL_NAME}\n";
    let (_dir, home) = home_with(yaml, "MY_TG_TOKEN=from-dotenv\n");
    let loaded = load(&home, &BTreeMap::new()).unwrap();
    let token = loaded.config.platforms.telegram.token.as_ref().unwrap();
    assert_eq!(token.expose(), "from-dotenv");
    assert_eq!(
        loaded.config.model.default.as_deref(),
        Some("${MODEL_NAME}")
    );
    assert_eq!(
        loaded.warnings,
        ["${MODEL_NAME} is used in config.yaml but MODEL_NAME is not set"]
    );
}

#[test]
fn title_generation_is_on_unless_auxiliary_turns_it_off() {
    assert!(load_ok("", &[]).config.auxiliary.title_generation.enabled);
    let off = "auxiliary:\n  title_generation:\n    enabled: false\n    language: de\n  vision:\n    model: x\n";
    let loaded = load_ok(off, &[]);
    assert!(!loaded.config.auxiliary.title_generation.enabled);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let by_env = load_ok(
        "",
        &[("HERMES__AUXILIARY__TITLE_GENERATION__ENABLED", "false")],
    );
    assert!(!by_env.config.auxiliary.title_generation.enabled);
    let errors = load_err("auxiliary:\n  title_generation:\n    enabled: maybe\n", &[]);
    assert!(
        errors
            .iter()
            .any(|e| e.contains("auxiliary.title_generation.enabled")),
        "{errors:?}"
    );
}

#[test]
fn media_keys_are_read_where_hermes_writes_them() {
    let yaml = "agent:\n  image_input_mode: native\nmodel:\n  supports_vision: false\n\
                auxiliary:\n  vision:\n    model: gpt-4o-mini\n    base_url: http://127.0.0.1:9/v1\n    timeout: 30\n\
                stt:\n  provider: groq\n  echo_transcripts: true\n  openai:\n    model: gpt-4o-mini-transcribe\n\
                stt_echo_transcripts: false\n";
    let loaded = load_ok(yaml, &[]);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let media = &loaded.config.media;
    assert_eq!(media.image_input_mode, ImageInputMode::Native);
    assert_eq!(media.supports_vision, Some(false));
    assert!(media.vision.is_configured());
    assert_eq!(media.vision.timeout_secs, 30);
    assert_eq!(media.stt.provider, "groq");
    assert_eq!(media.stt.openai.model, "gpt-4o-mini-transcribe");
    // The flat key wins over the section's own, as in Hermes.
    assert!(!media.stt.echo_transcripts);
    assert!(media.stt.enabled);

    // `gateway.stt` when there is no top-level `stt`.
    let nested = load_ok(
        "gateway:\n  stt:\n    enabled: false\n  stt_echo_transcripts: false\n",
        &[],
    );
    assert!(!nested.config.media.stt.enabled);
    assert!(!nested.config.media.stt.echo_transcripts);
    assert!(nested.warnings.is_empty(), "{:?}", nested.warnings);
    assert!(
        !load_ok("stt_enabled: false\n", &[])
            .config
            .media
            .stt
            .enabled
    );
}

#[test]
fn bad_media_values_name_their_keys() {
    let errors = load_err(
        "agent:\n  image_input_mode: pixels\nstt:\n  enabled: maybe\nauxiliary:\n  vision:\n    base_url: ftp://x\n",
        &[],
    );
    for key in [
        "agent.image_input_mode",
        "stt.enabled",
        "auxiliary.vision.base_url",
    ] {
        assert!(errors.iter().any(|e| e.contains(key)), "{key}: {errors:?}");
    }
    // A provider hermesd cannot call is named in a warning; Hermes's default `local` is not.
    let loaded = load_ok("stt:\n  provider: deepinfra\n", &[]);
    assert!(
        loaded.warnings.iter().any(|w| w.contains("stt.provider")),
        "{:?}",
        loaded.warnings
    );
    assert!(
        load_ok("stt:\n  provider: local\n", &[])
            .warnings
            .is_empty()
    );
}

#[test]
fn prompt_guidance_keys_take_hermes_value_forms() {
    use super::{HintOverride, ToolUseEnforcement};
    let yaml = "agent:\n  tool_use_enforcement: [Llama, mistral]\n  task_completion_guidance: false\n\
                platform_hints:\n  telegram: Answer in French.\n  discord:\n    replace: Short.\n    append: No emoji.\n";
    let loaded = load_ok(yaml, &[]);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let prompt = &loaded.config.prompt;
    assert_eq!(
        prompt.tool_use_enforcement,
        ToolUseEnforcement::Models(vec!["llama".into(), "mistral".into()])
    );
    assert!(!prompt.task_completion_guidance);
    assert!(prompt.parallel_tool_call_guidance);
    assert_eq!(
        prompt.platform_hints["telegram"],
        HintOverride {
            replace: None,
            append: Some("Answer in French.".into())
        }
    );
    assert_eq!(
        prompt.platform_hints["discord"].replace.as_deref(),
        Some("Short.")
    );
    for (text, expected) in [
        ("true", ToolUseEnforcement::Always),
        ("never", ToolUseEnforcement::Never),
        ("auto", ToolUseEnforcement::Auto),
    ] {
        let yaml = format!("agent:\n  tool_use_enforcement: {text}\n");
        assert_eq!(
            load_ok(&yaml, &[]).config.prompt.tool_use_enforcement,
            expected
        );
    }
    let errors = load_err(
        "agent:\n  tool_use_enforcement: sometimes\nplatform_hints:\n  slack: [1]\n",
        &[],
    );
    for key in ["agent.tool_use_enforcement", "platform_hints.slack"] {
        assert!(errors.iter().any(|e| e.contains(key)), "{key}: {errors:?}");
    }
}

#[test]
fn approvals_deny_is_read_as_a_list_of_globs() {
    let loaded = load_ok(
        "approvals:\n  deny:\n    - 'git push *'\n    - ' rm -rf * '\n",
        &[],
    );
    assert_eq!(
        loaded.config.approvals.deny,
        vec!["git push *".to_owned(), "rm -rf *".to_owned()]
    );
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}
