//! Validation of the behaviour sections: approvals, session reset, streaming, display, agent
//! and compression.

use std::collections::BTreeMap;

use serde_json::Value;

use super::choice::{ApprovalMode, StreamingTransport};
use super::env_overrides::{self, env_leaf};
use super::known_keys::{
    IGNORED_AGENT, IGNORED_APPROVALS, IGNORED_COMPRESSION, IGNORED_DISPLAY,
    IGNORED_DISPLAY_PLATFORM, IGNORED_SESSION_RESET, warn_unknown,
};
use super::parse::{Issues, Leaf, at};
use super::raw::{
    RawAgent, RawApprovals, RawCompression, RawDisplay, RawSessionReset, RawStreaming, Section,
};
use super::types::{
    AgentConfig, ApprovalsConfig, CompressionConfig, DisplayConfig, DisplayOverrides,
    SessionResetPolicy, StreamingConfig,
};

use super::durations::MAX_SECONDS;

const U32_MAX: u64 = u32::MAX as u64;

/// A `u32` setting; the range check in `uint` keeps the conversion lossless.
fn uint32(issues: &mut Issues, leaf: Option<Leaf>, default: u32, min: u64) -> u32 {
    let value = issues.uint(leaf, u64::from(default), min, U32_MAX);
    u32::try_from(value).unwrap_or(default)
}

/// A duration in whole seconds where 0 means "off".
fn seconds(issues: &mut Issues, leaf: Option<Leaf>, default: u64) -> u64 {
    issues.uint(leaf, default, 0, U32_MAX)
}

pub fn approvals(issues: &mut Issues, section: Option<&Section<RawApprovals>>) -> ApprovalsConfig {
    let defaults = ApprovalsConfig::default();
    let Some(raw) = issues.section("approvals", section) else {
        return defaults;
    };
    warn_unknown(issues, "approvals", &raw.unknown, &[IGNORED_APPROVALS]);
    let mode_leaf = at("approvals.mode", raw.mode.as_ref());
    let is_smart = matches!(
        &mode_leaf,
        Some(Leaf { value: Value::String(mode), .. }) if mode.trim().eq_ignore_ascii_case("smart")
    );
    let mode = if is_smart {
        // Hermes' LLM guardian auto-approves low-risk commands; asking a human is the safe
        // reading of that setting until hermesd has one.
        issues.warn(
            "approvals.mode 'smart' (LLM guardian) is not supported by hermesd yet; using 'manual'",
        );
        ApprovalMode::Manual
    } else {
        issues.choice(mode_leaf, defaults.mode)
    };
    ApprovalsConfig {
        mode,
        timeout_secs: issues.uint(
            at("approvals.timeout", raw.timeout.as_ref()),
            defaults.timeout_secs,
            1,
            U32_MAX,
        ),
        deny: issues
            .list(at("approvals.deny", raw.deny.as_ref()), false)
            .unwrap_or_default(),
        mcp_reload_confirm: issues.bool(
            at(
                "approvals.mcp_reload_confirm",
                raw.mcp_reload_confirm.as_ref(),
            ),
            defaults.mcp_reload_confirm,
        ),
    }
}

/// `label` is where the section was found: `session_reset` or `gateway.session_reset`.
pub fn session_reset(
    issues: &mut Issues,
    label: &str,
    section: Option<&Section<RawSessionReset>>,
) -> SessionResetPolicy {
    let defaults = SessionResetPolicy::default();
    let Some(raw) = issues.section(label, section) else {
        return defaults;
    };
    warn_unknown(issues, label, &raw.unknown, &[IGNORED_SESSION_RESET]);
    let key = |field: &str| format!("{label}.{field}");
    let at_hour = issues.uint(
        at(key("at_hour"), raw.at_hour.as_ref()),
        u64::from(defaults.at_hour),
        0,
        23,
    );
    SessionResetPolicy {
        mode: issues.choice(at(key("mode"), raw.mode.as_ref()), defaults.mode),
        at_hour: u8::try_from(at_hour).unwrap_or(defaults.at_hour),
        idle_minutes: uint32(
            issues,
            at(key("idle_minutes"), raw.idle_minutes.as_ref()),
            defaults.idle_minutes,
            1,
        ),
        notify: issues.bool(at(key("notify"), raw.notify.as_ref()), defaults.notify),
        notify_exclude_platforms: issues
            .list(
                at(
                    key("notify_exclude_platforms"),
                    raw.notify_exclude_platforms.as_ref(),
                ),
                true,
            )
            .unwrap_or(defaults.notify_exclude_platforms),
    }
}

