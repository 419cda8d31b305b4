//! What a configuration reload (SIGHUP) changed, and what of it takes effect only after a
//! restart: a pure comparison of the old and new loaded configurations by key path
//! (`model.default`, `platforms.telegram.token`, `auth.telegram.allowed_users`), naming
//! keys and never values, so the result can be logged as is.
//!
//! Applied live (see `router/live.rs`): authorization (allowlists, allow-all flags, group
//! and DM gating, from config and environment alike), display, streaming and busy-input
//! settings, reset policies, the agent's inputs (model, providers, fallbacks, turn
//! budget, compression), the photo and voice settings (`media`: vision routing, STT), and
//! the scheduler's per-tick `cron.*` settings. Everything else is read once at start — platform tokens and
//! switches, adapter `extra` settings, the HTTP API and admin listeners and key, approval
//! settings, session-key shape, the daemon's `HERMESD_*` knobs — and is reported as needing
//! a restart.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::authorize::{AuthPolicy, PlatformAccess};
use crate::config::{Config, LoadedConfig, Secret};

/// Top-level config sections a reload applies; `agent` applies only `max_turns`.
const LIVE_SECTIONS: &[&str] = &[
    "model",
    "mcp_servers",
    "providers",
    "fallback_providers",
    "compression",
    "session_reset",
    "reset_by_type",
    "reset_by_platform",
    "streaming",
    "display",
    "agent.max_turns",
    // Photos and voice: read from the live config for every event that carries them.
    "media",
    // The scheduler reads these at every tick; `cron.max_parallel_jobs` sizes it at start.
    "cron.output_retention",
    "cron.run_timeout",
    "cron.tick_seconds",
    "cron.wrap_response",
    // The terminal tool reads these per call; the backend, cwd and sandboxes stay as started.
    "terminal.timeout_secs",
    "terminal.env_passthrough",
    "terminal.persistent_shell",
];

/// Config paths whose effect authorization already reports as `auth.*` entries.
const AUTH_SOURCES: &[&str] = &["gateway", "unauthorized_dm_behavior"];
/// Platform keys (and `extra` keys) authorization reads; reported as `auth.*` entries.
const AUTH_PLATFORM_KEYS: &[&str] = &[
    "allowed_users",
    "allow_all_users",
    "extra.allow_from",
    "extra.group_allow_from",
    "extra.group_allowed_chats",
    "extra.allow_bots",
    "extra.dm_policy",
    "extra.unauthorized_dm_behavior",
];

/// The changed keys of a reload, split by when they take effect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Applied now.
    pub applied: Vec<String>,
    /// Read only at start: the running daemon keeps the old value until restarted.
    pub need_restart: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.applied.is_empty() && self.need_restart.is_empty()
    }
}

