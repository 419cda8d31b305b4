//! The adapter's settings: read once from `discord.extra` and the `DISCORD_*` variables the
//! reference reads (the variable wins when set and non-empty), every error reported at
//! once, each naming its key. The token is a [`Token`] whose Debug never shows it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

/// The bot token. Debug and Display print `***`; only the REST and gateway clients read it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn new(token: &str) -> Self {
        Self(token.trim().to_owned())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// `DISCORD_ALLOW_BOTS`: which bot authors may talk to the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowBots {
    None,
    /// Only bots that @mention this bot.
    Mentions,
    All,
}

/// A slash command to register at start (bulk overwrite of the global commands).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlashCommand {
    pub name: String,
    pub description: String,
    /// Registers one optional string option `args`, appended to the command text.
    pub takes_args: bool,
}

/// The missed-message backfill (`missed_message_backfill` / `DISCORD_MISSED_MESSAGE_BACKFILL*`).
#[derive(Debug, Clone, PartialEq)]
pub struct BackfillSettings {
    pub enabled: bool,
    /// Channels to scan; empty means every text channel the bot may answer in (not
    /// excluded by the allowed / ignored channel lists); `*` every text channel of the
    /// guilds. Known DM channels and bot threads are always added.
    pub channels: BTreeSet<String>,
    pub max_age: Duration,
    /// Messages per history request (Discord serves at most 100); a scan pages through as
    /// many as the window holds.
    pub limit: usize,
    /// Hand-overs per second during a scan (a pace, never a cut: every missed message is
    /// handed over).
    pub max_dispatches: usize,
}

/// Everything the Discord adapter needs; build it with [`Settings::from_config`].
#[derive(Debug, Clone)]
pub struct Settings {
    pub token: Token,
    /// `discord.extra.api_base_url`, default `https://discord.com/api/v10`.
    pub api_base_url: String,
    /// `discord.extra.gateway_url`; `None` asks `GET /gateway/bot` (a failure is an error).
    pub gateway_url: Option<String>,
    /// `discord.extra.shard_count`: how many shards the bot's guilds are split into
    /// (https://discord.com/developers/docs/events/gateway#sharding), each its own gateway
    /// connection; default 1.
    pub shard_count: u32,
    pub require_mention: bool,
    pub thread_require_mention: bool,
    pub ignore_no_mention: bool,
    pub free_response_channels: BTreeSet<String>,
    pub allowed_channels: BTreeSet<String>,
    pub ignored_channels: BTreeSet<String>,
    pub no_thread_channels: BTreeSet<String>,
    pub auto_thread: bool,
    pub allow_bots: AllowBots,
    pub bots_require_inline_mention: bool,
    pub allowed_roles: BTreeSet<String>,
    pub backfill: BackfillSettings,
    /// Per-attachment download cap in bytes; 0 means unlimited.
    pub max_attachment_bytes: u64,
    /// Where inbound attachments are cached; the core sets it under the Hermes home.
    pub cache_dir: PathBuf,
    /// Registered at start unless `DISCORD_COMMAND_SYNC_POLICY=off`.
    pub slash_commands: Vec<SlashCommand>,
    pub sync_commands: bool,
    /// Timeout of one REST request (a send that times out is `Ambiguous`).
    pub http_timeout: Duration,
    /// Reconnect backoff bounds.
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
    /// Consecutive failed connection attempts before `run` gives up (`Retryable`).
    pub max_connect_failures: u32,
    /// Wait before re-IDENTIFYing after INVALID_SESSION (Discord asks for 1–5 s).
    pub invalid_session_delay: Duration,
    /// Proxies and TLS trust for REST and the gateway socket (the core hands in its own).
    pub net: hermes_adapter::net::Net,
    /// How long a started session must live before a reconnect counts as healthy (no
    /// backoff); shorter ones back off like failed attempts.
    pub stable_after: Duration,
    /// Discord's identify window (5 s per `max_concurrency` IDENTIFYs); shorter in tests.
    pub identify_window: Duration,
}

const TRUE_WORDS: [&str; 4] = ["true", "1", "yes", "on"];
const FALSE_WORDS: [&str; 4] = ["false", "0", "no", "off"];

/// Reads one setting from the env map (wins when non-empty) or `extra`.
struct Reader<'a> {
    extra: &'a Map<String, Value>,
    env: &'a BTreeMap<String, String>,
    errors: Vec<String>,
}

