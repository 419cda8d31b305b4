//! `platforms.whatsapp_cloud` (or `gateway.platforms.whatsapp_cloud`), read as Hermes reads it:
//! the platform is on when `enabled: true` is written, or when both
//! `WHATSAPP_CLOUD_PHONE_NUMBER_ID` and `WHATSAPP_CLOUD_ACCESS_TOKEN` are set (an explicit
//! `enabled: false` wins). Who may talk comes from `WHATSAPP_CLOUD_ALLOWED_USERS` /
//! `WHATSAPP_CLOUD_ALLOW_ALL_USERS` (or the block's lists); the Cloud API's own settings stay in
//! `extra` with the `WHATSAPP_CLOUD_*` variables, and the WhatsApp adapter checks them.

use std::collections::BTreeMap;

use super::env_overrides::{PlatformEnv, env_leaf};
use super::parse::Issues;
use super::platform_types::PlatformConfig;
use super::platforms::{Blocks, home_channel, layers, merged_extra, pick};
use super::raw::RawPlatform;

pub const NAMES: PlatformEnv = PlatformEnv {
    name: "whatsapp_cloud",
    token: "WHATSAPP_CLOUD_ACCESS_TOKEN",
    app_token: None,
    allowed_users: "WHATSAPP_CLOUD_ALLOWED_USERS",
    allow_all_users: "WHATSAPP_CLOUD_ALLOW_ALL_USERS",
    reply_to_mode: "WHATSAPP_CLOUD_REPLY_TO_MODE",
    home_channel: "WHATSAPP_CLOUD_HOME_CHANNEL",
    home_channel_name: "WHATSAPP_CLOUD_HOME_CHANNEL_NAME",
    home_channel_thread_id: "WHATSAPP_CLOUD_HOME_CHANNEL_THREAD_ID",
    // Enabled by its phone number id with its token (see `whatsapp_cloud` below).
    enable_vars: &[],
};

pub fn whatsapp_cloud(
    issues: &mut Issues,
    blocks: &Blocks<'_>,
    env: &BTreeMap<String, String>,
) -> PlatformConfig {
    let layers = layers::<RawPlatform>(
        issues,
        [
            (
                "platforms.whatsapp_cloud".to_owned(),
                blocks.platforms.whatsapp_cloud.as_ref(),
            ),
            (
                "gateway.platforms.whatsapp_cloud".to_owned(),
                blocks.gateway_platforms.whatsapp_cloud.as_ref(),
            ),
            (String::new(), None),
            (String::new(), None),
        ],
    );
    for (prefix, block) in &layers {
        for (field, set) in [
            ("token", block.token.is_some()),
            ("app_token", block.app_token.is_some()),
        ] {
            if set {
                issues.warn(format!(
                    "{prefix}.{field} is not a WhatsApp Cloud key; put the access token in \
                     extra.access_token or WHATSAPP_CLOUD_ACCESS_TOKEN"
                ));
            }
        }
    }
    let extra = merged_extra(issues, &layers);
    let defaults = PlatformConfig::default();
    let from_env = env_leaf(env, "WHATSAPP_CLOUD_PHONE_NUMBER_ID").is_some()
        && env_leaf(env, NAMES.token).is_some();
    let explicit = issues.opt_bool(pick(&layers, "enabled", |p| p.enabled.as_ref()));
    PlatformConfig {
        enabled: explicit.unwrap_or(from_env),
        token: None,
        app_token: None,
        reply_to_mode: issues.choice(
            env_leaf(env, NAMES.reply_to_mode)
                .or_else(|| pick(&layers, "reply_to_mode", |p| p.reply_to_mode.as_ref())),
            defaults.reply_to_mode,
        ),
        allowed_users: issues
            .list(
                env_leaf(env, NAMES.allowed_users)
                    .or_else(|| pick(&layers, "allowed_users", |p| p.allowed_users.as_ref())),
                true,
            )
            .unwrap_or_default(),
        allow_all_users: issues.bool(
            env_leaf(env, NAMES.allow_all_users)
                .or_else(|| pick(&layers, "allow_all_users", |p| p.allow_all_users.as_ref())),
            defaults.allow_all_users,
        ),
        home_channel: home_channel(issues, &layers, &NAMES, env),
        typing_indicator: issues.bool(
            pick(&layers, "typing_indicator", |p| p.typing_indicator.as_ref()),
            defaults.typing_indicator,
        ),
        gateway_restart_notification: issues.bool(
            pick(&layers, "gateway_restart_notification", |p| {
                p.gateway_restart_notification.as_ref()
            }),
            defaults.gateway_restart_notification,
        ),
        extra,
    }
}
