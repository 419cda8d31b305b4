//! The adapter's settings, read from the platform's `extra` map and the environment variables
//! the Python reference reads (env wins when set and non-empty). Every problem is reported,
//! each naming its key or variable.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::endpoints::Endpoints;
use hermes_adapter::Secret;

/// getFile's cap (https://core.telegram.org/bots/api#getfile: "up to 20 MB"); it holds for
/// any server not started with `--local`, whatever `base_url` says.
const CLOUD_FILE_CAP: u64 = 20 * 1024 * 1024;
/// A local Bot API server in `--local` mode has no download cap of its own
/// (https://github.com/tdlib/telegram-bot-api#usage); 2 GiB is its upload limit.
const LOCAL_FILE_CAP: u64 = 2 * 1024 * 1024 * 1024;
/// `gateway.max_inbound_media_bytes` default in the reference.
const DEFAULT_INBOUND_MEDIA_CAP: u64 = 128 * 1024 * 1024;

/// Which chunks of a reply quote the user's message (`TELEGRAM_REPLY_TO_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyToMode {
    Off,
    First,
    All,
}

#[derive(Debug, Clone)]
pub struct WebhookSettings {
    pub url: String,
    pub secret: Secret,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub token: Secret,
    /// Method and file-download URL prefixes (`extra.base_url`, `extra.base_file_url`).
    pub endpoints: Endpoints,
    /// `extra.local_mode`: a local Bot API server started with `--local`, whose getFile
    /// answers an absolute path on its own filesystem (read from disk, no 20 MB cap).
    pub local_mode: bool,
    /// `extra.disable_link_previews`: sends and edits carry
    /// `link_preview_options: {is_disabled: true}`.
    pub disable_link_previews: bool,
    /// Webhook mode when set (`TELEGRAM_WEBHOOK_URL`); long polling otherwise.
    pub webhook: Option<WebhookSettings>,
    pub require_mention: bool,
    pub mention_patterns: Vec<regex::Regex>,
    pub free_response_chats: BTreeSet<String>,
    /// `<chat_id>:<thread_id>` entries.
    pub free_response_topics: BTreeSet<String>,
    pub allowed_chats: BTreeSet<String>,
    pub allowed_topics: BTreeSet<String>,
    pub ignored_threads: BTreeSet<i64>,
    pub exclusive_bot_mentions: bool,
    pub guest_mode: bool,
    pub reply_to_mode: ReplyToMode,
    pub text_batch_delay: Duration,
    pub text_batch_split_delay: Duration,
    pub media_group_delay: Duration,
    /// Where inbound attachments are downloaded.
    pub cache_dir: PathBuf,
    pub max_media_bytes: u64,
    /// The command menu registered with setMyCommands: (name, description), unsanitised.
    pub commands: Vec<(String, String)>,
    /// The long-poll `timeout` sent to getUpdates.
    pub poll_timeout: Duration,
    /// How long past `poll_timeout` a poll may take before it is abandoned as stalled.
    pub poll_margin: Duration,
    /// Bound on every other request.
    pub request_timeout: Duration,
    /// Proxies and TLS trust for every call (the core hands in its configured one).
    pub net: hermes_adapter::net::Net,
}

type Env = BTreeMap<String, String>;

