//! `Settings`: everything the Slack adapter reads from `slack.extra` and the `SLACK_*`
//! environment variables the Hermes reference reads, validated once, every error reported.
//!
//! Precedence follows the reference's YAML→env bridge (`_apply_yaml_config`): an env var
//! that is set and non-empty wins over the config key.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::connection::Tunables;
use hermes_adapter::Secret;

/// The public Web API.
pub const DEFAULT_API_BASE_URL: &str = "https://slack.com/api";
/// The reference's cap on a downloaded attachment (Slack's bot file limit).
pub const DEFAULT_MAX_ATTACHMENT_BYTES: u64 = 20 * 1024 * 1024;
/// The reference's default assistant status text while a turn runs.
pub const DEFAULT_TYPING_STATUS: &str = "is thinking...";

/// Which bot-authored messages may start turns (`SLACK_ALLOW_BOTS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowBots {
    /// Ignore every bot message (the default).
    None,
    /// Accept a bot message only when it mentions us.
    Mentions,
    /// Accept every bot message (our own are always ignored).
    All,
}

/// The Slack adapter's validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub bot_token: Secret,
    pub app_token: Secret,
    /// The Web API base, without a trailing slash (`slack.extra.api_base_url`).
    pub api_base_url: String,
    /// Reply in the message's thread (default); `false` answers top-level channel messages
    /// in the channel and keys one session per channel.
    pub reply_in_thread: bool,
    /// Each top-level DM starts its own thread session (reference default `true`).
    pub dm_top_level_threads_as_sessions: bool,
    pub require_mention: bool,
    pub strict_mention: bool,
    pub allow_bots: AllowBots,
    pub free_response_channels: BTreeSet<String>,
    /// When non-empty, only these channels are answered (DMs are never filtered).
    pub allowed_channels: BTreeSet<String>,
    /// Case-insensitive wake-word patterns that count as a mention.
    pub mention_patterns: Vec<String>,
    /// Add/swap progress reactions on addressed messages (`SLACK_REACTIONS`).
    pub reactions: bool,
    /// Assistant status shown while a turn runs.
    pub typing_status_text: String,
    /// Where downloaded attachments are written.
    pub cache_dir: PathBuf,
    pub max_attachment_bytes: u64,
    /// How often the socket is pinged (`slack.extra.socket_ping_interval_seconds`).
    pub socket_ping_interval: Duration,
    /// How long a socket may stay silent (no frame, no pong) before it is replaced
    /// (`slack.extra.socket_silence_seconds`).
    pub socket_silence_window: Duration,
    /// Proxies and TLS trust for the Web API and the socket (the core hands in its own).
    pub net: hermes_adapter::net::Net,
}

fn env_value<'a>(env: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    env.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// A raw setting: the env var's string when set, else the config key's JSON value.
enum Raw<'a> {
    Env(&'a str, &'a str),
    Extra(&'a str, &'a Value),
}

impl Raw<'_> {
    fn name(&self) -> String {
        match self {
            Raw::Env(name, _) => (*name).to_owned(),
            Raw::Extra(key, _) => format!("slack.extra.{key}"),
        }
    }
}

fn raw<'a>(
    extra: &'a Map<String, Value>,
    env: &'a BTreeMap<String, String>,
    key: &'a str,
    var: Option<&'a str>,
) -> Option<Raw<'a>> {
    if let Some(var) = var
        && let Some(value) = env_value(env, var)
    {
        return Some(Raw::Env(var, value));
    }
    extra
        .get(key)
        .filter(|v| !v.is_null())
        .map(|v| Raw::Extra(key, v))
}

const TRUE_WORDS: [&str; 4] = ["true", "1", "yes", "on"];
const FALSE_WORDS: [&str; 4] = ["false", "0", "no", "off"];

/// A boolean; `default_true` selects the reference's parsing: gates that default on are
/// only turned off by an explicit false word, and the reverse.
fn boolean(raw: Option<Raw<'_>>, default: bool, errors: &mut Vec<String>) -> bool {
    let Some(raw) = raw else { return default };
    let text = match &raw {
        Raw::Env(_, v) => v.to_lowercase(),
        Raw::Extra(_, Value::Bool(b)) => return *b,
        Raw::Extra(_, Value::String(s)) => s.trim().to_lowercase(),
        Raw::Extra(_, Value::Number(n)) => n.to_string(),
        Raw::Extra(_, _) => {
            errors.push(format!("{} must be true or false.", raw.name()));
            return default;
        }
    };
    if TRUE_WORDS.contains(&text.as_str()) {
        true
    } else if FALSE_WORDS.contains(&text.as_str()) {
        false
    } else {
        errors.push(format!(
            "{} must be true or false, not {text:?}.",
            raw.name()
        ));
        default
    }
}

