//! The Hermes environment variable names and the config keys they override.
//!
//! An env var that is set and non-empty beats `config.yaml` (empty counts as unset, as in
//! Hermes' `if os.getenv(...)`). Errors about such a value name the variable, not the key.
//! The generic `HERMES__SECTION__KEY` overrides are not here: the config crate layers those
//! onto the YAML tree before validation (see `layers.rs`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::parse::Leaf;

/// The env var's value as a leaf blamed on the variable, when set and non-empty.
pub fn env_leaf(env: &BTreeMap<String, String>, name: &str) -> Option<Leaf> {
    env.get(name)
        .filter(|value| !value.trim().is_empty())
        .map(|value| Leaf {
            key: name.to_owned(),
            value: Value::String(value.clone()),
        })
}

/// Env var names for one chat platform.
#[derive(Debug, Clone, Copy)]
pub struct PlatformEnv {
    /// The config key (`telegram`).
    pub name: &'static str,
    /// Setting it also enables the platform, unless `enabled: false` is written explicitly.
    pub token: &'static str,
    pub app_token: Option<&'static str>,
    /// Comma-separated user ids.
    pub allowed_users: &'static str,
    pub allow_all_users: &'static str,
    pub reply_to_mode: &'static str,
    pub home_channel: &'static str,
    pub home_channel_name: &'static str,
    pub home_channel_thread_id: &'static str,
    /// A platform without a bot token (`token` empty) is enabled when all of these are set.
    pub enable_vars: &'static [&'static str],
}

pub const TELEGRAM: PlatformEnv = PlatformEnv {
    name: "telegram",
    token: "TELEGRAM_BOT_TOKEN",
    app_token: None,
    allowed_users: "TELEGRAM_ALLOWED_USERS",
    allow_all_users: "TELEGRAM_ALLOW_ALL_USERS",
    reply_to_mode: "TELEGRAM_REPLY_TO_MODE",
    home_channel: "TELEGRAM_HOME_CHANNEL",
    home_channel_name: "TELEGRAM_HOME_CHANNEL_NAME",
    home_channel_thread_id: "TELEGRAM_HOME_CHANNEL_THREAD_ID",
    enable_vars: &[],
};

pub const DISCORD: PlatformEnv = PlatformEnv {
    name: "discord",
    token: "DISCORD_BOT_TOKEN",
    app_token: None,
    allowed_users: "DISCORD_ALLOWED_USERS",
    allow_all_users: "DISCORD_ALLOW_ALL_USERS",
    reply_to_mode: "DISCORD_REPLY_TO_MODE",
    home_channel: "DISCORD_HOME_CHANNEL",
    home_channel_name: "DISCORD_HOME_CHANNEL_NAME",
    home_channel_thread_id: "DISCORD_HOME_CHANNEL_THREAD_ID",
    enable_vars: &[],
};

pub const SLACK: PlatformEnv = PlatformEnv {
    name: "slack",
    token: "SLACK_BOT_TOKEN",
    app_token: Some("SLACK_APP_TOKEN"),
    allowed_users: "SLACK_ALLOWED_USERS",
    allow_all_users: "SLACK_ALLOW_ALL_USERS",
    reply_to_mode: "SLACK_REPLY_TO_MODE",
    home_channel: "SLACK_HOME_CHANNEL",
    home_channel_name: "SLACK_HOME_CHANNEL_NAME",
    home_channel_thread_id: "SLACK_HOME_CHANNEL_THREAD_ID",
    enable_vars: &[],
};

/// Signal has no bot token: signal-cli's daemon address and the bot's account enable it.
pub const SIGNAL: PlatformEnv = PlatformEnv {
    name: "signal",
    token: "",
    app_token: None,
    allowed_users: "SIGNAL_ALLOWED_USERS",
    allow_all_users: "SIGNAL_ALLOW_ALL_USERS",
    reply_to_mode: "SIGNAL_REPLY_TO_MODE",
    home_channel: "SIGNAL_HOME_CHANNEL",
    home_channel_name: "SIGNAL_HOME_CHANNEL_NAME",
    home_channel_thread_id: "SIGNAL_HOME_CHANNEL_THREAD_ID",
    enable_vars: &["SIGNAL_HTTP_URL", "SIGNAL_ACCOUNT"],
};

/// `gateway.allowed_users`: a comma-separated allowlist for every platform.
pub const GATEWAY_ALLOWED_USERS: &str = "GATEWAY_ALLOWED_USERS";
/// `gateway.allow_all_users`: let anyone talk to the bot (Hermes is default-deny).
pub const GATEWAY_ALLOW_ALL_USERS: &str = "GATEWAY_ALLOW_ALL_USERS";

pub const API_SERVER_ENABLED: &str = "API_SERVER_ENABLED";
/// Also enables the API server when set, unless `enabled: false` is written explicitly.
pub const API_SERVER_KEY: &str = "API_SERVER_KEY";
pub const API_SERVER_HOST: &str = "API_SERVER_HOST";
pub const API_SERVER_PORT: &str = "API_SERVER_PORT";
pub const API_SERVER_CORS_ORIGINS: &str = "API_SERVER_CORS_ORIGINS";
pub const API_SERVER_MODEL_NAME: &str = "API_SERVER_MODEL_NAME";

/// `display.busy_input_mode`.
pub const BUSY_INPUT_MODE: &str = "HERMES_GATEWAY_BUSY_INPUT_MODE";

/// `display.background_process_notifications`.
pub const BACKGROUND_NOTIFICATIONS: &str = "HERMES_BACKGROUND_NOTIFICATIONS";

/// Provider credentials: (env var, provider name, field of `providers.<name>`).
pub const PROVIDER_ENV: &[(&str, &str, ProviderField)] = &[
    ("OPENAI_API_KEY", "openai", ProviderField::ApiKey),
    ("OPENAI_BASE_URL", "openai", ProviderField::BaseUrl),
    ("ANTHROPIC_API_KEY", "anthropic", ProviderField::ApiKey),
    ("OPENROUTER_API_KEY", "openrouter", ProviderField::ApiKey),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderField {
    ApiKey,
    BaseUrl,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_values_count_as_unset() {
        let env: BTreeMap<String, String> = [
            ("TELEGRAM_BOT_TOKEN".to_owned(), "  ".to_owned()),
            ("DISCORD_BOT_TOKEN".to_owned(), "abc".to_owned()),
        ]
        .into_iter()
        .collect();
        assert_eq!(env_leaf(&env, "TELEGRAM_BOT_TOKEN"), None);
        assert_eq!(env_leaf(&env, "MISSING"), None);
        let leaf = env_leaf(&env, "DISCORD_BOT_TOKEN").unwrap();
        assert_eq!(leaf.key, "DISCORD_BOT_TOKEN");
        assert_eq!(leaf.value, Value::String("abc".to_owned()));
    }
}
