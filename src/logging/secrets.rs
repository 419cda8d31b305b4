//! Which values the log redactor masks: every token and key in the validated config, and
//! every environment (or `.env`) variable whose name says it holds a secret.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::config::{self, Config, Secret};
use crate::home::HermesHome;

/// Whether an environment variable's name says it holds a credential (`*_TOKEN`, `*_KEY`,
/// `*SECRET*`, `*PASSWORD*`, ...). The same rule as the config's `extra` redaction, for
/// upper-case names.
pub fn looks_like_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name == "key"
        || name.ends_with("_key")
        || name.ends_with("_pat")
        || [
            "token",
            "secret",
            "password",
            "passwd",
            "apikey",
            "api_key",
            "credential",
        ]
        .iter()
        .any(|word| name.contains(word))
}

/// Values of the secret-named variables in `env`.
pub fn env_secrets(env: &BTreeMap<String, String>) -> Vec<String> {
    env.iter()
        .filter(|(name, _)| looks_like_secret_name(name))
        .map(|(_, value)| value.clone())
        .collect()
}

/// Every credential in a validated configuration.
pub fn config_secrets(config: &Config) -> Vec<String> {
    let mut found: Vec<&Secret> = Vec::new();
    found.extend(config.model.api_key.as_ref());
    found.extend(config.providers.values().filter_map(|p| p.api_key.as_ref()));
    found.extend(
        config
            .fallback_providers
            .iter()
            .filter_map(|f| f.api_key.as_ref()),
    );
    found.extend(config.api_server.key.as_ref());
    let platforms = &config.platforms;
    let mut values: Vec<String> = Vec::new();
    for platform in [&platforms.telegram, &platforms.discord, &platforms.slack] {
        found.extend(platform.token.as_ref());
        found.extend(platform.app_token.as_ref());
        for (key, value) in &platform.extra.0 {
            collect_extra(key, value, &mut values);
        }
    }
    values.extend(found.into_iter().map(|s| s.expose().to_owned()));
    values
}

/// Secret-named string values in a platform's free-form `extra`, at any depth.
fn collect_extra(key: &str, value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) if looks_like_secret_name(key) => out.push(text.clone()),
        Value::Object(map) => map
            .iter()
            .for_each(|(inner, value)| collect_extra(inner, value, out)),
        Value::Array(items) => items.iter().for_each(|item| collect_extra(key, item, out)),
        _ => {}
    }
}

/// The secrets of the home the command line selects: the validated config's credentials and
/// the secret-named variables of the environment and `.env`. When the configuration does not
/// load (the command will report why), `.env` is read directly so its values are still masked.
pub fn secrets_for_home(
    explicit_home: Option<&Path>,
    profile: Option<&str>,
    env: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut secrets = env_secrets(env);
    let Ok(home) = HermesHome::resolve(explicit_home, profile, env) else {
        return secrets;
    };
    match config::load(&home, env) {
        Ok(loaded) => {
            secrets.extend(config_secrets(&loaded.config));
            secrets.extend(env_secrets(&loaded.env));
        }
        Err(_) => {
            if let Ok(entries) = dotenvy::from_path_iter(home.dotenv()) {
                let dotenv: BTreeMap<String, String> = entries.flatten().collect();
                secrets.extend(env_secrets(&dotenv));
            }
        }
    }
    secrets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for name in [
            "TELEGRAM_BOT_TOKEN",
            "SLACK_APP_TOKEN",
            "OPENAI_API_KEY",
            "API_SERVER_KEY",
            "TELEGRAM_WEBHOOK_SECRET",
            "DB_PASSWORD",
            "GITHUB_PAT",
        ] {
            assert!(looks_like_secret_name(name), "{name}");
        }
        for name in ["HOME", "PATH", "API_SERVER_PORT", "KEYBOARD", "HERMES_HOME"] {
            assert!(!looks_like_secret_name(name), "{name}");
        }
    }

    #[test]
    fn config_secrets_include_tokens_keys_and_secret_extras() {
        let mut config = Config::default();
        config.model.api_key = Some(Secret::new("model-key-000000"));
        config.platforms.telegram.token = Some(Secret::new("123:telegram-token"));
        config.platforms.slack.app_token = Some(Secret::new("xapp-1-app-token"));
        config.platforms.telegram.extra.0.insert(
            "webhook".to_owned(),
            serde_json::json!({"secret": "hook-secret-123", "url": "https://x"}),
        );
        let secrets = config_secrets(&config);
        for expected in [
            "model-key-000000",
            "123:telegram-token",
            "xapp-1-app-token",
            "hook-secret-123",
        ] {
            assert!(secrets.iter().any(|s| s == expected), "{expected}");
        }
        assert!(!secrets.iter().any(|s| s == "https://x"));
    }
}
