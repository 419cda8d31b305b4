//! [`AuthPolicy`]: the allowlists and flags authorization reads, gathered once from the
//! validated config and the environment (never the process environment directly).
//!
//! Where a value comes from, highest first, as in the reference: the Hermes env var (set
//! and non-blank), then the config. The reference's adapters copy some `config.yaml` keys
//! into env vars when those are unset (`allow_from`, `group_allow_from`,
//! `group_allowed_chats`, `allow_bots`); the same keys in a platform's `extra` are honoured
//! here the same way.

use std::collections::BTreeMap;

use serde_json::Value;

use super::DmBehavior;
use crate::config::{Config, Extra, PlatformConfig};

/// Everything authorization needs to know about one platform.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlatformAccess {
    /// `{PLATFORM}_ALLOWED_USERS`.
    pub allowed_users: Vec<String>,
    /// `{PLATFORM}_ALLOW_ALL_USERS`.
    pub allow_all_users: bool,
    /// `TELEGRAM_GROUP_ALLOWED_USERS`: senders allowed in groups and forums.
    pub group_allowed_users: Vec<String>,
    /// `TELEGRAM_GROUP_ALLOWED_CHATS`: whole chats allowed by chat id (`*` for all).
    pub group_allowed_chats: Vec<String>,
    /// `{PLATFORM}_ALLOW_BOTS` is `mentions` or `all`.
    pub allow_bots: bool,
    /// The platform's `dm_policy` (`pairing`, `allowlist`, `disabled`, `open`), lowercased.
    pub dm_policy: String,
    /// The platform's own `unauthorized_dm_behavior`, when it sets one.
    pub unauthorized_dm_behavior: Option<DmBehavior>,
    /// The adapter authenticates every caller before the gateway sees the event.
    pub authorization_is_upstream: bool,
}

/// The whole authorization configuration. `Default` allows no one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthPolicy {
    /// Per platform, by its lowercase name (`telegram`).
    pub platforms: BTreeMap<String, PlatformAccess>,
    /// `GATEWAY_ALLOWED_USERS`.
    pub gateway_allowed_users: Vec<String>,
    /// `GATEWAY_ALLOW_ALL_USERS`.
    pub gateway_allow_all_users: bool,
    /// The global `unauthorized_dm_behavior`.
    pub unauthorized_dm_behavior: DmBehavior,
}

impl Default for AuthPolicy {
    fn default() -> Self {
        Self {
            platforms: BTreeMap::new(),
            gateway_allowed_users: Vec::new(),
            gateway_allow_all_users: false,
            unauthorized_dm_behavior: DmBehavior::Pair,
        }
    }
}

/// The env names of one chat platform's authorization settings.
struct PlatformNames {
    name: &'static str,
    allowed_users: &'static str,
    allow_all_users: &'static str,
    allow_bots: &'static str,
    /// Whether the reference bridges `config.yaml`'s `allow_bots` into the env var.
    allow_bots_from_config: bool,
    /// Whether the reference bridges `allow_from` into `{PLATFORM}_ALLOWED_USERS`.
    allow_from_from_config: bool,
    /// Telegram's list of users allowed in groups (`TELEGRAM_GROUP_ALLOWED_USERS`).
    group_users: bool,
    /// The env var listing whole group chats (channels) allowed by id; their members who are
    /// not allowed users chat as guests. Telegram's is the reference's; Discord's and
    /// Slack's are hermesd's (the reference has no chat allowlist there), read like it.
    group_chats_env: &'static str,
}

