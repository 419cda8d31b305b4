//! The validated network-facing settings: chat platforms, the API server, the admin endpoint
//! and the gateway-wide allowlist.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Serialize, Serializer};
use serde_json::Value;

use super::choice::ReplyToMode;
use super::secret::{REDACTED, Secret, looks_secret};

/// Gateway-wide allowlist (`GATEWAY_ALLOWED_USERS`, `GATEWAY_ALLOW_ALL_USERS`) and what a
/// guest's turn may use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GatewayAccess {
    pub allowed_users: Vec<String>,
    pub allow_all_users: bool,
    /// `gateway.guest_tools`: the toolsets and tools of a guest's turn (someone admitted only
    /// because their group is allowed), a hermesd key.
    pub guest_tools: Vec<String>,
}

impl Default for GatewayAccess {
    fn default() -> Self {
        Self {
            allowed_users: Vec::new(),
            allow_all_users: false,
            guest_tools: super::toolset_names::default_guest_tools(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Platforms {
    pub telegram: PlatformConfig,
    pub discord: PlatformConfig,
    pub slack: PlatformConfig,
    pub signal: PlatformConfig,
    pub webhook: WebhookPlatform,
    /// `platforms.whatsapp_cloud`: the Cloud API's own settings (the sending number's id, the
    /// Graph token, the signing secret…) stay in `extra`; the WhatsApp adapter checks them.
    pub whatsapp_cloud: PlatformConfig,
}

/// `platforms.webhook`: whether the listener runs, and its `extra` (port, secrets, routes),
/// which the webhook adapter validates when it is built.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct WebhookPlatform {
    pub enabled: bool,
    pub extra: Extra,
}

/// One chat platform, merged from every place Hermes accepts it and from its env vars.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlatformConfig {
    pub enabled: bool,
    pub token: Option<Secret>,
    /// Slack only: the `xapp-` Socket Mode token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_token: Option<Secret>,
    pub reply_to_mode: ReplyToMode,
    pub allowed_users: Vec<String>,
    pub allow_all_users: bool,
    pub home_channel: Option<HomeChannel>,
    pub typing_indicator: bool,
    pub gateway_restart_notification: bool,
    /// Free-form platform settings (Hermes' `extra`, plus per-platform keys bridged into it).
    pub extra: Extra,
}

impl Default for PlatformConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            token: None,
            app_token: None,
            reply_to_mode: ReplyToMode::First,
            allowed_users: Vec::new(),
            allow_all_users: false,
            home_channel: None,
            typing_indicator: true,
            gateway_restart_notification: true,
            extra: Extra::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HomeChannel {
    pub chat_id: String,
    pub name: String,
    pub thread_id: Option<String>,
}

/// A free-form settings map whose secret-looking keys (`*_token`, `secret`, ...) are redacted
/// wherever it is printed.
#[derive(Clone, PartialEq, Default)]
pub struct Extra(pub BTreeMap<String, Value>);

impl Extra {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    fn redacted(&self) -> Value {
        redact(&Value::Object(self.0.clone().into_iter().collect()))
    }
}

fn redact(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, inner)| {
                    let shown = if looks_secret(key) && !inner.is_null() {
                        Value::String(REDACTED.to_owned())
                    } else {
                        redact(inner)
                    };
                    (key.clone(), shown)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        other => other.clone(),
    }
}

impl fmt::Debug for Extra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.redacted())
    }
}

impl Serialize for Extra {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.redacted().serialize(serializer)
    }
}

/// The OpenAI-compatible HTTP API (`API_SERVER_*`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApiServerConfig {
    pub enabled: bool,
    pub key: Option<Secret>,
    pub host: String,
    /// 0 asks the OS for a free port (tests).
    pub port: u16,
    /// Browser origins allowed to call the API (exact match; `*` allows any).
    pub cors_origins: Vec<String>,
    pub model_name: Option<String>,
    /// Chat completions served at once; more are refused with 429 + `Retry-After`
    /// (Hermes' `max_concurrent_runs`, default 10). 0 removes the cap.
    pub max_concurrent_runs: u32,
    /// A chat completion's body must arrive whole within this many seconds (else 408).
    pub body_timeout_seconds: u64,
    /// The most entries a request's `messages` may hold (else 413).
    pub max_messages: usize,
    /// The most characters of message content in one request, all roles (else 413).
    pub max_request_chars: usize,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            key: None,
            host: "127.0.0.1".to_owned(),
            port: 8642,
            cors_origins: Vec::new(),
            model_name: None,
            max_concurrent_runs: 10,
            body_timeout_seconds: 30,
            max_messages: 1_000,
            max_request_chars: 2_000_000,
        }
    }
}

/// hermesd's own loopback-only admin HTTP endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AdminConfig {
    pub host: String,
    /// 0 asks the OS for a free port (tests).
    pub port: u16,
    /// A Bearer token of the admin endpoint's own for requests that change state (besides
    /// `API_SERVER_KEY`, which is also accepted).
    pub token: Option<Secret>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".to_owned(),
            port: 8643,
            token: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extra_redacts_secret_looking_keys_at_any_depth() {
        let extra = Extra(
            [
                ("require_mention".to_owned(), json!(true)),
                ("webhook_secret".to_owned(), json!("s3cr3t-value")),
                (
                    "routes".to_owned(),
                    json!({"gh": {"secret": "other-s3cr3t"}}),
                ),
            ]
            .into_iter()
            .collect(),
        );
        let shown = serde_json::to_string(&extra).unwrap();
        let debug = format!("{extra:?}");
        for text in [&shown, &debug] {
            assert!(!text.contains("s3cr3t"), "{text}");
            assert!(text.contains("require_mention"), "{text}");
        }
        assert_eq!(extra.get("webhook_secret"), Some(&json!("s3cr3t-value")));
    }
}