impl Reader<'_> {
    fn raw(&self, key: &str, var: Option<&str>) -> Option<(String, Value)> {
        if let Some(var) = var
            && let Some(value) = self.env.get(var).filter(|v| !v.trim().is_empty())
        {
            return Some((var.to_owned(), Value::String(value.trim().to_owned())));
        }
        let value = self.extra.get(key)?;
        (!value.is_null()).then(|| (format!("discord.extra.{key}"), value.clone()))
    }

    fn bool(&mut self, key: &str, var: Option<&str>, default: bool) -> bool {
        match self.raw(key, var) {
            None => default,
            Some((_, Value::Bool(b))) => b,
            Some((name, value)) => {
                let text = scalar_text(&value).to_lowercase();
                if TRUE_WORDS.contains(&text.as_str()) {
                    true
                } else if FALSE_WORDS.contains(&text.as_str()) {
                    false
                } else {
                    self.errors.push(format!(
                        "{name} must be true or false (got {value}), e.g. true, false, 1, 0, yes, no"
                    ));
                    default
                }
            }
        }
    }

    fn set(&mut self, key: &str, var: Option<&str>) -> BTreeSet<String> {
        match self.raw(key, var) {
            None => BTreeSet::new(),
            Some((_, Value::Array(items))) => items
                .iter()
                .map(|item| scalar_text(item).trim().to_owned())
                .filter(|item| !item.is_empty())
                .collect(),
            Some((name, Value::Object(_))) => {
                self.errors.push(format!(
                    "{name} must list channel ids or names, as a YAML list or one comma-separated string"
                ));
                BTreeSet::new()
            }
            Some((_, value)) => scalar_text(&value)
                .split(',')
                .map(|item| item.trim().to_owned())
                .filter(|item| !item.is_empty())
                .collect(),
        }
    }

    fn number(&mut self, key: &str, var: Option<&str>, default: f64, min: f64, max: f64) -> f64 {
        match self.raw(key, var) {
            None => default,
            Some((name, value)) => match scalar_text(&value).trim().parse::<f64>() {
                Ok(n) if n.is_finite() && n >= min && n <= max => n,
                _ => {
                    self.errors.push(format!(
                        "{name} must be a number from {min} to {max} (got {value})"
                    ));
                    default
                }
            },
        }
    }

    fn string(&mut self, key: &str, var: Option<&str>) -> Option<String> {
        self.raw(key, var)
            .map(|(_, value)| scalar_text(&value).trim().to_owned())
            .filter(|s| !s.is_empty())
    }
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn check_url(errors: &mut Vec<String>, name: &str, url: &str, schemes: &[&str]) {
    if !schemes
        .iter()
        .any(|scheme| url.starts_with(&format!("{scheme}://")))
    {
        errors.push(format!(
            "{name} must be an absolute URL starting with {} (got {url:?})",
            schemes.join(":// or ") + "://"
        ));
    }
}