const CHAT_PLATFORMS: [PlatformNames; 5] = [
    PlatformNames {
        name: "telegram",
        allowed_users: "TELEGRAM_ALLOWED_USERS",
        allow_all_users: "TELEGRAM_ALLOW_ALL_USERS",
        allow_bots: "TELEGRAM_ALLOW_BOTS",
        allow_bots_from_config: true,
        allow_from_from_config: true,
        group_users: true,
        group_chats_env: "TELEGRAM_GROUP_ALLOWED_CHATS",
    },
    PlatformNames {
        name: "discord",
        allowed_users: "DISCORD_ALLOWED_USERS",
        allow_all_users: "DISCORD_ALLOW_ALL_USERS",
        allow_bots: "DISCORD_ALLOW_BOTS",
        allow_bots_from_config: false,
        allow_from_from_config: true,
        group_users: false,
        group_chats_env: "DISCORD_GROUP_ALLOWED_CHATS",
    },
    PlatformNames {
        name: "slack",
        allowed_users: "SLACK_ALLOWED_USERS",
        allow_all_users: "SLACK_ALLOW_ALL_USERS",
        allow_bots: "SLACK_ALLOW_BOTS",
        allow_bots_from_config: true,
        allow_from_from_config: false,
        group_users: false,
        group_chats_env: "SLACK_GROUP_ALLOWED_CHATS",
    },
    // The Cloud API delivers direct chats only, so no group lists; no bots write there.
    PlatformNames {
        name: "whatsapp_cloud",
        allowed_users: "WHATSAPP_CLOUD_ALLOWED_USERS",
        allow_all_users: "WHATSAPP_CLOUD_ALLOW_ALL_USERS",
        allow_bots: "",
        allow_bots_from_config: false,
        allow_from_from_config: true,
        group_users: false,
        group_chats_env: "",
    },
    // Which Signal groups the bot listens in at all is the adapter's
    // `SIGNAL_GROUP_ALLOWED_USERS` (group ids, as in Hermes); a sender there still needs
    // `SIGNAL_ALLOWED_USERS` unless the group's id is also in hermesd's
    // `SIGNAL_GROUP_ALLOWED_CHATS`, which admits its members as guests.
    PlatformNames {
        name: "signal",
        allowed_users: "SIGNAL_ALLOWED_USERS",
        allow_all_users: "SIGNAL_ALLOW_ALL_USERS",
        allow_bots: "SIGNAL_ALLOW_BOTS",
        allow_bots_from_config: false,
        allow_from_from_config: false,
        group_users: false,
        group_chats_env: "SIGNAL_GROUP_ALLOWED_CHATS",
    },
];

/// Signal groups are listed by their id, as in `SIGNAL_GROUP_ALLOWED_USERS`; the adapter
/// names a group's chat `group:<id>`. Either spelling is accepted; `*` is kept.
fn signal_group_chats(entries: &[String]) -> Vec<String> {
    entries
        .iter()
        .map(|entry| match entry.as_str() {
            "*" => entry.clone(),
            id if id.starts_with("group:") => id.to_owned(),
            id => format!("group:{id}"),
        })
        .collect()
}

/// WhatsApp users are their bare `wa_id` (the number's digits): an entry written as a phone
/// number (`+49 151 …`) or a Baileys JID (`…@s.whatsapp.net`) is reduced to those digits, as
/// the reference does; `*` and entries without digits are kept.
fn bare_wa_ids(entries: &[String]) -> Vec<String> {
    entries
        .iter()
        .map(|entry| {
            let local = entry.split('@').next().unwrap_or(entry);
            let digits: String = local.chars().filter(char::is_ascii_digit).collect();
            if digits.is_empty() {
                entry.clone()
            } else {
                digits
            }
        })
        .collect()
}

/// An env var's trimmed value when set and non-blank.
fn env_value<'a>(env: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    env.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// The reference's truthy spellings for the allow-all flags (stricter than config's bool).
fn truthy(value: &str) -> bool {
    matches!(value.to_lowercase().as_str(), "true" | "1" | "yes")
}

/// A comma-separated list, trimmed, blanks dropped.
fn split_list(raw: &str) -> Vec<String> {
    raw.split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A config value as the reference's `str(value)` would put it into an env var: lists are
/// joined with commas, booleans are lowercased.
fn config_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(text) => Some(text.clone()),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Number(number) => Some(number.to_string()),
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(config_text)
                .collect::<Vec<_>>()
                .join(","),
        ),
        Value::Object(_) => None,
    }
}

/// The env var's list, else the `extra` key's.
fn list_from(env: &BTreeMap<String, String>, var: &str, extra: &Extra, key: &str) -> Vec<String> {
    match env_value(env, var) {
        Some(raw) => split_list(raw),
        None => extra
            .get(key)
            .and_then(config_text)
            .map(|raw| split_list(&raw))
            .unwrap_or_default(),
    }
}

fn extra_text(extra: &Extra, key: &str) -> Option<String> {
    extra.get(key).and_then(config_text)
}

