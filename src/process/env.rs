//! The environment a command sees (Python `_make_run_env`): the caller's environment minus
//! every secret hermesd knows — the Hermes-managed names below, any variable whose name says
//! it holds a credential, the state database's URL, and any variable whose value equals one
//! of those secrets or one the daemon's redactor knows — with a sane `PATH`, `HERMES_HOME`
//! set and virtualenv markers removed. `_HERMES_FORCE_<NAME>` passes a blocked variable
//! through on purpose (the operator's choice, in the daemon's own environment).

use std::collections::BTreeMap;

use crate::home::HermesHome;
use crate::logging::{MIN_SECRET_CHARS, is_known_secret, is_secret_env_name};

const FORCE_PREFIX: &str = "_HERMES_FORCE_";

/// Provider, tool and messaging secrets the agent's shell must not see.
const BLOCKLIST: &[&str] = &[
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_API_BASE",
    "OPENAI_ORG_ID",
    "OPENAI_ORGANIZATION",
    "OPENROUTER_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_TOKEN",
    "LLM_MODEL",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "VERTEX_CREDENTIALS_PATH",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "DEEPSEEK_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "TOGETHER_API_KEY",
    "PERPLEXITY_API_KEY",
    "COHERE_API_KEY",
    "FIREWORKS_API_KEY",
    "XAI_API_KEY",
    "HELICONE_API_KEY",
    "PARALLEL_API_KEY",
    "FIRECRAWL_API_KEY",
    "FIRECRAWL_API_URL",
    "AWS_BEARER_TOKEN_BEDROCK",
    "TELEGRAM_BOT_TOKEN",
    "TELEGRAM_HOME_CHANNEL",
    "TELEGRAM_HOME_CHANNEL_NAME",
    "DISCORD_BOT_TOKEN",
    "DISCORD_HOME_CHANNEL",
    "DISCORD_HOME_CHANNEL_NAME",
    "DISCORD_REQUIRE_MENTION",
    "DISCORD_FREE_RESPONSE_CHANNELS",
    "DISCORD_AUTO_THREAD",
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_HOME_CHANNEL",
    "SLACK_HOME_CHANNEL_NAME",
    "SLACK_ALLOWED_USERS",
    "WHATSAPP_ENABLED",
    "WHATSAPP_MODE",
    "WHATSAPP_ALLOWED_USERS",
    "SIGNAL_HTTP_URL",
    "SIGNAL_ACCOUNT",
    "SIGNAL_ALLOWED_USERS",
    "SIGNAL_GROUP_ALLOWED_USERS",
    "SIGNAL_HOME_CHANNEL",
    "SIGNAL_HOME_CHANNEL_NAME",
    "SIGNAL_IGNORE_STORIES",
    "HASS_TOKEN",
    "HASS_URL",
    "EMAIL_ADDRESS",
    "EMAIL_PASSWORD",
    "EMAIL_IMAP_HOST",
    "EMAIL_SMTP_HOST",
    "EMAIL_HOME_ADDRESS",
    "EMAIL_HOME_ADDRESS_NAME",
    "HERMES_DASHBOARD_SESSION_TOKEN",
    "GATEWAY_ALLOWED_USERS",
    "GATEWAY_ALLOW_ALL_USERS",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GITHUB_APP_ID",
    "GITHUB_APP_PRIVATE_KEY_PATH",
    "GITHUB_APP_INSTALLATION_ID",
    "MODAL_TOKEN_ID",
    "MODAL_TOKEN_SECRET",
    "DAYTONA_API_KEY",
    "GATEWAY_RELAY_ID",
    "GATEWAY_RELAY_SECRET",
    "GATEWAY_RELAY_DELIVERY_KEY",
    "API_SERVER_KEY",
    "SUDO_PASSWORD",
];

/// Markers of the daemon's own virtualenv, which would redirect another project's tools.
const VENV_MARKERS: [&str; 2] = ["VIRTUAL_ENV", "CONDA_PREFIX"];