impl Settings {
    /// Builds the settings from the bot token, `discord.extra` and the environment map.
    pub fn from_config(
        token: &str,
        extra: &Map<String, Value>,
        env: &BTreeMap<String, String>,
    ) -> Result<Settings, Vec<String>> {
        let mut r = Reader {
            extra,
            env,
            errors: Vec::new(),
        };
        if token.trim().is_empty() {
            r.errors.push(
                "DISCORD_BOT_TOKEN (discord.token) is empty: the Discord adapter needs a bot token"
                    .into(),
            );
        } else if token.trim().chars().any(char::is_whitespace) {
            r.errors
                .push("DISCORD_BOT_TOKEN (discord.token) contains whitespace: it is not a valid bot token".into());
        }
        let api_base_url = r
            .string("api_base_url", None)
            .unwrap_or_else(|| "https://discord.com/api/v10".into())
            .trim_end_matches('/')
            .to_owned();
        check_url(
            &mut r.errors,
            "discord.extra.api_base_url",
            &api_base_url,
            &["https", "http"],
        );
        let gateway_url = r.string("gateway_url", None);
        if let Some(url) = &gateway_url {
            check_url(
                &mut r.errors,
                "discord.extra.gateway_url",
                url,
                &["wss", "ws"],
            );
        }
        let allow_bots = match r.raw("allow_bots", Some("DISCORD_ALLOW_BOTS")) {
            None => AllowBots::None,
            Some((name, value)) => match scalar_text(&value).trim().to_lowercase().as_str() {
                "none" | "" => AllowBots::None,
                "mentions" => AllowBots::Mentions,
                "all" => AllowBots::All,
                _ => {
                    r.errors.push(format!(
                        "{name} must be one of none, mentions, all (got {value})"
                    ));
                    AllowBots::None
                }
            },
        };
        let sync_commands =
            match r.string("command_sync_policy", Some("DISCORD_COMMAND_SYNC_POLICY")) {
                None => true,
                Some(policy) => match policy.to_lowercase().as_str() {
                    "safe" | "bulk" => true,
                    "off" => false,
                    other => {
                        r.errors.push(format!(
                        "DISCORD_COMMAND_SYNC_POLICY must be one of safe, bulk, off (got {other:?})"
                    ));
                        true
                    }
                },
            };
        let shard_count = read_shard_count(&mut r);
        let backfill = read_backfill(&mut r);
        let net = hermes_adapter::net::Net::from_env(env).unwrap_or_else(|net_errors| {
            r.errors.extend(net_errors);
            hermes_adapter::net::Net::default()
        });
        let settings = Settings {
            token: Token::new(token),
            api_base_url,
            gateway_url,
            shard_count,
            require_mention: r.bool("require_mention", Some("DISCORD_REQUIRE_MENTION"), true),
            thread_require_mention: r.bool(
                "thread_require_mention",
                Some("DISCORD_THREAD_REQUIRE_MENTION"),
                false,
            ),
            ignore_no_mention: r.bool("ignore_no_mention", Some("DISCORD_IGNORE_NO_MENTION"), true),
            free_response_channels: r.set(
                "free_response_channels",
                Some("DISCORD_FREE_RESPONSE_CHANNELS"),
            ),
            allowed_channels: r.set("allowed_channels", Some("DISCORD_ALLOWED_CHANNELS")),
            ignored_channels: r.set("ignored_channels", Some("DISCORD_IGNORED_CHANNELS")),
            no_thread_channels: r.set("no_thread_channels", Some("DISCORD_NO_THREAD_CHANNELS")),
            auto_thread: r.bool("auto_thread", Some("DISCORD_AUTO_THREAD"), true),
            allow_bots,
            bots_require_inline_mention: r.bool(
                "bots_require_inline_mention",
                Some("DISCORD_BOTS_REQUIRE_INLINE_MENTION"),
                false,
            ),
            allowed_roles: r.set("allowed_roles", Some("DISCORD_ALLOWED_ROLES")),
            backfill,
            max_attachment_bytes: r.number(
                "max_attachment_bytes",
                Some("DISCORD_MAX_ATTACHMENT_BYTES"),
                32.0 * 1024.0 * 1024.0,
                0.0,
                1e12,
            ) as u64,
            cache_dir: r
                .string("cache_dir", None)
                .map(PathBuf::from)
                .unwrap_or_else(|| std::env::temp_dir().join("hermesd-discord-cache")),
            slash_commands: Vec::new(),
            sync_commands: sync_commands && r.bool("slash_commands", None, true),
            http_timeout: Duration::from_secs(30),
            reconnect_min: Duration::from_secs(1),
            reconnect_max: Duration::from_secs(60),
            max_connect_failures: 10,
            invalid_session_delay: Duration::from_secs(2),
            net,
            stable_after: Duration::from_secs(60),
            identify_window: Duration::from_secs(5),
        };
        if r.errors.is_empty() {
            Ok(settings)
        } else {
            Err(r.errors)
        }
    }
}

/// `shard_count`: a positive whole number (Discord numbers shards 0..count).
fn read_shard_count(r: &mut Reader<'_>) -> u32 {
    let Some((name, value)) = r.raw("shard_count", None) else {
        return 1;
    };
    match scalar_text(&value).trim().parse::<u32>() {
        Ok(count) if count >= 1 => count,
        _ => {
            r.errors.push(format!(
                "{name} must be a whole number of shards, 1 or more (got {value})"
            ));
            1
        }
    }
}

