//! The webhook listener's settings from `platforms.webhook.extra` (Hermes's keys: `host`,
//! `port`, `secret`, `rate_limit`, `max_body_bytes`, `routes`) and `WEBHOOK_PORT` /
//! `WEBHOOK_SECRET`, plus what only the core knows: the platforms running beside it and their
//! home channels, the home's subscription file, and how a skill turns into a message.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use hermes_adapter::Secret;
use hermes_adapter::net::Net;
use serde_json::{Map, Value};

use crate::route::{Deliver, Route};

pub const DEFAULT_PORT: u16 = 8644;
pub const DEFAULT_RATE_LIMIT: u32 = 30;
pub const DEFAULT_MAX_BODY_BYTES: usize = 1_048_576;
pub const SUBSCRIPTIONS_FILE: &str = "webhook_subscriptions.json";
pub const DEFAULT_GITHUB_API: &str = "https://api.github.com";

/// Keys of `platforms.webhook.extra` this adapter reads.
const EXTRA_KEYS: &[&str] = &[
    "host",
    "port",
    "secret",
    "rate_limit",
    "max_body_bytes",
    "routes",
    "github_api_url",
];

/// A chat platform a route may deliver to: its home channel, when it has one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliverTarget {
    pub home_chat: Option<String>,
    pub home_thread: Option<String>,
}

/// Builds the message for a route's skill: `(skill name, rendered prompt)` → the text the
/// agent gets, or `None` when the home has no such skill.
pub type SkillMessage = Arc<dyn Fn(&str, &str) -> Option<String> + Send + Sync>;

