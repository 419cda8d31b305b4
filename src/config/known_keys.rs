//! Keys a Hermes `config.yaml` may carry that hermesd accepts without acting on them (reported
//! together in one "not supported by hermesd yet" warning, see `unsupported`), the
//! per-platform Hermes settings it keeps in `extra`, and the unknown-key warning itself.
//!
//! The lists follow Hermes 0.19's `DEFAULT_CONFIG` and gateway loader. A key missing from them
//! only costs a spurious warning, never an error.

use super::parse::Issues;
use super::shape::Unknown;

/// Top-level Hermes sections for features hermesd does not implement (yet).
#[rustfmt::skip]
pub const IGNORED_TOP_LEVEL: &[&str] = &[
    "_config_version", "always_log_local", "auxiliary", "bedrock", "bot_mode",
    "checkpoints", "code_execution", "computer_use", "context",
    "context_file_read_timeout", "credential_pool_strategies", "curator",
    "custom_providers", "dashboard", "database", "delegation", "desktop", "doctor",
    "fallback_model", "file_read_max_chars", "filter_silence_narration", "goals", "honcho",
    "human_delay", "kanban", "local_runtime", "logging",
    "loop_watchdog", "loops", "lsp", "max_concurrent_sessions", "max_live_sessions", "mcp",
    "mcp_discovery_timeout", "mcp_single_query_discovery_timeout", "memory", "moa",
    "model_catalog", "model_overrides", "models_dev", "monitoring", "multiplex_profile_allowlist",
    "multiplex_profiles", "network", "nous", "onboarding", "openrouter",
    "paste_collapse_char_threshold", "paste_collapse_threshold",
    "paste_collapse_threshold_fallback",
    "plugins", "prefill_messages_file", "privacy", "profile_routes", "prompt_caching", "proxy",
    "quick_commands", "reset_by_platform", "reset_by_type", "reset_triggers", "runtime", "secrets",
    "session", "session_store_max_age_days", "sessions",
    "smart_model_routing", "systemd_watchdog_seconds", "telemetry", "tool_loop_guardrails",
    "tool_output", "tools", "toolsets", "updates", "vault", "vertex", "wake_word",
    "worktree", "write_sessions_json", "x_search",
];

/// Keys of an `mcp_servers.<name>` entry Hermes reads that hermesd does not act on: liveness
/// pings, stdio recycling, parallel-call opt-in, the HTTP content-type probe, server-initiated
/// elicitation, OAuth and client certificates.
#[rustfmt::skip]
pub const IGNORED_MCP_SERVER: &[&str] = &[
    "auth", "client_cert", "client_key", "elicitation", "idle_timeout_seconds",
    "keepalive_interval", "lifecycle", "max_lifetime_seconds", "oauth",
    "skip_preflight", "ssl_verify", "supports_parallel_tool_calls",
];

/// Keys of `mcp_servers.<name>.sampling` hermesd does not act on: tool use inside sampling is
/// not offered, so its round limit has nothing to limit.
pub const IGNORED_MCP_SAMPLING: &[&str] = &["max_tool_rounds"];

/// Hermes platforms hermesd has no adapter for: their blocks are skipped silently wherever
/// they appear (top level, `platforms.*`, `gateway.*`).
#[rustfmt::skip]
pub const OTHER_PLATFORMS: &[&str] = &[
    "bluebubbles", "dingtalk", "email", "feishu", "homeassistant", "irc", "line", "local",
    "matrix", "mattermost", "msgraph_webhook", "qqbot", "relay", "sms",
    "wecom", "wecom_callback", "weixin", "whatsapp", "yuanbao",
];

/// Hermes per-platform settings (top-level `discord: {require_mention: ...}` and friends).
/// hermesd copies them into the platform's `extra` map for the adapters, as Hermes does.
#[rustfmt::skip]
pub const PLATFORM_PASSTHROUGH: &[&str] = &[
    "allow_admin_from", "allow_any_attachment", "allow_bots", "allow_from", "allowed_channels",
    "allowed_chats", "allowed_roles", "allowed_topics", "approval_mentions", "auto_thread",
    "base_file_url", "base_url", "bots_require_inline_mention", "channel_overrides",
    "channel_prompts", "channel_skill_bindings", "cron_continuable_surface",
    "disable_link_previews", "dm_policy",
    "dm_role_auth_guild", "exclusive_bot_mentions", "fallback_ips", "free_response_channels",
    "free_response_chats", "free_response_topics", "group_allow_admin_from", "group_allow_from",
    "group_allowed_chats", "group_policy", "group_user_allowed_commands", "guest_mode",
    "history_backfill", "history_backfill_limit", "ignore_other_user_mentions", "ignored_channels",
    "ignored_threads", "local_mode", "max_attachment_bytes", "mention_patterns",
    "missed_message_backfill", "native_mention_only_channels", "native_mention_only_chats",
    "no_thread_channels", "notice_delivery", "observe_unmentioned_group_messages", "proxy",
    "reactions", "reply_in_thread", "reply_prefix", "require_mention", "require_mention_channels",
    "rich_messages", "send_read_receipts", "server_actions", "strict_mention",
    "thread_require_mention", "typing_status_text", "unauthorized_dm_behavior",
    "user_allowed_commands", "voice_channel_inactivity_timeout_seconds", "voice_fx",
    "voice_playback_timeout_seconds", "webhook_port", "webhook_secret", "webhook_url",
    "websocket_heartbeat_ack_max_age_seconds", "websocket_liveness_failure_threshold",
    "websocket_liveness_interval_seconds", "websocket_max_latency_seconds",
];