/// A set of ids: a YAML list, or a comma-separated string.
fn id_set(raw: Option<Raw<'_>>, errors: &mut Vec<String>) -> BTreeSet<String> {
    let parts: Vec<String> = match &raw {
        None => return BTreeSet::new(),
        Some(Raw::Env(_, v)) => v.split(',').map(str::to_owned).collect(),
        Some(Raw::Extra(_, Value::Array(items))) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect(),
        Some(Raw::Extra(_, Value::String(s))) => s.split(',').map(str::to_owned).collect(),
        Some(Raw::Extra(_, Value::Number(n))) => vec![n.to_string()],
        Some(other) => {
            errors.push(format!(
                "{} must be a list of channel ids or a comma-separated string.",
                other.name()
            ));
            return BTreeSet::new();
        }
    };
    parts
        .iter()
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Mention patterns: a YAML list or string; the env var holds a JSON array, or values split
/// by newlines or commas (reference `_slack_mention_patterns`). Each must compile.
fn patterns(raw: Option<Raw<'_>>, errors: &mut Vec<String>) -> Vec<String> {
    let list: Vec<String> = match &raw {
        None => return Vec::new(),
        Some(Raw::Env(_, v)) => match serde_json::from_str::<Vec<String>>(v) {
            Ok(list) => list,
            Err(_) => v.replace('\n', ",").split(',').map(str::to_owned).collect(),
        },
        Some(Raw::Extra(_, Value::String(s))) => vec![s.clone()],
        Some(Raw::Extra(_, Value::Array(items))) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        Some(other) => {
            errors.push(format!(
                "{} must be a list of regular expressions.",
                other.name()
            ));
            return Vec::new();
        }
    };
    let name = raw.as_ref().map(Raw::name).unwrap_or_default();
    let mut valid = Vec::new();
    for pattern in list.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        match crate::gating::compile_pattern(pattern) {
            Ok(_) => valid.push(pattern.to_owned()),
            Err(e) => errors.push(format!(
                "{name} has an invalid regular expression {pattern:?}: {e}."
            )),
        }
    }
    valid
}

fn text(raw: Option<Raw<'_>>, errors: &mut Vec<String>) -> Option<String> {
    match raw? {
        Raw::Env(_, v) => Some(v.to_owned()),
        Raw::Extra(_, Value::String(s)) => Some(s.trim().to_owned()),
        other => {
            errors.push(format!("{} must be a string.", other.name()));
            None
        }
    }
}

fn allow_bots(raw: Option<Raw<'_>>, errors: &mut Vec<String>) -> AllowBots {
    let Some(raw) = raw else {
        return AllowBots::None;
    };
    let value = match &raw {
        Raw::Env(_, v) => v.to_lowercase(),
        Raw::Extra(_, Value::String(s)) => s.trim().to_lowercase(),
        Raw::Extra(_, Value::Bool(false)) => "none".into(),
        Raw::Extra(_, Value::Bool(true)) => "all".into(),
        Raw::Extra(_, other) => other.to_string(),
    };
    match value.as_str() {
        "none" | "" => AllowBots::None,
        "mentions" => AllowBots::Mentions,
        "all" => AllowBots::All,
        _ => {
            errors.push(format!(
                "{} must be one of none, mentions, all; not {value:?}.",
                raw.name()
            ));
            AllowBots::None
        }
    }
}

/// Whether `host` is a loopback address or `localhost` (plain-text transport allowed).
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn api_base_url(raw: Option<Raw<'_>>, errors: &mut Vec<String>) -> String {
    let Some(url) = text(raw, errors) else {
        return DEFAULT_API_BASE_URL.to_owned();
    };
    let trimmed = url.trim_end_matches('/').to_owned();
    match reqwest::Url::parse(&trimmed) {
        Ok(parsed) if parsed.scheme() == "https" => trimmed,
        Ok(parsed)
            if parsed.scheme() == "http" && parsed.host_str().is_some_and(is_loopback_host) =>
        {
            trimmed
        }
        Ok(_) => {
            errors.push(format!(
                "slack.extra.api_base_url must be an https URL (plain http only for a loopback \
                 host), not {trimmed:?}."
            ));
            DEFAULT_API_BASE_URL.to_owned()
        }
        Err(e) => {
            errors.push(format!(
                "slack.extra.api_base_url is not a valid URL ({e})."
            ));
            DEFAULT_API_BASE_URL.to_owned()
        }
    }
}

fn cache_dir(
    raw: Option<Raw<'_>>,
    env: &BTreeMap<String, String>,
    errors: &mut Vec<String>,
) -> PathBuf {
    if let Some(dir) = text(raw, errors) {
        return PathBuf::from(dir);
    }
    match env_value(env, "HERMES_HOME") {
        Some(home) => PathBuf::from(home).join("cache").join("slack"),
        None => std::env::temp_dir().join("hermes-slack-cache"),
    }
}