impl Settings {
    pub fn from_config(
        token: &str,
        extra: &Map<String, Value>,
        env: &Env,
    ) -> Result<Settings, Vec<String>> {
        let mut errors = Vec::new();
        let net = hermes_adapter::net::Net::from_env(env).unwrap_or_else(|net_errors| {
            errors.extend(net_errors);
            hermes_adapter::net::Net::default()
        });
        let mut read = Reader {
            extra,
            env,
            errors: &mut errors,
        };
        if token.trim().is_empty() {
            read.errors
                .push("telegram: the bot token (TELEGRAM_BOT_TOKEN) is empty".into());
        }
        let base_url = read.string("base_url", None);
        let base_file_url = read.string("base_file_url", None);
        let endpoints = Endpoints::resolve(base_url.as_deref(), base_file_url.as_deref())
            .unwrap_or_else(|e| {
                read.errors.push(e);
                Endpoints::default()
            });
        let local_mode = read.flag_extra("local_mode", false);
        let webhook_url = read.string("webhook_url", Some("TELEGRAM_WEBHOOK_URL"));
        let webhook_secret = read.string("webhook_secret", Some("TELEGRAM_WEBHOOK_SECRET"));
        let webhook = match (webhook_url, webhook_secret) {
            (Some(url), Some(secret)) => {
                read.errors
                    .extend(crate::webhook_rules::check_set_webhook_rules(&url, &secret));
                Some(WebhookSettings {
                    url,
                    secret: Secret::new(secret),
                })
            }
            (Some(_), None) => {
                read.errors.push(
                    "telegram: webhook mode (TELEGRAM_WEBHOOK_URL) also needs TELEGRAM_WEBHOOK_SECRET".into(),
                );
                None
            }
            _ => None,
        };
        let reply_to_mode = match read
            .string("reply_to_mode", Some("TELEGRAM_REPLY_TO_MODE"))
            .as_deref()
        {
            None | Some("first") => ReplyToMode::First,
            Some("off") => ReplyToMode::Off,
            Some("all") => ReplyToMode::All,
            Some(other) => {
                read.errors.push(format!(
                    "telegram: reply_to_mode / TELEGRAM_REPLY_TO_MODE must be off, first or all, not {other:?}"
                ));
                ReplyToMode::First
            }
        };
        let text_batch_delay = read.seconds(
            "text_batch_delay_seconds",
            "HERMES_TELEGRAM_TEXT_BATCH_DELAY_SECONDS",
            0.3,
            0.08,
            2.0,
        );
        let split = read.seconds(
            "text_batch_split_delay_seconds",
            "HERMES_TELEGRAM_TEXT_BATCH_SPLIT_DELAY_SECONDS",
            1.0,
            0.0,
            4.0,
        );
        let max_inbound = read.number(
            "max_inbound_media_bytes",
            None,
            DEFAULT_INBOUND_MEDIA_CAP as f64,
        ) as u64;
        let file_cap = if local_mode {
            LOCAL_FILE_CAP
        } else {
            CLOUD_FILE_CAP
        };
        let cache_dir = read
            .string("cache_dir", None)
            .map(PathBuf::from)
            .or_else(|| {
                env.get("HERMES_HOME")
                    .filter(|h| !h.is_empty())
                    .map(|h| PathBuf::from(h).join("cache"))
            })
            .unwrap_or_else(|| std::env::temp_dir().join("hermes-telegram-cache"));
        let settings = Settings {
            token: Secret::new(token.trim()),
            endpoints,
            local_mode,
            disable_link_previews: read.flag_extra("disable_link_previews", false),
            webhook,
            require_mention: read.flag("require_mention", "TELEGRAM_REQUIRE_MENTION", false),
            mention_patterns: read.patterns(),
            free_response_chats: read.list("free_response_chats", "TELEGRAM_FREE_RESPONSE_CHATS"),
            free_response_topics: read
                .list("free_response_topics", "TELEGRAM_FREE_RESPONSE_TOPICS"),
            allowed_chats: read.list("allowed_chats", "TELEGRAM_ALLOWED_CHATS"),
            allowed_topics: read.list("allowed_topics", "TELEGRAM_ALLOWED_TOPICS"),
            ignored_threads: read.thread_ids(),
            exclusive_bot_mentions: read.flag(
                "exclusive_bot_mentions",
                "TELEGRAM_EXCLUSIVE_BOT_MENTIONS",
                true,
            ),
            guest_mode: read.flag("guest_mode", "TELEGRAM_GUEST_MODE", false),
            reply_to_mode,
            text_batch_delay,
            text_batch_split_delay: split.max(text_batch_delay),
            media_group_delay: read.seconds(
                "media_batch_delay_seconds",
                "HERMES_TELEGRAM_MEDIA_BATCH_DELAY_SECONDS",
                0.8,
                0.0,
                10.0,
            ),
            cache_dir,
            max_media_bytes: if max_inbound == 0 {
                file_cap
            } else {
                file_cap.min(max_inbound)
            },
            commands: Vec::new(),
            poll_timeout: read.seconds(
                "poll_timeout_seconds",
                "HERMES_TELEGRAM_POLL_TIMEOUT",
                25.0,
                0.0,
                50.0,
            ),
            poll_margin: read.seconds(
                "poll_margin_seconds",
                "HERMES_TELEGRAM_POLL_MARGIN",
                10.0,
                0.5,
                120.0,
            ),
            request_timeout: read.seconds(
                "request_timeout_seconds",
                "HERMES_TELEGRAM_READ_TIMEOUT",
                20.0,
                0.5,
                300.0,
            ),
            net,
        };
        if errors.is_empty() {
            Ok(settings)
        } else {
            Err(errors)
        }
    }

    /// Whether group gating lets through messages that neither mention nor reply to the bot,
    /// which Telegram only delivers with privacy mode off
    /// (https://core.telegram.org/bots/features#privacy-mode).
    pub fn needs_group_messages(&self) -> bool {
        !self.require_mention
            || !self.free_response_chats.is_empty()
            || !self.free_response_topics.is_empty()
            || !self.mention_patterns.is_empty()
    }

    /// The window within which a healthy poller reports progress (for the runner's watchdog).
    pub fn liveness_window(&self) -> Duration {
        self.poll_timeout + self.poll_margin * 2
    }
}

struct Reader<'a> {
    extra: &'a Map<String, Value>,
    env: &'a Env,
    errors: &'a mut Vec<String>,
}

