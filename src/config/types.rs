//! The validated configuration: every value typed, defaulted and checked. The `Default` impls
//! here are the built-in defaults (documented in `config/default.yaml`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::choice::{
    ApiMode, ApprovalMode, BusyInputMode, ResetMode, StreamingTransport, ToolProgress,
    UnauthorizedDmBehavior,
};
use super::platform_types::{AdminConfig, ApiServerConfig, GatewayAccess, Platforms};
use super::secret::Secret;

/// The whole validated configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    pub model: ModelConfig,
    pub providers: BTreeMap<String, ProviderConfig>,
    pub fallback_providers: Vec<FallbackProvider>,
    pub approvals: ApprovalsConfig,
    pub command_allowlist: Vec<String>,
    pub session_reset: SessionResetPolicy,
    /// Per chat type (`dm`, `group`, `thread`, ...) overrides of `session_reset`.
    pub reset_by_type: BTreeMap<String, SessionResetPolicy>,
    /// Per platform overrides; they win over `reset_by_type`.
    pub reset_by_platform: BTreeMap<String, SessionResetPolicy>,
    pub group_sessions_per_user: bool,
    pub thread_sessions_per_user: bool,
    pub unauthorized_dm_behavior: UnauthorizedDmBehavior,
    pub streaming: StreamingConfig,
    pub display: DisplayConfig,
    pub agent: AgentConfig,
    pub compression: CompressionConfig,
    pub gateway: GatewayAccess,
    pub platforms: Platforms,
    pub api_server: ApiServerConfig,
    pub admin: AdminConfig,
    /// `auxiliary.title_generation`: the session title generated after the first exchange.
    pub auxiliary: AuxiliaryConfig,
    /// How long a reply may wait out a platform's flow control.
    pub delivery: super::delivery::DeliveryConfig,
    pub cron: super::cron::CronConfig,
    /// `state:`: the SQLite file (default) or a shared PostgreSQL database.
    pub state: super::state::StateConfig,
    /// The MCP servers whose tools the agent may call, by name.
    pub mcp_servers: BTreeMap<String, super::mcp::McpServerConfig>,
    /// Outbound networking: the proxy variables and the extra CA files (`SSL_CERT_FILE`,
    /// `tls.ca_certificates`), shared by every client through `hermes_adapter::net::Net`.
    pub network: hermes_adapter::net::NetSettings,
    /// Photos and voice from chats: vision routing and transcription.
    pub media: super::media::MediaConfig,
    /// `tts:` and `voice:`: spoken replies.
    pub speech: super::speech::SpeechConfig,
    /// `skills:`: per-platform disabling and extra skill directories.
    pub skills: super::skills::SkillsConfig,
    /// `web:` and `security.allow_private_urls`: the web tools' backends and SSRF switch.
    pub web: super::web::WebConfig,
    /// `context_file_max_chars`: the cap on each context file; `None` follows the window.
    pub context_file_max_chars: Option<u64>,
    /// `platform_toolsets` and `agent.disabled_toolsets`: the toolsets each platform gets.
    pub toolsets: super::toolsets::ToolsetsConfig,
    /// Which guidance blocks and platform hint go into the system prompt.
    pub prompt: super::prompt::PromptConfig,
    /// `agent.system_prompt` and the personalities `/personality` chooses from.
    pub personality: super::personality::PersonalityConfig,
    /// `terminal:`: where commands and file tools act.
    pub terminal: super::terminal::TerminalConfig,
    /// `hooks:` and `hooks_auto_accept`: the operator's shell hooks.
    pub hooks: super::hooks::HooksConfig,
}

/// The auxiliary model tasks hermesd runs (Hermes `auxiliary:`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuxiliaryConfig {
    pub title_generation: TitleGenerationConfig,
}

/// `auxiliary.title_generation` (Hermes default: on).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TitleGenerationConfig {
    pub enabled: bool,
}

