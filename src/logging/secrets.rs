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

/// Variables that hold a secret although their names do not say so: the state database's
/// URL, with its password.
pub const SECRET_ENV_NAMES: &[&str] = &[crate::config::DATABASE_URL_ENV, "DATABASE_URL"];

/// Whether the variable `name` holds something hermesd treats as secret.
pub fn is_secret_env_name(name: &str) -> bool {
    looks_like_secret_name(name) || SECRET_ENV_NAMES.contains(&name)
}

/// The password inside a URL's `user:password@`, or a libpq key=value DSN's `password=`
/// (quoted or not), if it has one.
pub fn url_password(value: &str) -> Option<String> {
    if let Some(password) = dsn_password(value) {
        return Some(password);
    }
    let parsed = reqwest::Url::parse(value.trim()).ok()?;
    let password = parsed.password()?;
    let decoded = percent_decode(password);
    Some(decoded)
}

fn dsn_password(value: &str) -> Option<String> {
    if value.contains("://") {
        return None;
    }
    let start = value.find("password")?;
    let rest = value[start + "password".len()..]
        .trim_start()
        .strip_prefix('=')?;
    let rest = rest.trim_start();
    let password = match rest.strip_prefix('\'') {
        Some(quoted) => quoted.split('\'').next().unwrap_or_default(),
        None => rest.split_whitespace().next().unwrap_or_default(),
    };
    (!password.is_empty()).then(|| password.to_owned())
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Values of the secret variables in `env` (see [`is_secret_env_name`]), and the password
/// of any variable whose value is a URL carrying one (both spellings, as typed and decoded).
pub fn env_secrets(env: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, value) in env {
        if is_secret_env_name(name) {
            out.push(value.clone());
        }
        if let Some(password) = url_password(value) {
            if let Some(raw) = reqwest::Url::parse(value.trim())
                .ok()
                .and_then(|u| u.password().map(str::to_owned))
            {
                out.push(raw);
            }
            out.push(password);
        }
    }
    out
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
    for platform in [
        &platforms.telegram,
        &platforms.discord,
        &platforms.slack,
        &platforms.signal,
    ] {
        found.extend(platform.token.as_ref());
        found.extend(platform.app_token.as_ref());
        for (key, value) in &platform.extra.0 {
            collect_extra(key, value, &mut values);
        }
    }
    let mut webhook = Vec::new();
    for (key, value) in &platforms.webhook.extra.0 {
        collect_extra(key, value, &mut webhook);
    }
    // The marker that turns a route's signature check off is a word, not a secret.
    webhook.retain(|value| value != hermes_webhook::route::INSECURE_NO_AUTH);
    values.extend(webhook);
    values.extend(found.into_iter().map(|s| s.expose().to_owned()));
    if let Some(url) = &config.state.postgres_url {
        values.push(url.expose().to_owned());
        values.extend(url_password(url.expose()));
    }
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
    fn database_urls_and_their_passwords_are_secrets() {
        let env: BTreeMap<String, String> = [
            (
                "HERMES_DATABASE_URL",
                "postgres://hermes:pg-pa%24%24word@db/h",
            ),
            ("SOME_SERVICE_URL", "https://user:other-password@x.example/"),
            ("HOME", "/home/ann"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let secrets = env_secrets(&env);
        for expected in [
            "postgres://hermes:pg-pa%24%24word@db/h",
            "pg-pa%24%24word",
            "pg-pa$$word",
            "other-password",
        ] {
            assert!(secrets.iter().any(|s| s == expected), "{expected}");
        }
        assert!(!secrets.iter().any(|s| s == "/home/ann"));
        assert_eq!(
            url_password("host=db user=h password='kv pass word' dbname=x").as_deref(),
            Some("kv pass word")
        );
        assert_eq!(
            url_password("host=db password=kv-pw-123 dbname=x").as_deref(),
            Some("kv-pw-123")
        );
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