#[derive(Clone)]
pub struct Settings {
    pub addr: SocketAddr,
    pub global_secret: Option<Secret>,
    /// Accepted requests per route per minute.
    pub rate_limit: u32,
    pub max_body_bytes: usize,
    /// The routes from config.yaml; they win over subscriptions of the same name.
    pub routes: BTreeMap<String, Route>,
    /// The home: `webhook_subscriptions.json` lives there, `in_file` filters start there.
    pub home: PathBuf,
    /// The chat platforms this gateway runs, which routes may deliver to.
    pub targets: BTreeMap<String, DeliverTarget>,
    pub github_api: url::Url,
    pub github_token: Option<Secret>,
    pub skill_message: Option<SkillMessage>,
    pub net: Net,
    /// Settings read but without effect (reported once by the core).
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("addr", &self.addr)
            .field("routes", &self.routes.keys().collect::<Vec<_>>())
            .field("rate_limit", &self.rate_limit)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// Reads and checks the settings; every problem is reported, each naming its key.
    pub fn from_config(
        extra: &Map<String, Value>,
        env: &BTreeMap<String, String>,
        home: PathBuf,
        targets: BTreeMap<String, DeliverTarget>,
    ) -> Result<Settings, Vec<String>> {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        const P: &str = "platforms.webhook.extra";
        for key in extra.keys() {
            if key == "script_timeout_seconds" {
                warnings.push(format!(
                    "{P}.{key} has no effect: route scripts are not supported yet"
                ));
            } else if !EXTRA_KEYS.contains(&key.as_str()) {
                warnings.push(format!("unknown key '{P}.{key}'"));
            }
        }
        let host = match extra.get("host") {
            None | Some(Value::Null) => IpAddr::from([0, 0, 0, 0]),
            Some(Value::String(h)) if h.trim().is_empty() => IpAddr::from([0, 0, 0, 0]),
            Some(Value::String(h)) => match h.trim() {
                "localhost" => IpAddr::from([127, 0, 0, 1]),
                h => h.trim_matches(['[', ']']).parse().unwrap_or_else(|_| {
                    errors.push(format!("{P}.host: {h:?} is not an IP address"));
                    IpAddr::from([0, 0, 0, 0])
                }),
            },
            Some(other) => {
                errors.push(format!("{P}.host: must be a string, not {other}"));
                IpAddr::from([0, 0, 0, 0])
            }
        };
        let port = env
            .get("WEBHOOK_PORT")
            .filter(|p| !p.trim().is_empty())
            .map(|p| Value::String(p.trim().to_owned()))
            .or_else(|| extra.get("port").cloned());
        let port = number(
            port.as_ref(),
            &format!("WEBHOOK_PORT / {P}.port"),
            u64::from(DEFAULT_PORT),
            &mut errors,
        )
        .try_into()
        .unwrap_or_else(|_| {
            errors.push(format!("{P}.port: not a port number"));
            DEFAULT_PORT
        });
        let global_secret = env
            .get("WEBHOOK_SECRET")
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .or_else(|| extra.get("secret").and_then(Value::as_str).map(str::trim))
            .filter(|s| !s.is_empty())
            .map(Secret::new);
        let rate_limit = number(
            extra.get("rate_limit"),
            &format!("{P}.rate_limit"),
            u64::from(DEFAULT_RATE_LIMIT),
            &mut errors,
        );
        let rate_limit = u32::try_from(rate_limit).unwrap_or(u32::MAX);
        if rate_limit == 0 {
            errors.push(format!(
                "{P}.rate_limit: must be at least 1 request a minute"
            ));
        }
        let max_body_bytes = number(
            extra.get("max_body_bytes"),
            &format!("{P}.max_body_bytes"),
            DEFAULT_MAX_BODY_BYTES as u64,
            &mut errors,
        ) as usize;
        if max_body_bytes == 0 {
            errors.push(format!("{P}.max_body_bytes: must be at least 1"));
        }
        let github_api = extra
            .get("github_api_url")
            .and_then(Value::as_str)
            .or_else(|| env.get("GITHUB_API_URL").map(String::as_str))
            .unwrap_or(DEFAULT_GITHUB_API);
        let github_api = url::Url::parse(github_api.trim_end_matches('/')).unwrap_or_else(|e| {
            errors.push(format!("{P}.github_api_url: {e}"));
            url::Url::parse(DEFAULT_GITHUB_API).expect("static URL")
        });
        let github_token = ["GITHUB_TOKEN", "GH_TOKEN"]
            .iter()
            .find_map(|name| env.get(*name).map(|t| t.trim()).filter(|t| !t.is_empty()))
            .map(Secret::new);

        let mut routes = BTreeMap::new();
        match extra.get("routes") {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                for (name, block) in map {
                    let parsed = Route::parse(
                        &format!("{P}.routes"),
                        name,
                        block,
                        global_secret.as_ref(),
                        &mut warnings,
                    )
                    .and_then(|route| {
                        check_route(&route, host, &targets, &format!("{P}.routes"))?;
                        Ok(route)
                    });
                    match parsed {
                        Ok(route) => {
                            routes.insert(name.clone(), route);
                        }
                        Err(e) => errors.extend(e),
                    }
                }
            }
            Some(_) => errors.push(format!("{P}.routes: must be a mapping of route names")),
        }
        if github_token.is_none() && routes.values().any(|r| r.deliver == Deliver::GithubComment) {
            errors.push(
                "a webhook route delivers github_comment but neither GITHUB_TOKEN nor GH_TOKEN \
                 is set"
                    .to_owned(),
            );
        }
        let net = Net::from_env(env).unwrap_or_else(|net_errors| {
            errors.extend(net_errors);
            Net::default()
        });
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Settings {
            addr: SocketAddr::new(host, port),
            global_secret,
            rate_limit,
            max_body_bytes,
            routes,
            home,
            targets,
            github_api,
            github_token,
            skill_message: None,
            net,
            warnings,
        })
    }

    pub fn subscriptions_file(&self) -> PathBuf {
        self.home.join(SUBSCRIPTIONS_FILE)
    }

    pub fn is_loopback(&self) -> bool {
        self.addr.ip().is_loopback()
    }
}

