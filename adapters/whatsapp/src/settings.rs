//! The `whatsapp_cloud` settings: Hermes's `extra` keys and `WHATSAPP_CLOUD_*` variables (a
//! variable wins over the file, as in the reference), checked once when the adapter is built.
//! A key we know but do not act on is named in [`Settings::warnings`], never dropped quietly.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use hermes_adapter::Secret;
use hermes_adapter::net::Net;
use serde_json::{Map, Value};

/// Meta's Graph API host; `graph_api_url` points elsewhere (a test's fake, a proxy).
pub const GRAPH_API: &str = "https://graph.facebook.com";
/// The Graph version the reference pins.
pub const DEFAULT_API_VERSION: &str = "v20.0";
pub const DEFAULT_PORT: u16 = 8090;
pub const DEFAULT_PATH: &str = "/whatsapp/webhook";
/// Meta's webhook payloads are at most 3 MB.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// `(extra key, variable)` pairs the reference bridges from the environment into `extra`.
const FROM_ENV: &[(&str, &str)] = &[
    ("phone_number_id", "WHATSAPP_CLOUD_PHONE_NUMBER_ID"),
    ("access_token", "WHATSAPP_CLOUD_ACCESS_TOKEN"),
    ("app_id", "WHATSAPP_CLOUD_APP_ID"),
    ("app_secret", "WHATSAPP_CLOUD_APP_SECRET"),
    ("waba_id", "WHATSAPP_CLOUD_WABA_ID"),
    ("verify_token", "WHATSAPP_CLOUD_VERIFY_TOKEN"),
    ("webhook_host", "WHATSAPP_CLOUD_WEBHOOK_HOST"),
    ("webhook_port", "WHATSAPP_CLOUD_WEBHOOK_PORT"),
    ("webhook_path", "WHATSAPP_CLOUD_WEBHOOK_PATH"),
    ("api_version", "WHATSAPP_CLOUD_API_VERSION"),
    ("graph_api_url", "WHATSAPP_CLOUD_GRAPH_API_URL"),
];

/// Keys read by the gateway's authorization (allowlists, DM policy), not by this crate.
const CORE_KEYS: &[&str] = &[
    "allow_from",
    "allowFrom",
    "dm_policy",
    "unauthorized_dm_behavior",
    "group_allowed_chats",
];

/// Keys Hermes accepts that hermesd takes but does not act on, with the reason.
const NOT_USED: &[(&str, &str)] = &[
    ("app_id", "only identifies the app in Meta's dashboard"),
    ("waba_id", "the reference keeps it for analytics only"),
    (
        "health_path",
        "the health route is always /health on the webhook listener",
    ),
    (
        "reply_prefix",
        "a prefix on every answer is not implemented for WhatsApp Cloud",
    ),
    (
        "group_policy",
        "the Cloud API delivers direct chats only; group-shaped messages are dropped",
    ),
    (
        "group_allow_from",
        "the Cloud API delivers direct chats only; group-shaped messages are dropped",
    ),
    (
        "groupAllowFrom",
        "the Cloud API delivers direct chats only; group-shaped messages are dropped",
    ),
];

#[derive(Clone)]
pub struct Settings {
    pub phone_number_id: String,
    pub access_token: Secret,
    /// The key of `X-Hub-Signature-256`; without it every webhook POST is refused.
    pub app_secret: Option<Secret>,
    /// `hub.verify_token` of Meta's subscription handshake; without it the handshake fails.
    pub verify_token: Option<Secret>,
    pub addr: SocketAddr,
    pub webhook_path: String,
    pub api_version: String,
    pub graph_api: String,
    /// Where inbound attachments are cached (owner-only).
    pub cache_dir: PathBuf,
    pub net: Net,
    /// Keys accepted but not acted on, one sentence each, for the log and `doctor`.
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("phone_number_id", &self.phone_number_id)
            .field("access_token", &self.access_token)
            .field("app_secret", &self.app_secret)
            .field("verify_token", &self.verify_token)
            .field("addr", &self.addr)
            .field("webhook_path", &self.webhook_path)
            .field("api_version", &self.api_version)
            .field("graph_api", &self.graph_api)
            .finish_non_exhaustive()
    }
}