/// Compares two loaded configurations (see the module docs).
pub fn changes(old: &LoadedConfig, new: &LoadedConfig) -> Changes {
    let (before, after) = (fingerprints(&old.config), fingerprints(&new.config));
    let mut changed: BTreeSet<String> = before
        .keys()
        .chain(after.keys())
        .filter(|path| before.get(*path) != after.get(*path))
        .filter(|path| !is_auth_source(path))
        .cloned()
        .collect();
    changed.extend(auth_changes(
        &AuthPolicy::from_config(&old.config, &old.env),
        &AuthPolicy::from_config(&new.config, &new.env),
    ));
    let knobs = |env: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        env.iter()
            .filter(|(name, _)| name.starts_with("HERMESD_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let (a, b) = (knobs(&old.env), knobs(&new.env));
    changed.extend(
        a.keys()
            .chain(b.keys())
            .filter(|name| a.get(*name) != b.get(*name))
            .cloned(),
    );
    let mut result = Changes::default();
    for path in changed {
        if path.starts_with("auth.") || is_live(&path) {
            result.applied.push(path);
        } else {
            result.need_restart.push(path);
        }
    }
    result
}

fn is_live(path: &str) -> bool {
    LIVE_SECTIONS
        .iter()
        .any(|section| path == *section || path.starts_with(&format!("{section}.")))
}

fn is_auth_source(path: &str) -> bool {
    if AUTH_SOURCES
        .iter()
        .any(|s| path == *s || path.starts_with(&format!("{s}.")))
    {
        return true;
    }
    let Some(rest) = path.strip_prefix("platforms.") else {
        return false;
    };
    let key = rest.split_once('.').map_or("", |(_, key)| key);
    AUTH_PLATFORM_KEYS.contains(&key)
}

/// Every leaf of the configuration by dotted path, with a comparable value. Secrets (shown
/// as `***` when serialized) are compared by a digest of their value; the digest never
/// leaves this module.
fn fingerprints(config: &Config) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let tree = serde_json::to_value(config).unwrap_or(Value::Null);
    flatten("", &tree, &mut out);
    out.retain(|path, _| !path.contains(".extra.") && !path.ends_with(".extra"));
    let secret = |out: &mut BTreeMap<String, String>, path: String, value: Option<&Secret>| {
        out.insert(path, value.map_or_else(String::new, |s| digest(s.expose())));
    };
    secret(
        &mut out,
        "model.api_key".to_owned(),
        config.model.api_key.as_ref(),
    );
    secret(
        &mut out,
        "api_server.key".to_owned(),
        config.api_server.key.as_ref(),
    );
    for (name, provider) in &config.providers {
        secret(
            &mut out,
            format!("providers.{name}.api_key"),
            provider.api_key.as_ref(),
        );
    }
    let platforms = &config.platforms;
    for (name, platform) in [
        ("telegram", &platforms.telegram),
        ("discord", &platforms.discord),
        ("slack", &platforms.slack),
        ("signal", &platforms.signal),
    ] {
        secret(
            &mut out,
            format!("platforms.{name}.token"),
            platform.token.as_ref(),
        );
        secret(
            &mut out,
            format!("platforms.{name}.app_token"),
            platform.app_token.as_ref(),
        );
        for (key, value) in &platform.extra.0 {
            out.insert(
                format!("platforms.{name}.extra.{key}"),
                digest(&value.to_string()),
            );
        }
    }
    let fallbacks: Vec<String> = config
        .fallback_providers
        .iter()
        .map(|f| {
            let key = f.api_key.as_ref().map(|k| digest(k.expose()));
            format!("{f:?}{key:?}")
        })
        .collect();
    out.insert(
        "fallback_providers".to_owned(),
        digest(&fallbacks.join("\n")),
    );
    out
}

fn digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Objects are walked; arrays and scalars are leaves.
fn flatten(prefix: &str, value: &Value, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let path = match prefix {
                    "" => key.clone(),
                    _ => format!("{prefix}.{key}"),
                };
                flatten(&path, inner, out);
            }
        }
        leaf => {
            out.insert(prefix.to_owned(), leaf.to_string());
        }
    }
}

/// `auth.<platform>.<field>` and `auth.gateway.*` entries for what authorization decides
/// differently now, wherever the value came from (config, `.env`, environment).
fn auth_changes(old: &AuthPolicy, new: &AuthPolicy) -> Vec<String> {
    let mut out = Vec::new();
    if old.gateway_allowed_users != new.gateway_allowed_users {
        out.push("auth.gateway.allowed_users".to_owned());
    }
    if old.gateway_allow_all_users != new.gateway_allow_all_users {
        out.push("auth.gateway.allow_all_users".to_owned());
    }
    if old.unauthorized_dm_behavior != new.unauthorized_dm_behavior {
        out.push("auth.unauthorized_dm_behavior".to_owned());
    }
    let names: BTreeSet<&String> = old.platforms.keys().chain(new.platforms.keys()).collect();
    let none = PlatformAccess::default();
    for name in names {
        let a = old.platforms.get(name).unwrap_or(&none);
        let b = new.platforms.get(name).unwrap_or(&none);
        let fields = [
            ("allowed_users", a.allowed_users != b.allowed_users),
            ("allow_all_users", a.allow_all_users != b.allow_all_users),
            (
                "group_allowed_users",
                a.group_allowed_users != b.group_allowed_users,
            ),
            (
                "group_allowed_chats",
                a.group_allowed_chats != b.group_allowed_chats,
            ),
            ("allow_bots", a.allow_bots != b.allow_bots),
            ("dm_policy", a.dm_policy != b.dm_policy),
            (
                "unauthorized_dm_behavior",
                a.unauthorized_dm_behavior != b.unauthorized_dm_behavior,
            ),
            (
                "authorization_is_upstream",
                a.authorization_is_upstream != b.authorization_is_upstream,
            ),
        ];
        out.extend(
            fields
                .iter()
                .filter(|(_, differs)| *differs)
                .map(|(field, _)| format!("auth.{name}.{field}")),
        );
    }
    out
}

#[cfg(test)]
mod tests;