/// `reset_by_type` / `reset_by_platform`: a map of names to reset policies.
pub fn reset_overrides(
    issues: &mut Issues,
    label: &str,
    section: Option<&Section<BTreeMap<String, Section<RawSessionReset>>>>,
) -> BTreeMap<String, SessionResetPolicy> {
    let Some(map) = issues.section(label, section) else {
        return BTreeMap::new();
    };
    map.iter()
        .map(|(name, policy)| {
            let policy = session_reset(issues, &format!("{label}.{name}"), Some(policy));
            (name.clone(), policy)
        })
        .collect()
}

/// `label` is `streaming` or `gateway.streaming`. `mode` is Hermes' alias for `transport` that
/// also switches streaming on unless `enabled` is given.
pub fn streaming(
    issues: &mut Issues,
    label: &str,
    section: Option<&Section<RawStreaming>>,
) -> StreamingConfig {
    let defaults = StreamingConfig::default();
    let Some(raw) = issues.section(label, section) else {
        return defaults;
    };
    warn_unknown(issues, label, &raw.unknown, &[]);
    let key = |field: &str| format!("{label}.{field}");
    let mode = issues.opt_choice::<StreamingTransport>(at(key("mode"), raw.mode.as_ref()));
    let transport = issues
        .opt_choice(at(key("transport"), raw.transport.as_ref()))
        .or(mode)
        .unwrap_or(defaults.transport);
    let enabled = match at(key("enabled"), raw.enabled.as_ref()) {
        Some(leaf) => issues.bool(Some(leaf), defaults.enabled),
        None => mode.is_some_and(|mode| mode != StreamingTransport::Off),
    };
    StreamingConfig {
        enabled,
        transport,
        edit_interval_secs: issues.float(
            at(key("edit_interval"), raw.edit_interval.as_ref()),
            defaults.edit_interval_secs,
            |secs| secs > 0.0 && secs <= MAX_SECONDS,
            "greater than 0 and at most 31536000 (one year)",
        ),
        buffer_threshold: uint32(
            issues,
            at(key("buffer_threshold"), raw.buffer_threshold.as_ref()),
            defaults.buffer_threshold,
            1,
        ),
        cursor: issues
            .text(at(key("cursor"), raw.cursor.as_ref()))
            .unwrap_or(defaults.cursor),
        fresh_final_after_secs: issues.float(
            at(
                key("fresh_final_after_seconds"),
                raw.fresh_final_after_seconds.as_ref(),
            ),
            defaults.fresh_final_after_secs,
            |secs| (0.0..=MAX_SECONDS).contains(&secs),
            "between 0 and 31536000 (one year)",
        ),
    }
}

pub fn display(
    issues: &mut Issues,
    section: Option<&Section<RawDisplay>>,
    env: &BTreeMap<String, String>,
) -> DisplayConfig {
    let defaults = DisplayConfig::default();
    let raw = issues.section("display", section).unwrap_or_default();
    warn_unknown(issues, "display", &raw.unknown, &[IGNORED_DISPLAY]);
    let busy_input_mode = env_leaf(env, env_overrides::BUSY_INPUT_MODE)
        .or_else(|| at("display.busy_input_mode", raw.busy_input_mode.as_ref()));
    let mut platforms = BTreeMap::new();
    for (name, entry) in issues
        .section("display.platforms", raw.platforms.as_ref())
        .unwrap_or_default()
    {
        let prefix = format!("display.platforms.{name}");
        let Some(entry) = issues.section(&prefix, Some(&entry)) else {
            continue;
        };
        warn_unknown(issues, &prefix, &entry.unknown, &[IGNORED_DISPLAY_PLATFORM]);
        let key = |field: &str| format!("{prefix}.{field}");
        let tool_preview_length = issues
            .opt_uint(
                at(
                    key("tool_preview_length"),
                    entry.tool_preview_length.as_ref(),
                ),
                0,
                U32_MAX,
            )
            .and_then(|length| u32::try_from(length).ok());
        let overrides = DisplayOverrides {
            streaming: issues.opt_bool(at(key("streaming"), entry.streaming.as_ref())),
            tool_progress: issues
                .opt_choice(at(key("tool_progress"), entry.tool_progress.as_ref())),
            busy_ack_detail: issues
                .opt_bool(at(key("busy_ack_detail"), entry.busy_ack_detail.as_ref())),
            show_reasoning: issues
                .opt_bool(at(key("show_reasoning"), entry.show_reasoning.as_ref())),
            interim_assistant_messages: issues.opt_bool(at(
                key("interim_assistant_messages"),
                entry.interim_assistant_messages.as_ref(),
            )),
            tool_preview_length,
        };
        platforms.insert(name, overrides);
    }
    DisplayConfig {
        busy_input_mode: issues.choice(busy_input_mode, defaults.busy_input_mode),
        background_process_notifications: super::process_notices::parse(
            issues,
            raw.background_process_notifications.as_ref(),
            env,
        ),
        busy_steer_ack_enabled: issues.bool(
            at(
                "display.busy_steer_ack_enabled",
                raw.busy_steer_ack_enabled.as_ref(),
            ),
            defaults.busy_steer_ack_enabled,
        ),
        busy_ack_detail: issues.bool(
            at("display.busy_ack_detail", raw.busy_ack_detail.as_ref()),
            defaults.busy_ack_detail,
        ),
        tool_progress: issues.choice(
            at("display.tool_progress", raw.tool_progress.as_ref()),
            defaults.tool_progress,
        ),
        tool_preview_length: uint32(
            issues,
            at(
                "display.tool_preview_length",
                raw.tool_preview_length.as_ref(),
            ),
            defaults.tool_preview_length,
            0,
        ),
        show_reasoning: issues.bool(
            at("display.show_reasoning", raw.show_reasoning.as_ref()),
            defaults.show_reasoning,
        ),
        interim_assistant_messages: issues.bool(
            at(
                "display.interim_assistant_messages",
                raw.interim_assistant_messages.as_ref(),
            ),
            defaults.interim_assistant_messages,
        ),
        ephemeral_system_ttl_secs: seconds(
            issues,
            at(
                "display.ephemeral_system_ttl",
                raw.ephemeral_system_ttl.as_ref(),
            ),
            defaults.ephemeral_system_ttl_secs,
        ),
        platforms,
    }
}