/// Platform-block keys Hermes knows that mean nothing for these platforms.
pub const IGNORED_PLATFORM: &[&str] = &["api_key"];

pub const IGNORED_API_SERVER: &[&str] = &[];

pub const IGNORED_HOME_CHANNEL: &[&str] = &["platform", "scope_id", "user_id"];

#[rustfmt::skip]
pub const IGNORED_MODEL: &[&str] = &[
    "aliases", "max_tokens", "reasoning_echo", "reasoning_effort", "temperature",
];

#[rustfmt::skip]
pub const IGNORED_FALLBACK: &[&str] = &[
    "extra_body", "key_env", "name", "reasoning_echo",
];

#[rustfmt::skip]
pub const IGNORED_APPROVALS: &[&str] = &[
    "cron_mode", "denial_breaker_threshold", "destructive_slash_confirm",
    "single_query_mode", "smart_policy", "unattended_mode",
];

pub const IGNORED_SESSION_RESET: &[&str] = &["bg_process_max_age_hours"];

/// `cron.*` keys for Hermes features hermesd does not have (external schedulers, mirroring
/// deliveries into chat sessions).
pub const IGNORED_CRON: &[&str] = &[
    "chronos",
    "mirror_delivery",
    "provider",
    "session_db_timeout_seconds",
];

#[rustfmt::skip]
pub const IGNORED_DISPLAY: &[&str] = &[
    "battery", "bell_on_complete", "bell_on_prompt",
    "cleanup_progress", "cli_multiline_shortcuts", "cli_rebuild_scrollback_on_redraw",
    "cli_refresh_interval", "compact", "copy_shortcut", "credits_notices",
    "file_mutation_verifier", "final_response_markdown", "focus_saved_tool_progress", "focus_view",
    "friendly_tool_labels", "inline_diffs", "interface", "language", "live_status",
    "long_running_notifications", "memory_notifications", "persist_prompts", "persistent_output",
    "persistent_output_max_lines", "personality", "pet", "reasoning_full", "reasoning_style",
    "resume_display", "resume_exchanges", "resume_last_session", "resume_max_assistant_chars",
    "resume_max_assistant_lines", "resume_max_user_chars", "resume_skip_tool_only",
    "runtime_footer", "show_commentary", "show_cost", "skin", "spinner_token_flow", "status_bar",
    "status_phrases", "streaming", "suppress_warning_notifications", "thinking_progress",
    "timestamp_format", "timestamps", "tool_progress_command", "tool_progress_grouping",
    "tool_progress_overrides", "tui_agents_nudge", "tui_auto_resume_recent",
    "tui_status_indicator", "turn_completion_explainer", "turn_summary", "user_message_preview",
    "vim_mode",
];

#[rustfmt::skip]
pub const IGNORED_DISPLAY_PLATFORM: &[&str] = &[
    "busy_steer_ack_enabled", "cleanup_progress", "live_status", "long_running_notifications",
    "memory_notifications", "reasoning_style", "runtime_footer", "status_phrases",
    "suppress_warning_notifications", "thinking_progress", "tool_progress_grouping",
];

#[rustfmt::skip]
pub const IGNORED_AGENT: &[&str] = &[
    "agent_cache", "api_max_retries", "bot_mode_protocol", "budget_warning_ratio",
    "build_wait_timeout", "coding_context", "coding_instructions", "cron_drain_timeout",
    "empty_response_guard", "environment_hint", "environment_probe",
    "execution_guidance", "fast_auto_seconds", "gateway_startup_restore_drain_timeout",
    "gateway_startup_warmup_timeout", "gateway_turn_lease_timeout",
    "intent_ack_continuation", "local_stream_stale_timeout", "max_verify_nudges",
    "quiet_mode", "reasoning_echo", "reasoning_effort",
    "reasoning_overrides", "reconnect_attention_after", "restart_after_turn_timeout",
    "run_budget_seconds", "sanitizer_heal_escalation_threshold", "service_tier",
    "session_stall_timeout", "stall_guards",
    "turn_liveness", "verbose", "verify_guidance", "verify_on_stop",
];