const SANE_PATH: &str = "/opt/homebrew/bin:/opt/homebrew/sbin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Secrets injected under dynamic names (`AUXILIARY_<TASK>_API_KEY`, relay secrets).
fn is_internal_secret(key: &str) -> bool {
    let upper = key.to_ascii_uppercase();
    (upper.starts_with("AUXILIARY_")
        && (upper.ends_with("_API_KEY") || upper.ends_with("_BASE_URL")))
        || (upper.starts_with("GATEWAY_RELAY_")
            && (upper.ends_with("_SECRET") || upper.ends_with("_KEY") || upper.ends_with("_TOKEN")))
}

/// The caller's `PATH`, de-duplicated without empty entries, with the standard system
/// directories appended when missing.
pub fn sane_path(existing: &str) -> String {
    let mut entries: Vec<&str> = Vec::new();
    for entry in existing.split(':').chain(SANE_PATH.split(':')) {
        if !entry.is_empty() && !entries.contains(&entry) {
            entries.push(entry);
        }
    }
    entries.join(":")
}

/// Whether the variable `key` is dropped by its name alone.
fn is_blocked_name(key: &str) -> bool {
    is_internal_secret(key) || BLOCKLIST.contains(&key) || is_secret_env_name(key)
}

/// Marks the `terminal.env_passthrough` variables present in `env` to reach commands although
/// their names look secret. The secrets hermesd itself uses (provider keys, platform tokens,
/// the state database's URL) never pass; naming one is reported.
pub fn mark_passthrough(env: &mut BTreeMap<String, String>, names: &[String]) {
    for name in names {
        if BLOCKLIST.contains(&name.as_str()) || is_internal_secret(name) {
            tracing::warn!(
                variable = %name,
                "terminal.env_passthrough names a secret hermesd itself uses; it stays hidden from commands"
            );
            continue;
        }
        if let Some(value) = env.get(name).cloned() {
            env.insert(format!("{FORCE_PREFIX}{name}"), value);
        }
    }
}

/// The variables passed on purpose (`_HERMES_FORCE_*`, `terminal.env_passthrough`) by their
/// real names: all a command on a remote backend gets from the daemon.
pub fn forced_env(base: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    base.iter()
        .filter_map(|(key, value)| {
            let real = key.strip_prefix(FORCE_PREFIX)?;
            (!is_internal_secret(real)).then(|| (real.to_owned(), value.clone()))
        })
        .collect()
}