pub fn agent(issues: &mut Issues, section: Option<&Section<RawAgent>>) -> AgentConfig {
    let defaults = AgentConfig::default();
    let raw = issues.section("agent", section).unwrap_or_default();
    warn_unknown(issues, "agent", &raw.unknown, &[IGNORED_AGENT]);
    AgentConfig {
        max_turns: uint32(
            issues,
            at("agent.max_turns", raw.max_turns.as_ref()),
            defaults.max_turns,
            1,
        ),
        gateway_timeout_secs: seconds(
            issues,
            at("agent.gateway_timeout", raw.gateway_timeout.as_ref()),
            defaults.gateway_timeout_secs,
        ),
        gateway_timeout_warning_secs: seconds(
            issues,
            at(
                "agent.gateway_timeout_warning",
                raw.gateway_timeout_warning.as_ref(),
            ),
            defaults.gateway_timeout_warning_secs,
        ),
        gateway_notify_interval_secs: seconds(
            issues,
            at(
                "agent.gateway_notify_interval",
                raw.gateway_notify_interval.as_ref(),
            ),
            defaults.gateway_notify_interval_secs,
        ),
        restart_drain_timeout_secs: seconds(
            issues,
            at(
                "agent.restart_drain_timeout",
                raw.restart_drain_timeout.as_ref(),
            ),
            defaults.restart_drain_timeout_secs,
        ),
        gateway_auto_continue_freshness_secs: seconds(
            issues,
            at(
                "agent.gateway_auto_continue_freshness",
                raw.gateway_auto_continue_freshness.as_ref(),
            ),
            defaults.gateway_auto_continue_freshness_secs,
        ),
        clarify_timeout_secs: seconds(
            issues,
            at("agent.clarify_timeout", raw.clarify_timeout.as_ref()),
            defaults.clarify_timeout_secs,
        ),
    }
}

pub fn compression(
    issues: &mut Issues,
    section: Option<&Section<RawCompression>>,
) -> CompressionConfig {
    let defaults = CompressionConfig::default();
    let raw = issues.section("compression", section).unwrap_or_default();
    warn_unknown(issues, "compression", &raw.unknown, &[IGNORED_COMPRESSION]);
    CompressionConfig {
        enabled: issues.bool(
            at("compression.enabled", raw.enabled.as_ref()),
            defaults.enabled,
        ),
        threshold: issues.float(
            at("compression.threshold", raw.threshold.as_ref()),
            defaults.threshold,
            |ratio| ratio > 0.0 && ratio <= 1.0,
            "a fraction of the context window above 0 and at most 1",
        ),
        protect_last_n: uint32(
            issues,
            at("compression.protect_last_n", raw.protect_last_n.as_ref()),
            defaults.protect_last_n,
            1,
        ),
    }
}
