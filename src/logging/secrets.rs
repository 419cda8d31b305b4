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
    found.extend(config.admin.token.as_ref());
    found.extend(config.media.vision.api_key.as_ref());
    found.extend(config.media.stt.openai.api_key.as_ref());
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
    values.extend(mcp_secrets(config));
    values
}

/// The MCP servers' credentials: `env` values and `headers` values whose names say they
/// hold a secret, and any header that authenticates (`Authorization`, `Cookie`, ...).
fn mcp_secrets(config: &Config) -> Vec<String> {
    use crate::config::McpTransport;
    let mut out = Vec::new();
    for server in config.mcp_servers.values() {
        match &server.transport {
            McpTransport::Stdio { env, .. } => out.extend(
                env.iter()
                    .filter(|(name, _)| looks_like_secret_name(name))
                    .map(|(_, value)| value.expose().to_owned()),
            ),
            McpTransport::Http { headers, .. } | McpTransport::Sse { headers, .. } => {
                out.extend(
                    headers
                        .iter()
                        .filter(|(name, _)| {
                            let name = name.to_ascii_lowercase();
                            looks_like_secret_name(&name)
                                || name.contains("auth")
                                || name.contains("cookie")
                        })
                        .map(|(_, value)| value.expose().to_owned()),
                );
            }
        }
    }
    out
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
    secrets.extend(reloaded_secrets(
        &home,
        config::load(&home, env).as_ref().ok(),
    ));
    secrets
}

/// The secrets a (re)load of `home` knows: the loaded configuration's credentials and
/// secret-named variables, or — when it did not load (the caller reports why) — the
/// secret-named variables of `.env` read directly, so its values are masked in the errors.
/// A SIGHUP reload registers these before it logs anything.
pub fn reloaded_secrets(home: &HermesHome, loaded: Option<&config::LoadedConfig>) -> Vec<String> {
    match loaded {
        Some(loaded) => {
            let mut secrets = config_secrets(&loaded.config);
            secrets.extend(env_secrets(&loaded.env));
            secrets
        }
        None => match dotenvy::from_path_iter(home.dotenv()) {
            Ok(entries) => {
                let dotenv: BTreeMap<String, String> = entries.flatten().collect();
                env_secrets(&dotenv)
            }
            Err(_) => Vec::new(),
        },
    }
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
    fn reloaded_secrets_come_from_the_config_or_else_from_dotenv() {
        let dir = tempfile::tempdir().unwrap();
        let home = HermesHome::resolve(Some(dir.path()), None, &BTreeMap::new()).unwrap();
        std::fs::write(
            home.dotenv(),
            "TELEGRAM_BOT_TOKEN=999:new-token-from-dotenv\nTELEGRAM_ALLOWED_USERS=9001\n",
        )
        .unwrap();
        std::fs::write(home.config_yaml(), "model: [unclosed\n").unwrap();
        let failed = config::load(&home, &BTreeMap::new());
        assert!(failed.is_err());
        assert_eq!(
            reloaded_secrets(&home, None),
            vec!["999:new-token-from-dotenv".to_owned()]
        );
        std::fs::write(
            home.config_yaml(),
            "model:\n  api_key: model-key-from-yaml\nstt:\n  openai:\n    api_key: stt-key-from-yaml\n\
             auxiliary:\n  vision:\n    api_key: vision-key-from-yaml\n",
        )
        .unwrap();
        let loaded = config::load(&home, &BTreeMap::new()).unwrap();
        let secrets = reloaded_secrets(&home, Some(&loaded));
        for expected in [
            "999:new-token-from-dotenv",
            "model-key-from-yaml",
            "stt-key-from-yaml",
            "vision-key-from-yaml",
        ] {
            assert!(secrets.iter().any(|s| s == expected), "{expected}");
        }
        assert!(!secrets.iter().any(|s| s == "9001"));
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