/// `missed_message_backfill` is an object in `extra` (reference shape: `enabled`,
/// `channels`, `window_seconds`, `limit`, `max_dispatches`); the `DISCORD_MISSED_MESSAGE_
/// BACKFILL*` variables override its fields. Enabled by default here (the reference
/// defaults to off): hermesd promises that nothing sent while it was down is missed.
fn read_backfill(r: &mut Reader<'_>) -> BackfillSettings {
    let object = match r.extra.get("missed_message_backfill") {
        Some(Value::Object(map)) => map.clone(),
        Some(Value::Bool(enabled)) => {
            let mut map = Map::new();
            map.insert("enabled".into(), Value::Bool(*enabled));
            map
        }
        Some(Value::Null) | None => Map::new(),
        Some(other) => {
            r.errors.push(format!(
                "discord.extra.missed_message_backfill must be an object with enabled, channels, window_seconds, limit, max_dispatches (got {other})"
            ));
            Map::new()
        }
    };
    let mut inner = Reader {
        extra: &object,
        env: r.env,
        errors: Vec::new(),
    };
    let enabled = inner.bool("enabled", Some("DISCORD_MISSED_MESSAGE_BACKFILL"), true);
    let channels = inner.set("channels", Some("DISCORD_MISSED_MESSAGE_BACKFILL_CHANNELS"));
    let window = inner.number(
        "window_seconds",
        Some("DISCORD_MISSED_MESSAGE_BACKFILL_WINDOW_SECONDS"),
        21_600.0,
        60.0,
        30.0 * 86_400.0,
    );
    let limit = inner.number(
        "limit",
        Some("DISCORD_MISSED_MESSAGE_BACKFILL_LIMIT"),
        100.0,
        1.0,
        500.0,
    );
    let max_dispatches = inner.number(
        "max_dispatches",
        Some("DISCORD_MISSED_MESSAGE_BACKFILL_MAX_DISPATCHES"),
        10.0,
        1.0,
        100.0,
    );
    let errors = std::mem::take(&mut inner.errors);
    r.errors.extend(
        errors
            .into_iter()
            .map(|e| e.replace("discord.extra.", "discord.extra.missed_message_backfill.")),
    );
    BackfillSettings {
        enabled,
        channels,
        max_age: Duration::from_secs_f64(window),
        limit: limit as usize,
        max_dispatches: max_dispatches as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn extra(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn defaults_follow_the_reference() {
        let s = Settings::from_config("tok", &Map::new(), &BTreeMap::new()).unwrap();
        assert_eq!(s.api_base_url, "https://discord.com/api/v10");
        assert_eq!(s.gateway_url, None);
        assert_eq!(s.shard_count, 1);
        assert!(s.require_mention && s.auto_thread && s.ignore_no_mention);
        assert!(!s.thread_require_mention);
        assert_eq!(s.allow_bots, AllowBots::None);
        assert_eq!(s.max_attachment_bytes, 32 * 1024 * 1024);
        assert!(s.backfill.enabled);
        assert_eq!(s.backfill.limit, 100);
        assert_eq!(s.backfill.max_age, Duration::from_secs(21_600));
    }

    #[test]
    fn env_wins_over_extra_when_non_empty() {
        let extra = extra(
            json!({"require_mention": false, "free_response_channels": [123, "#general"], "allow_bots": "all"}),
        );
        let s = Settings::from_config(
            "tok",
            &extra,
            &env(&[
                ("DISCORD_REQUIRE_MENTION", "yes"),
                ("DISCORD_ALLOW_BOTS", ""),
            ]),
        )
        .unwrap();
        assert!(s.require_mention);
        assert_eq!(s.allow_bots, AllowBots::All);
        assert_eq!(
            s.free_response_channels,
            ["#general", "123"].map(String::from).into()
        );
        let s = Settings::from_config(
            "tok",
            &Map::new(),
            &env(&[("DISCORD_ALLOWED_CHANNELS", " 1, 2 ,,3")]),
        )
        .unwrap();
        assert_eq!(s.allowed_channels, ["1", "2", "3"].map(String::from).into());
    }

    #[test]
    fn every_error_is_reported_naming_its_key() {
        let extra = extra(
            json!({"api_base_url": "discord.com", "gateway_url": "http://x", "missed_message_backfill": {"limit": 0}}),
        );
        let errors = Settings::from_config(
            "",
            &extra,
            &env(&[
                ("DISCORD_ALLOW_BOTS", "some"),
                ("DISCORD_AUTO_THREAD", "maybe"),
            ]),
        )
        .unwrap_err();
        let joined = errors.join("\n");
        for key in [
            "DISCORD_BOT_TOKEN",
            "discord.extra.api_base_url",
            "discord.extra.gateway_url",
            "DISCORD_ALLOW_BOTS",
            "DISCORD_AUTO_THREAD",
            "discord.extra.missed_message_backfill.limit",
        ] {
            assert!(joined.contains(key), "{key} missing from {joined}");
        }
        assert_eq!(errors.len(), 6, "{joined}");
    }

    #[test]
    fn the_token_never_shows_in_debug() {
        let s = Settings::from_config("secret-token-value", &Map::new(), &BTreeMap::new()).unwrap();
        assert!(!format!("{s:?}").contains("secret-token-value"));
    }

    #[test]
    fn shard_count_is_a_positive_whole_number() {
        let read = |value: Value| {
            Settings::from_config(
                "tok",
                &extra(json!({"shard_count": value})),
                &BTreeMap::new(),
            )
        };
        assert_eq!(read(json!(4)).unwrap().shard_count, 4);
        assert_eq!(read(json!("2")).unwrap().shard_count, 2);
        for bad in [json!(0), json!(-1), json!(1.5), json!("many")] {
            let errors = read(bad.clone()).unwrap_err();
            assert!(
                errors
                    .iter()
                    .any(|e| e.starts_with("discord.extra.shard_count must be")),
                "{bad}: {errors:?}"
            );
        }
    }
}