impl Default for AuxiliaryConfig {
    fn default() -> Self {
        Self {
            title_generation: TitleGenerationConfig { enabled: true },
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            model: ModelConfig::default(),
            providers: BTreeMap::new(),
            fallback_providers: Vec::new(),
            approvals: ApprovalsConfig::default(),
            command_allowlist: Vec::new(),
            session_reset: SessionResetPolicy::default(),
            reset_by_type: BTreeMap::new(),
            reset_by_platform: BTreeMap::new(),
            group_sessions_per_user: true,
            thread_sessions_per_user: false,
            unauthorized_dm_behavior: UnauthorizedDmBehavior::Pair,
            streaming: StreamingConfig::default(),
            display: DisplayConfig::default(),
            agent: AgentConfig::default(),
            compression: CompressionConfig::default(),
            gateway: GatewayAccess::default(),
            platforms: Platforms::default(),
            api_server: ApiServerConfig::default(),
            admin: AdminConfig::default(),
            auxiliary: AuxiliaryConfig::default(),
            delivery: super::delivery::DeliveryConfig::default(),
            cron: super::cron::CronConfig::default(),
            state: super::state::StateConfig::default(),
            mcp_servers: BTreeMap::new(),
            network: hermes_adapter::net::NetSettings::default(),
            media: super::media::MediaConfig::default(),
            speech: super::speech::SpeechConfig::default(),
            skills: super::skills::SkillsConfig::default(),
            web: super::web::WebConfig::default(),
            context_file_max_chars: None,
            toolsets: super::toolsets::ToolsetsConfig::default(),
            prompt: super::prompt::PromptConfig::default(),
            personality: super::personality::PersonalityConfig::default(),
            terminal: super::terminal::TerminalConfig::default(),
            hooks: super::hooks::HooksConfig::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelConfig {
    /// `auto` lets the agent pick from whichever provider has credentials.
    pub provider: String,
    /// The wire protocol; `None` lets the provider and base URL decide.
    pub api_mode: Option<ApiMode>,
    /// The model name (`model.default`); `None` means the provider's default.
    pub default: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<Secret>,
    /// Context window override in tokens.
    pub context_length: Option<u64>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            provider: "auto".to_owned(),
            api_mode: None,
            default: None,
            base_url: None,
            api_key: None,
            context_length: None,
        }
    }
}

/// Credentials for one provider (`providers.<name>`, or `OPENAI_API_KEY` and friends).
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct ProviderConfig {
    pub base_url: Option<String>,
    pub api_key: Option<Secret>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FallbackProvider {
    pub provider: String,
    pub model: String,
    pub api_mode: Option<ApiMode>,
    pub base_url: Option<String>,
    pub api_key: Option<Secret>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalsConfig {
    pub mode: ApprovalMode,
    /// Seconds before an unanswered approval prompt fails closed.
    #[serde(rename = "timeout")]
    pub timeout_secs: u64,
    /// Globs of commands that never run, whatever the mode (`approvals.deny`).
    pub deny: Vec<String>,
    /// `/reload-mcp` asks to be confirmed first (`approvals.mcp_reload_confirm`).
    pub mcp_reload_confirm: bool,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self {
            mode: ApprovalMode::Manual,
            timeout_secs: 60,
            deny: Vec::new(),
            mcp_reload_confirm: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionResetPolicy {
    pub mode: ResetMode,
    /// Local hour (0-23) of the daily reset.
    pub at_hour: u8,
    pub idle_minutes: u32,
    pub notify: bool,
    pub notify_exclude_platforms: Vec<String>,
}

impl Default for SessionResetPolicy {
    fn default() -> Self {
        Self {
            mode: ResetMode::None,
            at_hour: 4,
            idle_minutes: 1440,
            notify: true,
            notify_exclude_platforms: vec!["api_server".to_owned(), "webhook".to_owned()],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamingConfig {
    pub enabled: bool,
    pub transport: StreamingTransport,
    #[serde(rename = "edit_interval")]
    pub edit_interval_secs: f64,
    pub buffer_threshold: u32,
    pub cursor: String,
    #[serde(rename = "fresh_final_after_seconds")]
    pub fresh_final_after_secs: f64,
}

impl Default for StreamingConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            transport: StreamingTransport::Auto,
            edit_interval_secs: 0.8,
            buffer_threshold: 24,
            cursor: " \u{2589}".to_owned(),
            fresh_final_after_secs: 0.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DisplayConfig {
    pub busy_input_mode: BusyInputMode,
    /// What a chat is told when a background process its agent started ends.
    pub background_process_notifications: super::ProcessNotices,
    pub busy_steer_ack_enabled: bool,
    pub busy_ack_detail: bool,
    pub tool_progress: ToolProgress,
    /// Maximum characters of a tool-call preview; 0 = no limit.
    pub tool_preview_length: u32,
    pub show_reasoning: bool,
    pub interim_assistant_messages: bool,
    /// Seconds before ephemeral system notices are deleted; 0 = never.
    #[serde(rename = "ephemeral_system_ttl")]
    pub ephemeral_system_ttl_secs: u64,
    /// Per-platform overrides (`display.platforms.<platform>`).
    pub platforms: BTreeMap<String, DisplayOverrides>,
}

impl Default for DisplayConfig {
    fn default() -> Self {
        Self {
            busy_input_mode: BusyInputMode::Interrupt,
            background_process_notifications: super::ProcessNotices::All,
            busy_steer_ack_enabled: true,
            busy_ack_detail: true,
            tool_progress: ToolProgress::All,
            tool_preview_length: 0,
            show_reasoning: false,
            interim_assistant_messages: true,
            ephemeral_system_ttl_secs: 0,
            platforms: BTreeMap::new(),
        }
    }
}

/// Display settings one platform overrides; `None` falls through to the global value.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct DisplayOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_progress: Option<ToolProgress>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_ack_detail: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub show_reasoning: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interim_assistant_messages: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_preview_length: Option<u32>,
}

/// Agent-loop limits and the gateway's timers around a turn. All `*_secs` use 0 for "off".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentConfig {
    pub max_turns: u32,
    #[serde(rename = "gateway_timeout")]
    pub gateway_timeout_secs: u64,
    #[serde(rename = "gateway_timeout_warning")]
    pub gateway_timeout_warning_secs: u64,
    #[serde(rename = "gateway_notify_interval")]
    pub gateway_notify_interval_secs: u64,
    #[serde(rename = "restart_drain_timeout")]
    pub restart_drain_timeout_secs: u64,
    #[serde(rename = "gateway_auto_continue_freshness")]
    pub gateway_auto_continue_freshness_secs: u64,
    #[serde(rename = "clarify_timeout")]
    pub clarify_timeout_secs: u64,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_turns: 500,
            gateway_timeout_secs: 1800,
            gateway_timeout_warning_secs: 900,
            gateway_notify_interval_secs: 180,
            restart_drain_timeout_secs: 0,
            gateway_auto_continue_freshness_secs: 3600,
            clarify_timeout_secs: 3600,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompressionConfig {
    pub enabled: bool,
    /// Fraction of the context window (0 < t <= 1) that triggers compression.
    pub threshold: f64,
    /// Most recent messages never compressed.
    pub protect_last_n: u32,
}

impl Default for CompressionConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold: 0.5,
            protect_last_n: 20,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::choice::ReplyToMode;

    #[test]
    fn defaults_match_the_hermes_reference() {
        let config = Config::default();
        assert_eq!(config.approvals.timeout_secs, 60);
        assert_eq!(config.approvals.mode, ApprovalMode::Manual);
        assert!(config.group_sessions_per_user);
        assert!(!config.thread_sessions_per_user);
        assert_eq!(config.session_reset.mode, ResetMode::None);
        assert_eq!(config.api_server.port, 8642);
        assert_eq!(config.admin.port, 8643);
        assert_eq!(config.agent.max_turns, 500);
        assert_eq!(config.compression.protect_last_n, 20);
        assert_eq!(config.platforms.telegram.reply_to_mode, ReplyToMode::First);
    }
}