fn max_bytes(raw: Option<Raw<'_>>, errors: &mut Vec<String>) -> u64 {
    let Some(raw) = raw else {
        return DEFAULT_MAX_ATTACHMENT_BYTES;
    };
    let parsed = match &raw {
        Raw::Env(_, v) => v.parse::<u64>().ok(),
        Raw::Extra(_, Value::Number(n)) => n.as_u64(),
        Raw::Extra(_, Value::String(s)) => s.trim().parse::<u64>().ok(),
        Raw::Extra(_, _) => None,
    };
    match parsed {
        Some(n) if n > 0 => n,
        _ => {
            errors.push(format!(
                "{} must be a positive number of bytes.",
                raw.name()
            ));
            DEFAULT_MAX_ATTACHMENT_BYTES
        }
    }
}

/// A positive duration in seconds (fractions allowed), for the socket's liveness timings.
fn seconds(raw: Option<Raw<'_>>, default: Duration, errors: &mut Vec<String>) -> Duration {
    let Some(raw) = raw else { return default };
    let parsed = match &raw {
        Raw::Env(_, v) => v.parse::<f64>().ok(),
        Raw::Extra(_, Value::Number(n)) => n.as_f64(),
        Raw::Extra(_, Value::String(s)) => s.trim().parse::<f64>().ok(),
        Raw::Extra(_, _) => None,
    };
    match parsed {
        Some(secs) if secs.is_finite() && secs > 0.0 && secs <= 3600.0 => {
            Duration::from_secs_f64(secs)
        }
        _ => {
            errors.push(format!(
                "{} must be a positive number of seconds (at most 3600).",
                raw.name()
            ));
            default
        }
    }
}

impl Settings {
    /// Reads and validates the settings; `token` is `SLACK_BOT_TOKEN` (xoxb), `app_token`
    /// `SLACK_APP_TOKEN` (xapp, Socket Mode). Every problem is returned, each naming its
    /// key or variable; no message contains a token.
    pub fn from_config(
        token: &str,
        app_token: &str,
        extra: &Map<String, Value>,
        env: &BTreeMap<String, String>,
    ) -> Result<Settings, Vec<String>> {
        let mut errors = Vec::new();
        let net = hermes_adapter::net::Net::from_env(env).unwrap_or_else(|net_errors| {
            errors.extend(net_errors);
            hermes_adapter::net::Net::default()
        });
        let token = token.trim();
        let app_token = app_token.trim();
        if token.is_empty() {
            errors.push("SLACK_BOT_TOKEN (slack.token) is required.".to_owned());
        }
        if app_token.is_empty() {
            errors
                .push("SLACK_APP_TOKEN (slack.app_token) is required for Socket Mode.".to_owned());
        } else if !app_token.starts_with("xapp-") {
            errors.push(
                "SLACK_APP_TOKEN (slack.app_token) must be an app-level token starting with \
                 xapp- (scope connections:write)."
                    .to_owned(),
            );
        }
        let r = |key, var| raw(extra, env, key, var);
        let settings = Settings {
            bot_token: Secret::new(token),
            app_token: Secret::new(app_token),
            api_base_url: api_base_url(r("api_base_url", None), &mut errors),
            reply_in_thread: boolean(r("reply_in_thread", None), true, &mut errors),
            dm_top_level_threads_as_sessions: boolean(
                r("dm_top_level_threads_as_sessions", None),
                true,
                &mut errors,
            ),
            require_mention: boolean(
                r("require_mention", Some("SLACK_REQUIRE_MENTION")),
                true,
                &mut errors,
            ),
            strict_mention: boolean(
                r("strict_mention", Some("SLACK_STRICT_MENTION")),
                false,
                &mut errors,
            ),
            allow_bots: allow_bots(r("allow_bots", Some("SLACK_ALLOW_BOTS")), &mut errors),
            free_response_channels: id_set(
                r(
                    "free_response_channels",
                    Some("SLACK_FREE_RESPONSE_CHANNELS"),
                ),
                &mut errors,
            ),
            allowed_channels: id_set(
                r("allowed_channels", Some("SLACK_ALLOWED_CHANNELS")),
                &mut errors,
            ),
            mention_patterns: patterns(
                r("mention_patterns", Some("SLACK_MENTION_PATTERNS")),
                &mut errors,
            ),
            reactions: boolean(r("reactions", Some("SLACK_REACTIONS")), true, &mut errors),
            typing_status_text: text(r("typing_status_text", None), &mut errors)
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| DEFAULT_TYPING_STATUS.to_owned()),
            cache_dir: cache_dir(r("cache_dir", None), env, &mut errors),
            max_attachment_bytes: max_bytes(
                r("max_attachment_bytes", Some("SLACK_MAX_ATTACHMENT_BYTES")),
                &mut errors,
            ),
            socket_ping_interval: seconds(
                r("socket_ping_interval_seconds", None),
                Tunables::default().ping_interval,
                &mut errors,
            ),
            socket_silence_window: seconds(
                r("socket_silence_seconds", None),
                Tunables::default().silence_window,
                &mut errors,
            ),
            net,
        };
        if errors.is_empty() {
            Ok(settings)
        } else {
            Err(errors)
        }
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
