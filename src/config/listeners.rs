//! Validation of hermesd's HTTP listeners: the OpenAI-compatible API server (a Hermes
//! platform block, usually `platforms.api_server`) and the loopback-only admin endpoint.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::Value;

use super::env_overrides::{self, env_leaf};
use super::known_keys::{IGNORED_API_SERVER, join, warn_unknown};
use super::parse::{Issues, at};
use super::platform_types::{AdminConfig, ApiServerConfig};
use super::platforms::{Blocks, layers, pick};
use super::raw::{RawAdmin, RawApiServer, Section};
use super::secret::REDACTED;

/// Minimum API server key length, as Hermes' startup guard requires.
pub const API_KEY_MIN_CHARS: usize = 16;

/// The API server: settings may sit in the block or, as Hermes writes them, in its `extra`.
pub fn api_server(
    issues: &mut Issues,
    blocks: &Blocks<'_>,
    env: &BTreeMap<String, String>,
) -> ApiServerConfig {
    let layers = layers::<RawApiServer>(
        issues,
        [
            ("api_server".to_owned(), blocks.top.api_server.as_ref()),
            (
                "platforms.api_server".to_owned(),
                blocks.platforms.api_server.as_ref(),
            ),
            (
                "gateway.platforms.api_server".to_owned(),
                blocks.gateway_platforms.api_server.as_ref(),
            ),
            (
                "gateway.api_server".to_owned(),
                blocks.gateway.api_server.as_ref(),
            ),
        ],
    );
    let mut extras = Vec::with_capacity(layers.len());
    for (prefix, block) in &layers {
        warn_unknown(issues, prefix, &block.unknown, &[IGNORED_API_SERVER]);
        let extra = issues
            .section(&join(prefix, "extra"), block.extra.as_ref())
            .unwrap_or_default();
        extras.push((join(prefix, "extra"), extra));
    }
    let setting = |field: &str, var: &str, get: fn(&RawApiServer) -> Option<&Value>| {
        env_leaf(env, var)
            .or_else(|| pick(&layers, field, get))
            .or_else(|| pick(&extras, field, |extra| extra.get(field)))
    };
    let defaults = ApiServerConfig::default();

    let key_leaf = setting("key", env_overrides::API_SERVER_KEY, |b| b.key.as_ref());
    let key_name = key_leaf.as_ref().map(|leaf| leaf.key.clone());
    let key = issues.secret(key_leaf);
    let enabled = issues
        .opt_bool(setting("enabled", env_overrides::API_SERVER_ENABLED, |b| {
            b.enabled.as_ref()
        }))
        .unwrap_or(key.is_some());
    if enabled {
        match (&key, key_name) {
            (Some(key), Some(name)) if key.char_count() < API_KEY_MIN_CHARS => issues.error(
                name,
                format!(
                    "must be at least {API_KEY_MIN_CHARS} characters when the API server is \
                     enabled, got {REDACTED} ({} characters)",
                    key.char_count()
                ),
            ),
            (None, _) => issues.error(
                "api_server.key",
                format!(
                    "required when the API server is enabled; set {} (at least \
                     {API_KEY_MIN_CHARS} characters)",
                    env_overrides::API_SERVER_KEY
                ),
            ),
            _ => {}
        }
    }
    let port = issues.uint(
        setting("port", env_overrides::API_SERVER_PORT, |b| b.port.as_ref()),
        u64::from(defaults.port),
        0,
        u64::from(u16::MAX),
    );
    ApiServerConfig {
        enabled,
        key,
        host: issues
            .string(setting("host", env_overrides::API_SERVER_HOST, |b| {
                b.host.as_ref()
            }))
            .unwrap_or(defaults.host),
        port: u16::try_from(port).unwrap_or(defaults.port),
        cors_origins: issues
            .list(
                setting(
                    "cors_origins",
                    env_overrides::API_SERVER_CORS_ORIGINS,
                    |b| b.cors_origins.as_ref(),
                ),
                true,
            )
            .unwrap_or_default(),
        model_name: issues.string(setting(
            "model_name",
            env_overrides::API_SERVER_MODEL_NAME,
            |b| b.model_name.as_ref(),
        )),
        max_concurrent_runs: u32::try_from(
            issues.uint(
                pick(&layers, "max_concurrent_runs", |b| {
                    b.max_concurrent_runs.as_ref()
                })
                .or_else(|| {
                    pick(&extras, "max_concurrent_runs", |extra| {
                        extra.get("max_concurrent_runs")
                    })
                }),
                u64::from(defaults.max_concurrent_runs),
                0,
                100_000,
            ),
        )
        .unwrap_or(defaults.max_concurrent_runs),
        body_timeout_seconds: issues.uint(
            pick(&layers, "body_timeout_seconds", |b| {
                b.body_timeout_seconds.as_ref()
            }),
            defaults.body_timeout_seconds,
            1,
            3600,
        ),
        max_messages: usize::try_from(issues.uint(
            pick(&layers, "max_messages", |b| b.max_messages.as_ref()),
            defaults.max_messages as u64,
            1,
            1_000_000,
        ))
        .unwrap_or(defaults.max_messages),
        max_request_chars: usize::try_from(issues.uint(
            pick(&layers, "max_request_chars", |b| {
                b.max_request_chars.as_ref()
            }),
            defaults.max_request_chars as u64,
            1,
            // A body holds at most 10,000,000 bytes, so more characters could never arrive.
            10_000_000,
        ))
        .unwrap_or(defaults.max_request_chars),
    }
}

/// hermesd's admin endpoint serves its reads without authentication, so it may only listen
/// on loopback; requests that change state need `admin.token` or the API key.
pub fn admin(issues: &mut Issues, section: Option<&Section<RawAdmin>>) -> AdminConfig {
    let defaults = AdminConfig::default();
    let raw = issues.section("admin", section).unwrap_or_default();
    warn_unknown(issues, "admin", &raw.unknown, &[]);
    let host = match issues.string(at("admin.host", raw.host.as_ref())) {
        Some(host) if is_loopback(&host) => host,
        Some(host) => {
            issues.error(
                "admin.host",
                format!(
                    "must be a loopback address (127.0.0.1, ::1 or localhost) because the admin \
                     API has no authentication, got '{host}'"
                ),
            );
            defaults.host
        }
        None => defaults.host,
    };
    let port = issues.uint(
        at("admin.port", raw.port.as_ref()),
        u64::from(defaults.port),
        0,
        u64::from(u16::MAX),
    );
    AdminConfig {
        host,
        port: u16::try_from(port).unwrap_or(defaults.port),
        token: issues.secret(at("admin.token", raw.token.as_ref())),
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Two listeners on one port would fail at bind time; say so now, naming the keys.
pub fn check_ports(issues: &mut Issues, api_server: &ApiServerConfig, admin: &AdminConfig) {
    if api_server.enabled && admin.port != 0 && api_server.port == admin.port {
        issues.error(
            "admin.port",
            format!("conflicts with api_server.port (both {})", admin.port),
        );
    }
}