fn platform_access(
    names: &PlatformNames,
    platform: &PlatformConfig,
    global_dm: DmBehavior,
    env: &BTreeMap<String, String>,
) -> PlatformAccess {
    let extra = &platform.extra;
    let allowed_users = if let Some(raw) = env_value(env, names.allowed_users) {
        split_list(raw)
    } else if !platform.allowed_users.is_empty() || !names.allow_from_from_config {
        platform.allowed_users.clone()
    } else {
        extra_text(extra, "allow_from")
            .map(|raw| split_list(&raw))
            .unwrap_or_default()
    };
    let allow_bots = env_value(env, names.allow_bots)
        .map(str::to_owned)
        .or_else(|| {
            names
                .allow_bots_from_config
                .then(|| extra_text(extra, "allow_bots"))
                .flatten()
        })
        .map(|v| matches!(v.trim().to_lowercase().as_str(), "mentions" | "all"))
        .unwrap_or(false);
    let group_allowed_users = if names.group_users {
        list_from(
            env,
            "TELEGRAM_GROUP_ALLOWED_USERS",
            extra,
            "group_allow_from",
        )
    } else {
        Vec::new()
    };
    let group_allowed_chats = list_from(env, names.group_chats_env, extra, "group_allowed_chats");
    PlatformAccess {
        allowed_users,
        allow_all_users: env_value(env, names.allow_all_users)
            .map(truthy)
            .unwrap_or(platform.allow_all_users),
        group_allowed_users,
        group_allowed_chats,
        allow_bots,
        dm_policy: extra_text(extra, "dm_policy")
            .map(|v| v.trim().to_lowercase())
            .unwrap_or_default(),
        // Present but not `pair`/`ignore` falls back to the global value, as in the reference.
        unauthorized_dm_behavior: extra.get("unauthorized_dm_behavior").map(|value| {
            match value.as_str().map(|v| v.trim().to_lowercase()).as_deref() {
                Some("pair") => DmBehavior::Pair,
                Some("ignore") => DmBehavior::Ignore,
                _ => global_dm,
            }
        }),
        authorization_is_upstream: false,
    }
}

impl AuthPolicy {
    /// Builds the policy from the validated config and `env`: the environment after the
    /// `.env` merge (`LoadedConfig::env`), which carries the env-only variables
    /// (`TELEGRAM_GROUP_ALLOWED_*`, `*_ALLOW_BOTS`).
    pub fn from_config(config: &Config, env: &BTreeMap<String, String>) -> Self {
        let global_dm = config.unauthorized_dm_behavior;
        let chat_configs = [
            &config.platforms.telegram,
            &config.platforms.discord,
            &config.platforms.slack,
            &config.platforms.whatsapp_cloud,
            &config.platforms.signal,
        ];
        let mut platforms: BTreeMap<String, PlatformAccess> = CHAT_PLATFORMS
            .iter()
            .zip(chat_configs)
            .map(|(names, platform)| {
                let mut access = platform_access(names, platform, global_dm, env);
                if names.name == "whatsapp_cloud" {
                    access.allowed_users = bare_wa_ids(&access.allowed_users);
                }
                if names.name == "signal" {
                    access.group_allowed_chats = signal_group_chats(&access.group_allowed_chats);
                }
                (names.name.to_owned(), access)
            })
            .collect();
        // The API server checks API_SERVER_KEY on every request before an event exists.
        platforms.insert(
            "api_server".to_owned(),
            PlatformAccess {
                authorization_is_upstream: true,
                ..PlatformAccess::default()
            },
        );
        Self {
            platforms,
            gateway_allowed_users: env_value(env, "GATEWAY_ALLOWED_USERS")
                .map(split_list)
                .unwrap_or_else(|| config.gateway.allowed_users.clone()),
            gateway_allow_all_users: env_value(env, "GATEWAY_ALLOW_ALL_USERS")
                .map(truthy)
                .unwrap_or(config.gateway.allow_all_users),
            unauthorized_dm_behavior: global_dm,
        }
    }

    /// The settings of `platform`; an unknown platform has none (nothing allowed by it).
    pub fn access(&self, platform: &str) -> &PlatformAccess {
        static NONE: PlatformAccess = PlatformAccess {
            allowed_users: Vec::new(),
            allow_all_users: false,
            group_allowed_users: Vec::new(),
            group_allowed_chats: Vec::new(),
            allow_bots: false,
            dm_policy: String::new(),
            unauthorized_dm_behavior: None,
            authorization_is_upstream: false,
        };
        self.platforms.get(platform).unwrap_or(&NONE)
    }
}