/// What a route may only do with this listener and these platforms: no unauthenticated
/// route on a public address, no delivery to a platform this gateway does not run, a chat
/// to deliver to.
pub fn check_route(
    route: &Route,
    host: IpAddr,
    targets: &BTreeMap<String, DeliverTarget>,
    prefix: &str,
) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    let name = &route.name;
    if route.insecure() && !host.is_loopback() {
        errors.push(format!(
            "{prefix}.{name}.secret: INSECURE_NO_AUTH is only allowed when the listener is on a \
             loopback address (platforms.webhook.extra.host), not {host}"
        ));
    }
    if let Deliver::Platform(platform) = &route.deliver {
        match targets.get(platform) {
            None => errors.push(format!(
                "{prefix}.{name}.deliver: '{platform}' is not a platform this gateway runs \
                 (running: {}; or use log / github_comment)",
                if targets.is_empty() {
                    "none".to_owned()
                } else {
                    targets.keys().cloned().collect::<Vec<_>>().join(", ")
                }
            )),
            Some(target) => {
                let has_chat = route
                    .deliver_extra
                    .get("chat_id")
                    .is_some_and(|v| !v.is_null() && v.as_str() != Some(""));
                if !has_chat && target.home_chat.is_none() {
                    errors.push(format!(
                        "{prefix}.{name}.deliver_extra.chat_id: required, {platform} has no \
                         home channel"
                    ));
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn number(value: Option<&Value>, key: &str, default: u64, errors: &mut Vec<String>) -> u64 {
    match value {
        None | Some(Value::Null) => default,
        Some(Value::Number(n)) => n.as_u64().unwrap_or_else(|| {
            errors.push(format!("{key}: must be a whole number"));
            default
        }),
        Some(Value::String(s)) => s.trim().parse().unwrap_or_else(|_| {
            errors.push(format!("{key}: {s:?} is not a whole number"));
            default
        }),
        Some(other) => {
            errors.push(format!("{key}: must be a whole number, not {other}"));
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(extra: Value, env: &[(&str, &str)]) -> Result<Settings, Vec<String>> {
        let env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut targets = BTreeMap::new();
        targets.insert(
            "telegram".to_owned(),
            DeliverTarget {
                home_chat: Some("100".into()),
                home_thread: None,
            },
        );
        targets.insert("slack".to_owned(), DeliverTarget::default());
        Settings::from_config(
            extra.as_object().unwrap(),
            &env,
            PathBuf::from("/home"),
            targets,
        )
    }

    #[test]
    fn defaults_and_env_overrides() {
        let s = settings(json!({}), &[]).unwrap();
        assert_eq!(s.addr.port(), DEFAULT_PORT);
        assert_eq!(s.rate_limit, DEFAULT_RATE_LIMIT);
        assert_eq!(s.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
        let s = settings(
            json!({"port": 1, "routes": {"a": {}}}),
            &[("WEBHOOK_PORT", "9000"), ("WEBHOOK_SECRET", "env-secret")],
        )
        .unwrap();
        assert_eq!(s.addr.port(), 9000);
        assert_eq!(s.routes["a"].secret.expose(), "env-secret");
    }

    #[test]
    fn insecure_routes_only_on_loopback() {
        let extra = json!({"routes": {"t": {"secret": "INSECURE_NO_AUTH"}}});
        let errors = settings(extra.clone(), &[]).unwrap_err();
        assert!(errors[0].contains("only allowed when the listener is on a loopback"));
        let mut local = extra;
        local["host"] = json!("127.0.0.1");
        assert!(settings(local, &[]).is_ok());
    }

    #[test]
    fn delivery_needs_a_running_platform_and_a_chat() {
        let errors = settings(
            json!({"secret": "s", "routes": {"a": {"deliver": "signal"}, "b": {"deliver": "slack"}}}),
            &[],
        )
        .unwrap_err();
        assert!(
            errors
                .iter()
                .any(|e| e.contains("'signal' is not a platform this gateway runs"))
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("routes.b.deliver_extra.chat_id: required"))
        );
        // Telegram has a home channel.
        assert!(
            settings(
                json!({"secret": "s", "routes": {"a": {"deliver": "telegram"}}}),
                &[]
            )
            .is_ok()
        );
    }

    #[test]
    fn github_comments_need_a_token() {
        let extra = json!({"secret": "s", "routes": {"pr": {"deliver": "github_comment",
            "deliver_extra": {"repo": "{repository.full_name}", "pr_number": "{number}"}}}});
        let errors = settings(extra.clone(), &[]).unwrap_err();
        assert!(errors[0].contains("GITHUB_TOKEN"));
        assert!(settings(extra, &[("GITHUB_TOKEN", "ghp_x")]).is_ok());
    }

    #[test]
    fn unknown_keys_are_reported_not_ignored() {
        let s = settings(json!({"colour": 1, "script_timeout_seconds": 5}), &[]).unwrap();
        assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
    }
}
