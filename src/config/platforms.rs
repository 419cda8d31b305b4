//! Validation of the chat platform blocks (Telegram, Discord, Slack) and the gateway-wide
//! allowlist.
//!
//! A platform block may appear at the top level (`telegram:`), under `platforms:`, under
//! `gateway.platforms:` or under `gateway:`; for each setting the first of those that sets it
//! wins, and the `extra` maps are merged key by key. The platform's env vars beat them all.

use std::collections::BTreeMap;

use serde_json::Value;

use super::env_overrides::{self, PlatformEnv, env_leaf};
use super::known_keys::{
    IGNORED_HOME_CHANNEL, IGNORED_PLATFORM, PLATFORM_PASSTHROUGH, join, warn_unknown,
};
use super::parse::{Issues, Leaf, at};
use super::platform_types::{Extra, GatewayAccess, HomeChannel, PlatformConfig, WebhookPlatform};
use super::raw::{RawConfig, RawGateway, RawPlatform, RawPlatforms, Section, Unknown};

/// The places a platform block can come from.
#[derive(Debug)]
pub struct Blocks<'a> {
    pub top: &'a RawConfig,
    pub platforms: &'a RawPlatforms,
    pub gateway: &'a RawGateway,
    pub gateway_platforms: &'a RawPlatforms,
}

/// The blocks that exist, highest precedence first, each with the key prefix it was found at.
pub(super) fn layers<T: Clone>(
    issues: &mut Issues,
    found: [(String, Option<&Section<T>>); 4],
) -> Vec<(String, T)> {
    found
        .into_iter()
        .filter_map(|(prefix, section)| {
            let block = issues.section(&prefix, section)?;
            Some((prefix, block))
        })
        .collect()
}

/// The first layer that sets `field`, as a leaf named after where it was written.
pub(super) fn pick<T>(
    layers: &[(String, T)],
    field: &str,
    get: impl Fn(&T) -> Option<&Value>,
) -> Option<Leaf> {
    layers
        .iter()
        .find_map(|(prefix, block)| at(join(prefix, field), get(block)))
}

pub fn chat_platform(
    issues: &mut Issues,
    blocks: &Blocks<'_>,
    names: &PlatformEnv,
    env: &BTreeMap<String, String>,
) -> PlatformConfig {
    let name = names.name;
    let layers = layers::<RawPlatform>(
        issues,
        [
            (
                name.to_owned(),
                chat_block(
                    name,
                    &blocks.top.telegram,
                    &blocks.top.discord,
                    &blocks.top.slack,
                    &blocks.top.signal,
                ),
            ),
            (format!("platforms.{name}"), chat_in(blocks.platforms, name)),
            (
                format!("gateway.platforms.{name}"),
                chat_in(blocks.gateway_platforms, name),
            ),
            (
                format!("gateway.{name}"),
                chat_block(
                    name,
                    &blocks.gateway.telegram,
                    &blocks.gateway.discord,
                    &blocks.gateway.slack,
                    &blocks.gateway.signal,
                ),
            ),
        ],
    );
    let extra = merged_extra(issues, &layers);

    let explicit = issues.opt_bool(pick(&layers, "enabled", |p| p.enabled.as_ref()));
    if names.token.is_empty() {
        return tokenless(issues, &layers, names, env, extra, explicit);
    }
    let env_token = env_leaf(env, names.token);
    let token_from_env = env_token.is_some();
    let token = issues.secret(env_token.or_else(|| pick(&layers, "token", |p| p.token.as_ref())));
    // As in Hermes: a token in the environment enables the platform, a token in the file needs
    // `enabled: true`, and an explicit `enabled: false` always wins.
    let enabled = explicit.unwrap_or(token_from_env);
    if explicit.is_none() && !token_from_env && token.is_some() {
        issues.warn(format!(
            "{name}.token is set but {name} is not enabled; add `enabled: true` to use it"
        ));
    }
    if enabled && token.is_none() {
        issues.error(
            format!("{name}.token"),
            format!(
                "required when {name} is enabled; set {} in .env or {name}.token",
                names.token
            ),
        );
    }

    let app_token_leaf = pick(&layers, "app_token", |p| p.app_token.as_ref());
    let app_token = match names.app_token {
        Some(var) => {
            let app_token = issues.secret(env_leaf(env, var).or(app_token_leaf));
            if enabled && app_token.is_none() {
                issues.error(
                    format!("{name}.app_token"),
                    format!("required when {name} is enabled (Socket Mode); set {var} in .env"),
                );
            }
            app_token
        }
        None => {
            if let Some(leaf) = app_token_leaf {
                issues.warn(format!("unknown key '{}'", leaf.key));
            }
            None
        }
    };

    shared_settings(
        issues, &layers, names, env, enabled, token, app_token, extra,
    )
}