/// The environment for a terminal command (and a cron script).
pub fn command_env(base: &BTreeMap<String, String>, home: &HermesHome) -> BTreeMap<String, String> {
    // The values of the variables dropped by name: a copy under another name goes too.
    let dropped: Vec<&str> = base
        .iter()
        .filter(|(key, _)| !key.starts_with(FORCE_PREFIX) && is_blocked_name(key))
        .map(|(_, value)| value.trim())
        .filter(|value| value.chars().count() >= MIN_SECRET_CHARS)
        .collect();
    let is_secret_value = |value: &str| dropped.contains(&value.trim()) || is_known_secret(value);
    let mut env = BTreeMap::new();
    for (key, value) in base {
        if let Some(real) = key.strip_prefix(FORCE_PREFIX) {
            if !is_internal_secret(real) {
                env.insert(real.to_owned(), value.clone());
            }
        } else if !is_blocked_name(key) && !is_secret_value(value) {
            env.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    let path = env.get("PATH").cloned().unwrap_or_default();
    env.insert("PATH".to_owned(), sane_path(&path));
    for (key, value) in home.child_env() {
        env.insert(key.to_owned(), value.display().to_string());
    }
    for marker in VENV_MARKERS {
        env.remove(marker);
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passthrough_lets_named_variables_through_but_never_hermesds_own_secrets() {
        let home = HermesHome::at("/tmp/h");
        let mut base: BTreeMap<String, String> = [
            ("NOTION_TOKEN", "ntn_passthrough_value_1234"),
            ("OPENAI_API_KEY", "sk-never-passes-through-1234"),
            ("NPM_TOKEN", "npm_not_listed_value_1234"),
            ("PATH", "/usr/bin"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        mark_passthrough(
            &mut base,
            &["NOTION_TOKEN".to_owned(), "OPENAI_API_KEY".to_owned()],
        );
        let env = command_env(&base, &home);
        assert_eq!(
            env.get("NOTION_TOKEN").map(String::as_str),
            Some("ntn_passthrough_value_1234")
        );
        assert!(!env.contains_key("OPENAI_API_KEY"));
        assert!(!env.contains_key("NPM_TOKEN"));
        let remote = forced_env(&base);
        assert_eq!(remote.keys().collect::<Vec<_>>(), ["NOTION_TOKEN"]);
    }

    #[test]
    fn secrets_are_stripped_and_force_passes_through() {
        let base: BTreeMap<String, String> = [
            ("OPENAI_API_KEY", "sk"),
            ("TELEGRAM_BOT_TOKEN", "t"),
            ("AUXILIARY_VISION_API_KEY", "a"),
            ("GATEWAY_RELAY_X_TOKEN", "r"),
            ("_HERMES_FORCE_GH_TOKEN", "gh"),
            ("VIRTUAL_ENV", "/venv"),
            ("PATH", "/custom/bin::/usr/bin:/custom/bin"),
            ("LANG", "C.UTF-8"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let env = command_env(&base, &HermesHome::at("/h"));
        assert_eq!(env.get("GH_TOKEN").map(String::as_str), Some("gh"));
        assert_eq!(env.get("LANG").map(String::as_str), Some("C.UTF-8"));
        assert_eq!(env.get("HERMES_HOME").map(String::as_str), Some("/h"));
        for gone in [
            "OPENAI_API_KEY",
            "TELEGRAM_BOT_TOKEN",
            "AUXILIARY_VISION_API_KEY",
            "GATEWAY_RELAY_X_TOKEN",
            "VIRTUAL_ENV",
            "_HERMES_FORCE_GH_TOKEN",
        ] {
            assert!(!env.contains_key(gone), "{gone}");
        }
        let path = &env["PATH"];
        assert!(path.starts_with("/custom/bin:/usr/bin:"), "{path}");
        assert!(path.ends_with(":/sbin:/bin"));
    }

    #[test]
    fn every_secret_the_daemon_knows_is_dropped_also_under_another_name() {
        let base: BTreeMap<String, String> = [
            ("HERMES_DATABASE_URL", "postgres://hermes:pg-secret-pw@db/h"),
            ("TELEGRAM_WEBHOOK_SECRET", "webhook-secret-0123"),
            ("API_SERVER_KEY", "api-server-key-0123"),
            ("ELEVENLABS_API_KEY", "tts-key-0123456"),
            ("MATTERMOST_TOKEN", "platform-token-0123"),
            ("COPY_OF_THE_URL", "postgres://hermes:pg-secret-pw@db/h"),
            ("INNOCENT", "webhook-secret-0123"),
            ("SHORT_SAME", "on"),
            ("FLAG", "on"),
            ("LANG", "C.UTF-8"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let env = command_env(&base, &HermesHome::at("/h"));
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        for gone in [
            "HERMES_DATABASE_URL",
            "TELEGRAM_WEBHOOK_SECRET",
            "API_SERVER_KEY",
            "ELEVENLABS_API_KEY",
            "MATTERMOST_TOKEN",
            "COPY_OF_THE_URL",
            "INNOCENT",
        ] {
            assert!(!env.contains_key(gone), "{gone} in {names:?}");
        }
        for kept in ["SHORT_SAME", "FLAG", "LANG"] {
            assert!(env.contains_key(kept), "{kept} missing from {names:?}");
        }
    }
}
