//! The Signal adapter's settings, read from the platform's `extra` map and Hermes' env vars
//! (`SIGNAL_HTTP_URL`, `SIGNAL_ACCOUNT`, `SIGNAL_GROUP_ALLOWED_USERS`,
//! `SIGNAL_REQUIRE_MENTION`); every problem comes back as one line naming its key.

use std::collections::BTreeMap;
use std::path::PathBuf;

use hermes_adapter::net::Net;
use serde_json::{Map, Value};
use url::Url;

/// Signal attachments above this many bytes are not fetched or sent (the service's 100 MB).
pub const MAX_ATTACHMENT_BYTES: u64 = 100 * 1024 * 1024;

/// The `extra` keys this adapter reads, then those the gateway core reads from every
/// platform's `extra` (who may talk to the bot); any other is reported, never silently
/// dropped.
pub const EXTRA_KEYS: &[&str] = &[
    "http_url",
    "account",
    "require_mention",
    "ignore_stories",
    "group_allowed_users",
    "cache_dir",
    "dm_policy",
    "group_allowed_chats",
    "unauthorized_dm_behavior",
];

/// Which groups the bot answers in (`SIGNAL_GROUP_ALLOWED_USERS`: group ids, or `*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Groups {
    /// Not set: group messages are dropped (Hermes' safe default).
    Off,
    All,
    Only(Vec<String>),
}

impl Groups {
    pub fn allows(&self, group_id: &str) -> bool {
        match self {
            Groups::Off => false,
            Groups::All => true,
            Groups::Only(ids) => ids.iter().any(|id| id == group_id),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// The daemon's base URL (`signal-cli daemon --http`).
    pub http_url: Url,
    /// The bot's own account (an E.164 number or its ACI uuid).
    pub account: String,
    pub groups: Groups,
    /// In groups, answer only messages that mention the bot's account.
    pub require_mention: bool,
    pub ignore_stories: bool,
    /// Where fetched attachments are written.
    pub cache_dir: PathBuf,
    pub net: Net,
    /// Keys accepted but not acted on, as lines for the log.
    pub warnings: Vec<String>,
}

/// One raw value and where it came from.
fn raw<'a>(
    extra: &'a Map<String, Value>,
    env: &'a BTreeMap<String, String>,
    key: &str,
    var: &str,
) -> Option<(String, String)> {
    if let Some(value) = env.get(var).map(|v| v.trim()).filter(|v| !v.is_empty()) {
        return Some((var.to_owned(), value.to_owned()));
    }
    let value = extra.get(key)?;
    let text = match value {
        Value::Null => return None,
        Value::String(s) => s.trim().to_owned(),
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    };
    (!text.is_empty()).then(|| (format!("signal.extra.{key}"), text))
}

fn flag(raw: Option<(String, String)>, default: bool, errors: &mut Vec<String>) -> bool {
    let Some((name, value)) = raw else {
        return default;
    };
    match value.to_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => true,
        "false" | "0" | "no" | "off" => false,
        _ => {
            errors.push(format!("{name} must be true or false, not {value:?}."));
            default
        }
    }
}