impl Reader<'_> {
    fn env(&self, var: Option<&str>) -> Option<String> {
        self.env
            .get(var?)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// The env value, else the extra value, as text (lists stay JSON values).
    fn raw(&self, key: &str, var: Option<&str>) -> Option<Value> {
        if let Some(value) = self.env(var) {
            return Some(Value::String(value));
        }
        self.extra.get(key).filter(|v| !v.is_null()).cloned()
    }

    fn string(&mut self, key: &str, var: Option<&str>) -> Option<String> {
        match self.raw(key, var)? {
            Value::String(s) if s.trim().is_empty() => None,
            Value::String(s) => Some(s.trim().to_owned()),
            Value::Number(n) => Some(n.to_string()),
            other => {
                self.errors.push(format!(
                    "telegram: {} must be a string, not {other}",
                    name(key, var)
                ));
                None
            }
        }
    }

    fn flag(&mut self, key: &str, var: &str, default: bool) -> bool {
        self.flag_from(key, Some(var), default)
    }

    /// A flag that only `extra` sets (no environment variable).
    fn flag_extra(&mut self, key: &str, default: bool) -> bool {
        self.flag_from(key, None, default)
    }

    fn flag_from(&mut self, key: &str, var: Option<&str>, default: bool) -> bool {
        match self.raw(key, var) {
            None => default,
            Some(Value::Bool(b)) => b,
            Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => true,
                "false" | "0" | "no" | "off" => false,
                _ => {
                    self.errors.push(format!(
                        "telegram: {} must be true or false, not {s:?}",
                        name(key, var)
                    ));
                    default
                }
            },
            Some(other) => {
                self.errors.push(format!(
                    "telegram: {} must be true or false, not {other}",
                    name(key, var)
                ));
                default
            }
        }
    }

    fn number(&mut self, key: &str, var: Option<&str>, default: f64) -> f64 {
        let parsed = match self.raw(key, var) {
            None => return default,
            Some(Value::Number(n)) => n.as_f64(),
            Some(Value::String(s)) => s.parse::<f64>().ok(),
            Some(_) => None,
        };
        match parsed.filter(|v| v.is_finite() && *v >= 0.0) {
            Some(value) => value,
            None => {
                self.errors.push(format!(
                    "telegram: {} must be a non-negative number",
                    name(key, var)
                ));
                default
            }
        }
    }

    fn seconds(&mut self, key: &str, var: &str, default: f64, min: f64, max: f64) -> Duration {
        Duration::from_secs_f64(self.number(key, Some(var), default).clamp(min, max))
    }

    fn list(&mut self, key: &str, var: &str) -> BTreeSet<String> {
        match self.raw(key, Some(var)) {
            None => BTreeSet::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.trim().to_owned(),
                    other => other.to_string(),
                })
                .filter(|s| !s.is_empty())
                .collect(),
            Some(Value::String(s)) => s
                .split(',')
                .map(|p| p.trim().to_owned())
                .filter(|p| !p.is_empty())
                .collect(),
            Some(other) => [other.to_string()].into(),
        }
    }

    fn thread_ids(&mut self) -> BTreeSet<i64> {
        let mut ids = BTreeSet::new();
        for entry in self.list("ignored_threads", "TELEGRAM_IGNORED_THREADS") {
            match entry.parse() {
                Ok(id) => {
                    ids.insert(id);
                }
                Err(_) => self.errors.push(format!(
                    "telegram: ignored_threads / TELEGRAM_IGNORED_THREADS entry {entry:?} is not a thread id"
                )),
            }
        }
        ids
    }

    /// `mention_patterns`: a list or one string in extra; in the env a JSON list, else
    /// one pattern per line, else comma-separated (as the reference reads it).
    fn patterns(&mut self) -> Vec<regex::Regex> {
        let sources: Vec<String> = match self.env(Some("TELEGRAM_MENTION_PATTERNS")) {
            Some(raw) => match serde_json::from_str::<Vec<String>>(&raw) {
                Ok(list) => list,
                Err(_) if raw.contains('\n') => raw.lines().map(str::to_owned).collect(),
                Err(_) => raw.split(',').map(str::to_owned).collect(),
            },
            None => match self.extra.get("mention_patterns") {
                Some(Value::String(s)) => vec![s.clone()],
                Some(Value::Array(items)) => items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect(),
                _ => Vec::new(),
            },
        };
        let mut compiled = Vec::new();
        for source in sources.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
            match regex::RegexBuilder::new(source).case_insensitive(true).build() {
                Ok(re) => compiled.push(re),
                Err(e) => self.errors.push(format!(
                    "telegram: mention_patterns / TELEGRAM_MENTION_PATTERNS entry {source:?} is not a valid regex: {e}"
                )),
            }
        }
        compiled
    }
}

fn name(key: &str, var: Option<&str>) -> String {
    match var {
        Some(var) => format!("{key} / {var}"),
        None => format!("extra.{key}"),
    }
}