/// A platform without a bot token (Signal, which talks to a local signal-cli daemon): as in
/// Hermes, its daemon address and account enable it (`SIGNAL_HTTP_URL` with
/// `SIGNAL_ACCOUNT`, or `extra.http_url`); the adapter checks them when it is built.
fn tokenless(
    issues: &mut Issues,
    layers: &[(String, RawPlatform)],
    names: &PlatformEnv,
    env: &BTreeMap<String, String>,
    mut extra: Extra,
    explicit: Option<bool>,
) -> PlatformConfig {
    let from_env = names
        .enable_vars
        .iter()
        .all(|var| env_leaf(env, var).is_some());
    let from_file = extra.get("http_url").is_some_and(|v| !v.is_null());
    // The variables go into `extra` (`SIGNAL_HTTP_URL` → `http_url`), as Hermes does, so
    // `doctor` and the adapter see one place.
    let prefix = format!("{}_", names.name.to_uppercase());
    for var in names.enable_vars {
        if let (Some(leaf), Some(key)) = (env_leaf(env, var), var.strip_prefix(&prefix))
            && let Value::String(text) = leaf.value
        {
            extra
                .0
                .insert(key.to_lowercase(), Value::String(text.trim().to_owned()));
        }
    }
    for field in ["token", "app_token"] {
        let leaf = pick(layers, field, |p| match field {
            "token" => p.token.as_ref(),
            _ => p.app_token.as_ref(),
        });
        if let Some(leaf) = leaf {
            issues.warn(format!("unknown key '{}'", leaf.key));
        }
    }
    let enabled = explicit.unwrap_or(from_env || from_file);
    shared_settings(issues, layers, names, env, enabled, None, None, extra)
}

#[allow(clippy::too_many_arguments)]
fn shared_settings(
    issues: &mut Issues,
    layers: &[(String, RawPlatform)],
    names: &PlatformEnv,
    env: &BTreeMap<String, String>,
    enabled: bool,
    token: Option<super::secret::Secret>,
    app_token: Option<super::secret::Secret>,
    extra: Extra,
) -> PlatformConfig {
    let defaults = PlatformConfig::default();
    PlatformConfig {
        enabled,
        token,
        app_token,
        reply_to_mode: issues.choice(
            env_leaf(env, names.reply_to_mode)
                .or_else(|| pick(layers, "reply_to_mode", |p| p.reply_to_mode.as_ref())),
            defaults.reply_to_mode,
        ),
        allowed_users: issues
            .list(
                env_leaf(env, names.allowed_users)
                    .or_else(|| pick(layers, "allowed_users", |p| p.allowed_users.as_ref())),
                true,
            )
            .unwrap_or_default(),
        allow_all_users: issues.bool(
            env_leaf(env, names.allow_all_users)
                .or_else(|| pick(layers, "allow_all_users", |p| p.allow_all_users.as_ref())),
            defaults.allow_all_users,
        ),
        home_channel: home_channel(issues, layers, names, env),
        typing_indicator: issues.bool(
            pick(layers, "typing_indicator", |p| p.typing_indicator.as_ref()),
            defaults.typing_indicator,
        ),
        gateway_restart_notification: issues.bool(
            pick(layers, "gateway_restart_notification", |p| {
                p.gateway_restart_notification.as_ref()
            }),
            defaults.gateway_restart_notification,
        ),
        extra,
    }
}

type ChatSection = Option<Section<RawPlatform>>;

/// The block for chat platform `name` among one location's three.
fn chat_block<'a>(
    name: &str,
    telegram: &'a ChatSection,
    discord: &'a ChatSection,
    slack: &'a ChatSection,
    signal: &'a ChatSection,
) -> Option<&'a Section<RawPlatform>> {
    match name {
        "telegram" => telegram.as_ref(),
        "discord" => discord.as_ref(),
        "slack" => slack.as_ref(),
        "signal" => signal.as_ref(),
        _ => None,
    }
}

fn chat_in<'a>(platforms: &'a RawPlatforms, name: &str) -> Option<&'a Section<RawPlatform>> {
    chat_block(
        name,
        &platforms.telegram,
        &platforms.discord,
        &platforms.slack,
        &platforms.signal,
    )
}

/// `extra` merged from the lowest layer up; Hermes per-platform keys written beside it are
/// bridged in. Unknown keys are warned about per layer, under the name the user wrote.
pub(super) fn merged_extra(issues: &mut Issues, layers: &[(String, RawPlatform)]) -> Extra {
    let mut extra = BTreeMap::new();
    for (prefix, block) in layers.iter().rev() {
        warn_unknown(
            issues,
            prefix,
            &passthrough_free(&block.unknown),
            &[IGNORED_PLATFORM],
        );
        if let Some(map) = issues.section(&format!("{prefix}.extra"), block.extra.as_ref()) {
            extra.extend(map);
        }
        for (key, value) in &block.unknown {
            if PLATFORM_PASSTHROUGH.contains(&key.as_str()) {
                extra.insert(key.clone(), value.clone());
            }
        }
    }
    Extra(extra)
}

