//! The configuration as written, in the Hermes layout: serde types whose fields are all
//! optional and whose leaves stay untyped JSON values.
//!
//! Nothing here can fail to deserialize: a leaf of the wrong type is kept as it is, a mapping
//! where a list belongs becomes [`Section::Invalid`], and keys we do not know land in the
//! `unknown` maps. `validate.rs` then types every leaf and reports all problems at once.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

pub use super::shape::{ListOf, Section, Unknown};

/// Top level of `config.yaml` (after `HERMES__*` overrides were layered on by the config crate).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawConfig {
    pub model: Option<RawModelEntry>,
    pub providers: Option<Section<BTreeMap<String, Section<RawProvider>>>>,
    pub fallback_providers: Option<ListOf<Section<RawFallbackProvider>>>,
    pub approvals: Option<Section<RawApprovals>>,
    pub command_allowlist: Option<Value>,
    pub session_reset: Option<Section<RawSessionReset>>,
    pub reset_by_type: Option<Section<BTreeMap<String, Section<RawSessionReset>>>>,
    pub reset_by_platform: Option<Section<BTreeMap<String, Section<RawSessionReset>>>>,
    pub group_sessions_per_user: Option<Value>,
    pub thread_sessions_per_user: Option<Value>,
    pub unauthorized_dm_behavior: Option<Value>,
    pub streaming: Option<Section<RawStreaming>>,
    pub display: Option<Section<RawDisplay>>,
    pub agent: Option<Section<RawAgent>>,
    pub compression: Option<Section<RawCompression>>,
    pub admin: Option<Section<RawAdmin>>,
    pub telegram: Option<Section<RawPlatform>>,
    pub discord: Option<Section<RawPlatform>>,
    pub slack: Option<Section<RawPlatform>>,
    pub signal: Option<Section<RawPlatform>>,
    pub api_server: Option<Section<RawApiServer>>,
    pub platforms: Option<Section<RawPlatforms>>,
    pub gateway: Option<Section<RawGateway>>,
    pub delivery: Option<Section<super::delivery::RawDelivery>>,
    pub cron: Option<Section<super::cron::RawCron>>,
    /// hermesd's own: the state backend (`state.rs`).
    pub state: Option<Section<super::state::RawState>>,
    /// IANA zone for cron schedules (Hermes's top-level key).
    pub timezone: Option<Value>,
    /// The MCP servers (validated in `mcp.rs`, which reads the untyped tree itself).
    pub mcp_servers: Option<Value>,
    /// Hermes's auxiliary-model tasks; only `title_generation.enabled` is read, the rest is
    /// left for the Python Hermes sharing the file.
    pub auxiliary: Option<Value>,
    /// hermesd's own: extra CA certificates for outbound TLS.
    pub tls: Option<Section<RawTls>>,
    /// Voice transcription (read in `media.rs`, with the two flat spellings below).
    pub stt: Option<Value>,
    pub stt_enabled: Option<Value>,
    pub stt_echo_transcripts: Option<Value>,
    /// Spoken replies (read in `speech.rs`).
    pub tts: Option<Value>,
    pub voice: Option<Value>,
    pub skills: Option<Section<super::skills::RawSkills>>,
    pub context_file_max_chars: Option<Value>,
    /// Toolsets per platform (validated in `toolsets.rs`).
    pub platform_toolsets: Option<Value>,
    /// Per-platform overrides of the prompt's platform hint (read in `prompt.rs`).
    pub platform_hints: Option<Value>,
    /// The terminal backend and its keys (read in `terminal.rs`, with `TERMINAL_*`).
    pub terminal: Option<Value>,
    /// The operator's shell hooks and their consent switch (read in `hooks.rs`).
    pub hooks: Option<Value>,
    pub hooks_auto_accept: Option<Value>,
    /// Named personalities for `/personality` (read in `personality.rs`).
    pub personalities: Option<Value>,
    /// Web tools, and the private-address switch in `security`/`browser` (read in `web.rs`).
    pub web: Option<Value>,
    pub security: Option<Value>,
    pub browser: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawTls {
    pub ca_certificates: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `model:` is either a bare model name (older Hermes files) or a mapping.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawModelEntry {
    Name(String),
    Block(Box<RawModel>),
    Invalid(Value),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawModel {
    pub provider: Option<Value>,
    pub api_mode: Option<Value>,
    pub base_url: Option<Value>,
    pub default: Option<Value>,
    pub api_key: Option<Value>,
    pub context_length: Option<Value>,
    pub supports_vision: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// One entry of the Hermes `providers:` mapping. Only the credentials matter to the gateway;
/// the other settings Hermes keeps there (model lists, `api_mode`, ...) are dropped unread.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawProvider {
    pub base_url: Option<Value>,
    pub api_key: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawFallbackProvider {
    pub provider: Option<Value>,
    pub api_mode: Option<Value>,
    pub model: Option<Value>,
    pub base_url: Option<Value>,
    pub api_key: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawApprovals {
    pub mode: Option<Value>,
    pub timeout: Option<Value>,
    pub deny: Option<Value>,
    pub mcp_reload_confirm: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawSessionReset {
    pub mode: Option<Value>,
    pub at_hour: Option<Value>,
    pub idle_minutes: Option<Value>,
    pub notify: Option<Value>,
    pub notify_exclude_platforms: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawStreaming {
    pub enabled: Option<Value>,
    pub transport: Option<Value>,
    /// Hermes alias for `transport` that also turns streaming on.
    pub mode: Option<Value>,
    pub edit_interval: Option<Value>,
    pub buffer_threshold: Option<Value>,
    pub cursor: Option<Value>,
    pub fresh_final_after_seconds: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawDisplay {
    pub busy_input_mode: Option<Value>,
    pub background_process_notifications: Option<Value>,
    pub busy_steer_ack_enabled: Option<Value>,
    pub busy_ack_detail: Option<Value>,
    pub tool_progress: Option<Value>,
    pub tool_preview_length: Option<Value>,
    pub show_reasoning: Option<Value>,
    pub interim_assistant_messages: Option<Value>,
    pub ephemeral_system_ttl: Option<Value>,
    pub platforms: Option<Section<BTreeMap<String, Section<RawDisplayPlatform>>>>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `display.platforms.<platform>`: per-platform overrides of the display settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawDisplayPlatform {
    pub streaming: Option<Value>,
    pub tool_progress: Option<Value>,
    pub busy_ack_detail: Option<Value>,
    pub show_reasoning: Option<Value>,
    pub interim_assistant_messages: Option<Value>,
    pub tool_preview_length: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawAgent {
    pub max_turns: Option<Value>,
    pub gateway_timeout: Option<Value>,
    pub gateway_timeout_warning: Option<Value>,
    pub gateway_notify_interval: Option<Value>,
    pub restart_drain_timeout: Option<Value>,
    pub gateway_auto_continue_freshness: Option<Value>,
    pub clarify_timeout: Option<Value>,
    pub image_input_mode: Option<Value>,
    /// Read with `platform_toolsets` in `toolsets.rs`.
    pub disabled_toolsets: Option<Value>,
    pub tool_use_enforcement: Option<Value>,
    pub task_completion_guidance: Option<Value>,
    pub parallel_tool_call_guidance: Option<Value>,
    /// Read with the top-level `personalities` in `personality.rs`.
    pub system_prompt: Option<Value>,
    pub personalities: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawCompression {
    pub enabled: Option<Value>,
    pub threshold: Option<Value>,
    pub protect_last_n: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawAdmin {
    pub host: Option<Value>,
    pub port: Option<Value>,
    pub token: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// A chat platform block (`telegram:`, `platforms.discord:`, `gateway.platforms.slack:`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawPlatform {
    pub enabled: Option<Value>,
    pub token: Option<Value>,
    pub app_token: Option<Value>,
    pub reply_to_mode: Option<Value>,
    pub allowed_users: Option<Value>,
    pub allow_all_users: Option<Value>,
    pub home_channel: Option<Section<RawHomeChannel>>,
    pub typing_indicator: Option<Value>,
    pub gateway_restart_notification: Option<Value>,
    pub extra: Option<Section<Unknown>>,
    /// Everything else: Hermes per-platform settings (bridged into `extra`) and typos.
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawHomeChannel {
    pub chat_id: Option<Value>,
    pub name: Option<Value>,
    pub thread_id: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// The OpenAI-compatible API server block. Hermes also accepts its settings inside `extra`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawApiServer {
    pub enabled: Option<Value>,
    pub key: Option<Value>,
    pub host: Option<Value>,
    pub port: Option<Value>,
    pub cors_origins: Option<Value>,
    pub model_name: Option<Value>,
    pub max_concurrent_runs: Option<Value>,
    pub body_timeout_seconds: Option<Value>,
    pub max_messages: Option<Value>,
    pub max_request_chars: Option<Value>,
    pub extra: Option<Section<Unknown>>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `platforms:` (and `gateway.platforms:`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawPlatforms {
    pub telegram: Option<Section<RawPlatform>>,
    pub discord: Option<Section<RawPlatform>>,
    pub slack: Option<Section<RawPlatform>>,
    pub signal: Option<Section<RawPlatform>>,
    pub api_server: Option<Section<RawApiServer>>,
    pub webhook: Option<Section<RawWebhook>>,
    pub whatsapp_cloud: Option<Section<RawPlatform>>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// The webhook platform block (`platforms.webhook:`): everything but `enabled` is in `extra`,
/// which the webhook adapter reads and checks itself.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawWebhook {
    pub enabled: Option<Value>,
    pub extra: Option<Section<Unknown>>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `gateway:`: Hermes accepts most gateway settings nested here too (a top-level key wins).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawGateway {
    pub platforms: Option<Section<RawPlatforms>>,
    pub telegram: Option<Section<RawPlatform>>,
    pub discord: Option<Section<RawPlatform>>,
    pub slack: Option<Section<RawPlatform>>,
    pub signal: Option<Section<RawPlatform>>,
    pub api_server: Option<Section<RawApiServer>>,
    pub session_reset: Option<Section<RawSessionReset>>,
    pub reset_by_type: Option<Section<BTreeMap<String, Section<RawSessionReset>>>>,
    pub reset_by_platform: Option<Section<BTreeMap<String, Section<RawSessionReset>>>>,
    pub group_sessions_per_user: Option<Value>,
    pub thread_sessions_per_user: Option<Value>,
    pub unauthorized_dm_behavior: Option<Value>,
    pub streaming: Option<Section<RawStreaming>>,
    pub allowed_users: Option<Value>,
    pub allow_all_users: Option<Value>,
    pub guest_tools: Option<Value>,
    pub stt: Option<Value>,
    pub stt_echo_transcripts: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

impl RawConfig {
    /// Reads the layered tree. Only a non-mapping root can fail, and the config crate never
    /// produces one; the error is still surfaced rather than unwrapped.
    pub fn from_tree(tree: Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(tree)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_shapes_are_kept_not_rejected() {
        let raw = RawConfig::from_tree(json!({
            "approvals": "manual",
            "session_reset": {"mode": 5, "at_hour": "abc", "surprise": true},
            "fallback_providers": [{"provider": "x"}, "oops"],
            "model": "anthropic/claude",
            "telegram": {"tokn": "x", "extra": {"a": 1}},
            "mystery": 1,
        }))
        .unwrap();
        assert!(matches!(raw.approvals, Some(Section::Invalid(_))));
        let Some(Section::Map(reset)) = raw.session_reset else {
            panic!("session_reset should parse")
        };
        assert_eq!(reset.mode, Some(json!(5)));
        assert_eq!(reset.at_hour, Some(json!("abc")));
        assert!(reset.unknown.contains_key("surprise"));
        let Some(ListOf::List(entries)) = raw.fallback_providers else {
            panic!("fallback_providers should be a list")
        };
        assert!(matches!(entries[0], Section::Map(_)));
        assert!(matches!(entries[1], Section::Invalid(_)));
        assert!(matches!(raw.model, Some(RawModelEntry::Name(ref n)) if n == "anthropic/claude"));
        let Some(Section::Map(telegram)) = raw.telegram else {
            panic!("telegram should parse")
        };
        assert!(telegram.unknown.contains_key("tokn"));
        assert!(raw.unknown.contains_key("mystery"));
    }

    #[test]
    fn null_means_unset() {
        let raw = RawConfig::from_tree(json!({"approvals": null, "group_sessions_per_user": null}))
            .unwrap();
        assert!(raw.approvals.is_none());
        assert!(raw.group_sessions_per_user.is_none());
    }
}
