//! Configuration: Hermes-compatible `config.yaml`, `.env` and env var names, layered as
//! built-in defaults → `$HERMES_HOME/config.yaml` → `$HERMES_HOME/.env` (never overriding a
//! variable already set) → the environment.
//!
//! The flow is `layers` (files and `HERMES__*` overrides into one JSON tree) → `raw` (serde
//! types, every field optional) → `validate` (pure: typed [`Config`], every error at once).
//! The process environment is never written here, and is read only by dotenvy when a `.env`
//! value refers to `${VAR}`: callers pass the environment in as a map.

mod choice;
mod cron;
mod delivery;
pub mod durations;
mod env_overrides;
mod error;
mod hooks;
mod known_keys;
mod layers;
mod listeners;
mod mcp;
mod mcp_sampling;
mod media;
pub mod model_edit;
mod network;
mod parse;
pub mod personality;
mod platform_types;
mod platforms;
mod process_notices;
mod prompt;
mod raw;
mod secret;
mod sections;
mod shape;
mod skills;
mod speech;
mod state;
mod terminal;
pub mod toolset_names;
mod toolsets;
mod types;
mod unsupported;
mod validate;
pub mod web;
mod whatsapp_cloud;
mod zone;

#[cfg(test)]
mod key_table;
#[cfg(test)]
mod platform_tests;
#[cfg(test)]
mod terminal_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;

use crate::home::HermesHome;

pub use choice::{
    ApiMode, ApprovalMode, BusyInputMode, Choice, ImageInputMode, ReplyToMode, ResetMode,
    StateBackend, StreamingTransport, ToolProgress, UnauthorizedDmBehavior,
};
pub use cron::CronConfig;
pub use delivery::{DeliveryConfig, MAX_RATE_LIMIT_DEADLINE_SECS};
pub use error::{ConfigError, ConfigErrors};
pub use hooks::{
    DEFAULT_HOOK_TIMEOUT_SECS, FIRED_EVENTS, HOOK_EVENTS, HookSpec, HooksConfig,
    MAX_HOOK_TIMEOUT_SECS,
};
pub use mcp::{DEFAULT_MCP_CONNECT_TIMEOUT, DEFAULT_MCP_TIMEOUT, McpServerConfig, McpTransport};
pub use mcp_sampling::{McpSampling, SamplingLogLevel};
pub use media::{AuxVisionConfig, MediaConfig, STT_PROVIDERS, SttConfig, SttOpenAiConfig};
pub use platform_types::{
    AdminConfig, ApiServerConfig, Extra, GatewayAccess, HomeChannel, PlatformConfig, Platforms,
    WebhookPlatform,
};
pub use process_notices::ProcessNotices;
pub use prompt::{HintOverride, PromptConfig, ToolUseEnforcement};
pub use secret::{REDACTED, Secret};
pub use skills::SkillsConfig;
pub use speech::{SpeechConfig, TTS_PROVIDERS, TtsConfig, TtsElevenLabsConfig, TtsOpenAiConfig};
pub use state::{DATABASE_URL_ENV, StateConfig};
pub use terminal::{DockerSettings, SandboxScope, SshSettings, TerminalBackend, TerminalConfig};
pub use toolsets::ToolsetsConfig;
pub use types::{
    AgentConfig, ApprovalsConfig, AuxiliaryConfig, CompressionConfig, Config, DisplayConfig,
    DisplayOverrides, FallbackProvider, ModelConfig, ProviderConfig, SessionResetPolicy,
    StreamingConfig, TitleGenerationConfig,
};
pub use unsupported::NOT_SUPPORTED_YET;
pub use web::{ExtractBackend, SearchBackend, WebConfig, WebEndpoints};
pub use zone::{UnknownZone, Zone};

/// Exit code for an invalid configuration (EX_CONFIG): systemd should not restart-loop on it.
pub const EXIT_CONFIG: i32 = 78;

/// A loaded, validated configuration.
#[derive(Clone)]
pub struct LoadedConfig {
    pub config: Config,
    /// Unknown keys and ignored values, one sentence each (`unknown key 'telegram.tokn'`).
    pub warnings: Vec<String>,
    /// The environment after the `.env` merge: what child processes and adapters should see.
    pub env: BTreeMap<String, String>,
}

impl fmt::Debug for LoadedConfig {
    /// The env map holds tokens, so only its names are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedConfig")
            .field("config", &self.config)
            .field("warnings", &self.warnings)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Loads and validates the configuration of `home`, reading `env` (the process environment,
/// or a test's map) but never changing it. Missing `config.yaml` and `.env` mean defaults.
pub fn load(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
) -> Result<LoadedConfig, ConfigErrors> {
    let (env, mut errors) = layers::merge_dotenv(&home.dotenv(), env);
    let config_path = home.config_yaml();
    let mut tree = match layers::read_config_tree(&config_path, &env) {
        Ok(tree) => tree,
        Err(error) => {
            errors.push(error);
            return Err(ConfigErrors(errors));
        }
    };
    let unset_references = layers::expand_env_refs(&mut tree, &env);
    let validated_but_ignored = unsupported::validated_keys_set(&tree);
    let raw = match raw::RawConfig::from_tree(tree) {
        Ok(raw) => raw,
        Err(error) => {
            errors.push(ConfigError::new(
                config_path.display().to_string(),
                error.to_string(),
            ));
            return Err(ConfigErrors(errors));
        }
    };
    match validate::validate(&raw, &env) {
        Ok(validated) if errors.is_empty() => {
            let mut warnings: Vec<String> = unset_references
                .into_iter()
                .map(|name| format!("${{{name}}} is used in config.yaml but {name} is not set"))
                .collect();
            warnings.extend(validated.warnings);
            let mut ignored = validated.ignored;
            ignored.extend(validated_but_ignored);
            warnings.extend(unsupported::warning(ignored));
            Ok(LoadedConfig {
                config: validated.config,
                warnings,
                env,
            })
        }
        Ok(_) => Err(ConfigErrors(errors)),
        Err(ConfigErrors(more)) => {
            errors.extend(more);
            Err(ConfigErrors(errors))
        }
    }
}