#[rustfmt::skip]
pub const IGNORED_COMPRESSION: &[&str] = &[
    "abort_on_summary_failure", "checkpoint_required", "codex_app_server_auto",
    "codex_gpt55_autoraise", "codex_gpt55_autoraise_notice", "codex_responses_compact_threshold",
    "codex_responses_native", "context_timeout_seconds", "context_total_ceiling_seconds",
    "hygiene_failure_cooldown_seconds", "hygiene_hard_message_limit",
    "hygiene_max_turn_hold_seconds", "hygiene_timeout_seconds", "hygiene_total_ceiling_seconds",
    "idle_compact_after_seconds", "in_place", "max_attempts", "micro_compact",
    "micro_compact_defrag_threshold_tokens", "micro_compact_every_n_turns",
    "min_tail_user_messages", "model_thresholds", "proactive_prune_min_reclaim_tokens",
    "proactive_prune_min_result_chars", "proactive_prune_tokens", "progress_notices",
    "protect_first_n", "summary_model", "summary_provider", "tail_mode", "target_ratio",
    "threshold_tokens",
];

/// `gateway.*` keys for gateway features hermesd does not implement (yet).
#[rustfmt::skip]
pub const IGNORED_GATEWAY: &[&str] = &[
    "always_log_local", "auto_multiplex_migration", "bot_loop_guard", "delivery_ledger",
    "filter_silence_narration", "loop_watchdog", "loop_watchdog_max_strikes",
    "loop_watchdog_probe_interval_s", "loop_watchdog_probe_timeout_s", "max_concurrent_sessions",
    "max_inbound_media_bytes", "media_delivery_allow_dirs", "message_timestamps",
    "multiplex_profile_allowlist", "multiplex_profiles", "platform_connect_timeout",
    "profile_routes", "quick_commands", "reset_triggers", "respawn_storm", "restart_loop_guard",
    "scale_to_zero", "signal_interrupt_grace_timeout", "startup_watchdog",
    "startup_watchdog_timeout_seconds", "strict", "systemd_watchdog_seconds", "trust_env", "trust_recent_files", "trust_recent_files_seconds",
    "write_sessions_json",
];

/// Warns about every key in `unknown` that is in none of the `ignored` lists, and notes the
/// ignored ones that are set for the single "not supported yet" warning.
pub fn warn_unknown(issues: &mut Issues, prefix: &str, unknown: &Unknown, ignored: &[&[&str]]) {
    for (key, value) in unknown {
        if !ignored.iter().any(|list| list.contains(&key.as_str())) {
            issues.warn(format!("unknown key '{}'", join(prefix, key)));
        } else if super::unsupported::is_set(value) {
            issues.ignored.push(join(prefix, key));
        }
    }
}

/// `prefix.key`, or just `key` at the top level.
pub fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sorted(list: &[&str]) -> bool {
        list.windows(2).all(|pair| pair[0] < pair[1])
    }

    #[test]
    fn lists_are_sorted_without_duplicates() {
        for list in [
            IGNORED_TOP_LEVEL,
            OTHER_PLATFORMS,
            PLATFORM_PASSTHROUGH,
            IGNORED_PLATFORM,
            IGNORED_API_SERVER,
            IGNORED_HOME_CHANNEL,
            IGNORED_MODEL,
            IGNORED_FALLBACK,
            IGNORED_APPROVALS,
            IGNORED_SESSION_RESET,
            IGNORED_CRON,
            IGNORED_DISPLAY,
            IGNORED_DISPLAY_PLATFORM,
            IGNORED_AGENT,
            IGNORED_COMPRESSION,
            IGNORED_GATEWAY,
        ] {
            assert!(sorted(list), "{list:?}");
        }
    }

    #[test]
    fn warns_only_for_truly_unknown_keys() {
        let mut issues = Issues::default();
        let unknown: Unknown = [
            ("honcho".to_owned(), json!({"enabled": true})),
            ("tokn".to_owned(), json!("x")),
            ("whatsapp".to_owned(), json!({})),
        ]
        .into_iter()
        .collect();
        warn_unknown(
            &mut issues,
            "",
            &unknown,
            &[IGNORED_TOP_LEVEL, OTHER_PLATFORMS],
        );
        // An empty mapping asks for nothing, so it is not reported as set.
        assert_eq!(issues.ignored, ["honcho"]);
        warn_unknown(&mut issues, "telegram", &unknown, &[]);
        assert_eq!(
            issues.warnings,
            [
                "unknown key 'tokn'",
                "unknown key 'telegram.honcho'",
                "unknown key 'telegram.tokn'",
                "unknown key 'telegram.whatsapp'",
            ]
        );
    }
}