fn text(value: &Value) -> Option<String> {
    let text = match value {
        Value::String(s) => s.trim().to_owned(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

impl Settings {
    /// The merged settings, or every problem found (each naming its key).
    pub fn from_config(
        extra: &Map<String, Value>,
        env: &BTreeMap<String, String>,
        cache_dir: PathBuf,
        net: Net,
    ) -> Result<Self, Vec<String>> {
        let mut merged = extra.clone();
        for (key, var) in FROM_ENV {
            if let Some(value) = env.get(*var).map(|v| v.trim()).filter(|v| !v.is_empty()) {
                merged.insert((*key).to_owned(), Value::String(value.to_owned()));
            }
        }
        let get = |key: &str| merged.get(key).and_then(text);
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        for key in merged.keys() {
            let known = FROM_ENV.iter().any(|(k, _)| k == key) || CORE_KEYS.contains(&key.as_str());
            if let Some((_, why)) = NOT_USED.iter().find(|(k, _)| k == key) {
                warnings.push(format!(
                    "whatsapp_cloud.extra.{key} is accepted but not used: {why}"
                ));
            } else if !known {
                warnings.push(format!(
                    "whatsapp_cloud.extra.{key} is not a key hermesd knows; it is ignored"
                ));
            }
        }
        let phone_number_id = get("phone_number_id").unwrap_or_default();
        if phone_number_id.is_empty() {
            errors.push("whatsapp_cloud: WHATSAPP_CLOUD_PHONE_NUMBER_ID (extra.phone_number_id) is required".to_owned());
        } else if !phone_number_id.chars().all(|c| c.is_ascii_digit()) {
            errors.push(
                "whatsapp_cloud: the phone number id is Meta's numeric id, not a phone number"
                    .to_owned(),
            );
        }
        let access_token = get("access_token").unwrap_or_default();
        if access_token.is_empty() {
            errors.push(
                "whatsapp_cloud: WHATSAPP_CLOUD_ACCESS_TOKEN (extra.access_token) is required"
                    .to_owned(),
            );
        }
        let host = get("webhook_host").unwrap_or_else(|| "0.0.0.0".to_owned());
        let ip: Option<IpAddr> = host.parse().ok();
        if ip.is_none() {
            errors.push(format!(
                "whatsapp_cloud: webhook_host {host:?} is not an IP address"
            ));
        }
        let port = match get("webhook_port") {
            None => Some(DEFAULT_PORT),
            Some(raw) => raw.parse::<u16>().ok(),
        };
        if port.is_none() {
            errors.push("whatsapp_cloud: webhook_port is not a port number (0-65535)".to_owned());
        }
        let mut webhook_path = get("webhook_path").unwrap_or_else(|| DEFAULT_PATH.to_owned());
        if !webhook_path.starts_with('/') {
            webhook_path.insert(0, '/');
        }
        if webhook_path == "/health" {
            errors.push("whatsapp_cloud: webhook_path cannot be /health".to_owned());
        }
        let api_version = get("api_version").unwrap_or_else(|| DEFAULT_API_VERSION.to_owned());
        let valid_version = api_version.strip_prefix('v').is_some_and(|rest| {
            !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit() || c == '.')
        });
        if !valid_version {
            errors.push(format!(
                "whatsapp_cloud: api_version {api_version:?} is not like v20.0"
            ));
        }
        let graph_api = get("graph_api_url")
            .unwrap_or_else(|| GRAPH_API.to_owned())
            .trim_end_matches('/')
            .to_owned();
        if !graph_api.starts_with("http://") && !graph_api.starts_with("https://") {
            errors.push("whatsapp_cloud: graph_api_url must be an http(s) URL".to_owned());
        }
        let app_secret = get("app_secret").map(Secret::new);
        if app_secret.is_none() {
            warnings.push("whatsapp_cloud: WHATSAPP_CLOUD_APP_SECRET is not set; every webhook delivery is refused (503) until it is".to_owned());
        }
        let verify_token = get("verify_token").map(Secret::new);
        if verify_token.is_none() {
            warnings.push("whatsapp_cloud: WHATSAPP_CLOUD_VERIFY_TOKEN is not set; Meta's subscription handshake fails until it is".to_owned());
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Self {
            phone_number_id,
            access_token: Secret::new(access_token),
            app_secret,
            verify_token,
            addr: SocketAddr::new(
                ip.unwrap_or(IpAddr::from([0, 0, 0, 0])),
                port.unwrap_or(DEFAULT_PORT),
            ),
            webhook_path,
            api_version,
            graph_api,
            cache_dir,
            net,
            warnings,
        })
    }

    /// `{graph}/{version}/{path}`.
    pub fn graph_url(&self, path: &str) -> String {
        format!(
            "{}/{}/{}",
            self.graph_api,
            self.api_version,
            path.trim_start_matches('/')
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn build(extra: Value, env: &[(&str, &str)]) -> Result<Settings, Vec<String>> {
        let env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::from_config(
            extra.as_object().unwrap(),
            &env,
            PathBuf::from("/tmp/x"),
            Net::direct(),
        )
    }

    #[test]
    fn variables_win_over_the_file_and_defaults_follow_the_reference() {
        let s = build(
            json!({"phone_number_id": "111", "access_token": "file-token"}),
            &[
                ("WHATSAPP_CLOUD_ACCESS_TOKEN", "env-token"),
                ("WHATSAPP_CLOUD_APP_SECRET", "s"),
            ],
        )
        .unwrap();
        assert_eq!(s.access_token.expose(), "env-token");
        assert_eq!(s.addr.port(), 8090);
        assert_eq!(s.webhook_path, "/whatsapp/webhook");
        assert_eq!(
            s.graph_url("111/messages"),
            "https://graph.facebook.com/v20.0/111/messages"
        );
        assert!(
            s.warnings.iter().any(|w| w.contains("VERIFY_TOKEN")),
            "{:?}",
            s.warnings
        );
        assert!(
            !format!("{s:?}").contains("env-token"),
            "the token never shows"
        );
    }

    #[test]
    fn bad_values_are_named_and_unused_keys_reported() {
        let errors = build(
            json!({"phone_number_id": "+49 151", "webhook_port": "80a", "api_version": "20"}),
            &[],
        )
        .unwrap_err();
        let all = errors.join("\n");
        for needle in ["numeric id", "ACCESS_TOKEN", "webhook_port", "api_version"] {
            assert!(all.contains(needle), "{needle} missing from {all}");
        }
        let s = build(
            json!({"phone_number_id": "1", "access_token": "t", "waba_id": "9", "colour": "red",
                   "app_secret": "s", "verify_token": "v"}),
            &[],
        )
        .unwrap();
        assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
        assert!(s.warnings[0].contains("colour") || s.warnings[1].contains("colour"));
    }
}