impl Settings {
    /// Reads and validates the settings; every problem is returned.
    pub fn from_config(
        extra: &Map<String, Value>,
        env: &BTreeMap<String, String>,
    ) -> Result<Settings, Vec<String>> {
        let mut errors = Vec::new();
        let net = Net::from_env(env).unwrap_or_else(|e| {
            errors.extend(e);
            Net::default()
        });
        let http_url = match raw(extra, env, "http_url", "SIGNAL_HTTP_URL") {
            None => {
                errors.push(
                    "SIGNAL_HTTP_URL (signal.extra.http_url) is required: the address of \
                     `signal-cli daemon --http`, such as http://localhost:8080."
                        .to_owned(),
                );
                None
            }
            Some((name, value)) => match Url::parse(value.trim_end_matches('/')) {
                Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Some(url),
                _ => {
                    errors.push(format!("{name} must be an http(s) URL, not {value:?}."));
                    None
                }
            },
        };
        let account = raw(extra, env, "account", "SIGNAL_ACCOUNT").map(|(_, v)| v);
        if account.is_none() {
            errors.push(
                "SIGNAL_ACCOUNT (signal.extra.account) is required: the bot's Signal number."
                    .to_owned(),
            );
        }
        let groups = match raw(
            extra,
            env,
            "group_allowed_users",
            "SIGNAL_GROUP_ALLOWED_USERS",
        ) {
            None => Groups::Off,
            Some((_, list)) => {
                let ids: Vec<String> = list
                    .split(',')
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned)
                    .collect();
                if ids.iter().any(|id| id == "*") {
                    Groups::All
                } else if ids.is_empty() {
                    Groups::Off
                } else {
                    Groups::Only(ids)
                }
            }
        };
        let require_mention = flag(
            raw(extra, env, "require_mention", "SIGNAL_REQUIRE_MENTION"),
            false,
            &mut errors,
        );
        let ignore_stories = flag(
            raw(extra, env, "ignore_stories", "SIGNAL_IGNORE_STORIES"),
            true,
            &mut errors,
        );
        let cache_dir = extra
            .get("cache_dir")
            .and_then(Value::as_str)
            .map(PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("hermes-signal"));
        let mut warnings = Vec::new();
        for key in extra.keys() {
            if !EXTRA_KEYS.contains(&key.as_str()) {
                warnings.push(format!(
                    "signal.extra.{key} is not implemented by hermesd's Signal adapter and is \
                     ignored"
                ));
            }
        }
        match (http_url, account, errors.is_empty()) {
            (Some(http_url), Some(account), true) => Ok(Settings {
                http_url,
                account,
                groups,
                require_mention,
                ignore_stories,
                cache_dir,
                net,
                warnings,
            }),
            _ => Err(errors),
        }
    }

    /// A daemon URL with `path` appended (the daemon may sit under a path prefix).
    pub fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.http_url.as_str().trim_end_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn env_vars_are_read_and_win_over_extra() {
        let extra = json!({"http_url": "http://10.0.0.1:9", "account": "+1000"});
        let settings = Settings::from_config(
            extra.as_object().unwrap(),
            &env(&[
                ("SIGNAL_HTTP_URL", "http://127.0.0.1:8080/"),
                ("SIGNAL_GROUP_ALLOWED_USERS", "abc=, def="),
                ("SIGNAL_REQUIRE_MENTION", "yes"),
            ]),
        )
        .unwrap();
        assert_eq!(
            settings.endpoint("/api/v1/rpc"),
            "http://127.0.0.1:8080/api/v1/rpc"
        );
        assert_eq!(settings.account, "+1000");
        assert_eq!(
            settings.groups,
            Groups::Only(vec!["abc=".into(), "def=".into()])
        );
        assert!(settings.require_mention && settings.ignore_stories);
    }

    #[test]
    fn groups_are_off_unless_listed_and_star_opens_them_all() {
        let base = [("SIGNAL_HTTP_URL", "http://h:1"), ("SIGNAL_ACCOUNT", "+1")];
        let off = Settings::from_config(&Map::new(), &env(&base)).unwrap();
        assert!(!off.groups.allows("g"));
        let mut all = base.to_vec();
        all.push(("SIGNAL_GROUP_ALLOWED_USERS", "*"));
        assert!(
            Settings::from_config(&Map::new(), &env(&all))
                .unwrap()
                .groups
                .allows("g")
        );
    }

    #[test]
    fn missing_and_bad_values_are_each_named() {
        let errors = Settings::from_config(&Map::new(), &env(&[])).unwrap_err();
        assert!(
            errors.iter().any(|e| e.contains("SIGNAL_HTTP_URL")),
            "{errors:?}"
        );
        assert!(
            errors.iter().any(|e| e.contains("SIGNAL_ACCOUNT")),
            "{errors:?}"
        );
        let errors = Settings::from_config(
            &Map::new(),
            &env(&[
                ("SIGNAL_HTTP_URL", "ftp://x"),
                ("SIGNAL_ACCOUNT", "+1"),
                ("SIGNAL_REQUIRE_MENTION", "maybe"),
            ]),
        )
        .unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
    }

    #[test]
    fn an_unknown_extra_key_is_reported() {
        let extra = json!({"http_url": "http://h:1", "account": "+1", "reactions": false});
        let settings = Settings::from_config(extra.as_object().unwrap(), &env(&[])).unwrap();
        assert_eq!(settings.warnings.len(), 1);
        assert!(settings.warnings[0].contains("signal.extra.reactions"));
    }
}