fn passthrough_free(unknown: &Unknown) -> Unknown {
    unknown
        .iter()
        .filter(|(key, _)| !PLATFORM_PASSTHROUGH.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

pub(super) fn home_channel(
    issues: &mut Issues,
    layers: &[(String, RawPlatform)],
    names: &PlatformEnv,
    env: &BTreeMap<String, String>,
) -> Option<HomeChannel> {
    if let Some(chat) = env_leaf(env, names.home_channel) {
        return Some(HomeChannel {
            chat_id: issues.string(Some(chat))?,
            name: issues
                .string(env_leaf(env, names.home_channel_name))
                .unwrap_or_else(|| "Home".to_owned()),
            thread_id: issues.string(env_leaf(env, names.home_channel_thread_id)),
        });
    }
    let (prefix, section) = layers.iter().find_map(|(prefix, block)| {
        Some((join(prefix, "home_channel"), block.home_channel.as_ref()?))
    })?;
    let block = issues.section(&prefix, Some(section))?;
    warn_unknown(issues, &prefix, &block.unknown, &[IGNORED_HOME_CHANNEL]);
    let chat_id = issues.string(at(join(&prefix, "chat_id"), block.chat_id.as_ref()));
    if chat_id.is_none() {
        issues.error(join(&prefix, "chat_id"), "required");
    }
    Some(HomeChannel {
        chat_id: chat_id?,
        name: issues
            .string(at(join(&prefix, "name"), block.name.as_ref()))
            .unwrap_or_else(|| "Home".to_owned()),
        thread_id: issues.string(at(join(&prefix, "thread_id"), block.thread_id.as_ref())),
    })
}

pub fn gateway_access(
    issues: &mut Issues,
    gateway: &RawGateway,
    env: &BTreeMap<String, String>,
) -> GatewayAccess {
    GatewayAccess {
        allowed_users: issues
            .list(
                env_leaf(env, env_overrides::GATEWAY_ALLOWED_USERS)
                    .or_else(|| at("gateway.allowed_users", gateway.allowed_users.as_ref())),
                true,
            )
            .unwrap_or_default(),
        allow_all_users: issues.bool(
            env_leaf(env, env_overrides::GATEWAY_ALLOW_ALL_USERS)
                .or_else(|| at("gateway.allow_all_users", gateway.allow_all_users.as_ref())),
            false,
        ),
        guest_tools: issues
            .list(
                at("gateway.guest_tools", gateway.guest_tools.as_ref()),
                true,
            )
            .unwrap_or_else(super::toolset_names::default_guest_tools),
    }
}

/// `platforms.webhook` (or `gateway.platforms.webhook`) with `WEBHOOK_ENABLED`,
/// `WEBHOOK_PORT` and `WEBHOOK_SECRET`, which Hermes reads the same way: the variables enable
/// the listener and go into `extra`. The `extra` keys themselves are the adapter's to check.
pub fn webhook(
    issues: &mut Issues,
    blocks: &Blocks<'_>,
    env: &BTreeMap<String, String>,
) -> WebhookPlatform {
    let found = [
        ("platforms.webhook", blocks.platforms.webhook.as_ref()),
        (
            "gateway.platforms.webhook",
            blocks.gateway_platforms.webhook.as_ref(),
        ),
    ];
    let mut layers = Vec::new();
    for (prefix, section) in found {
        if let Some(block) = issues.section(prefix, section) {
            warn_unknown(issues, prefix, &block.unknown, &[]);
            layers.push((prefix.to_owned(), block));
        }
    }
    let mut extra = BTreeMap::new();
    for (prefix, block) in layers.iter().rev() {
        if let Some(map) = issues.section(&format!("{prefix}.extra"), block.extra.as_ref()) {
            extra.extend(map);
        }
    }
    let from_env = env_leaf(env, "WEBHOOK_ENABLED");
    let env_enabled = issues.opt_bool(from_env);
    let file_enabled = issues.opt_bool(pick(&layers, "enabled", |b| b.enabled.as_ref()));
    let enabled = env_enabled.unwrap_or(false) || file_enabled.unwrap_or(false);
    if enabled {
        for (var, key) in [("WEBHOOK_PORT", "port"), ("WEBHOOK_SECRET", "secret")] {
            if let Some(value) = env.get(var).map(|v| v.trim()).filter(|v| !v.is_empty()) {
                extra.insert(key.to_owned(), Value::String(value.to_owned()));
            }
        }
    }
    WebhookPlatform {
        enabled,
        extra: Extra(extra),
    }
}
