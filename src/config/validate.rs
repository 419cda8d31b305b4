//! `validate()`: the pure step from [`RawConfig`] plus the environment to a typed [`Config`].
//! It never stops at the first problem: every error and warning is collected and returned.

use std::collections::BTreeMap;

use serde_json::Value;

use super::choice::{ApiMode, UnauthorizedDmBehavior};
use super::durations;
use super::env_overrides::{self, ProviderField, env_leaf};
use super::error::ConfigErrors;
use super::known_keys::{
    IGNORED_FALLBACK, IGNORED_GATEWAY, IGNORED_MODEL, IGNORED_TOP_LEVEL, OTHER_PLATFORMS,
    warn_unknown,
};
use super::listeners;
use super::network;
use super::parse::{Issues, at, kind};
use super::platforms::{self, Blocks};
use super::raw::{ListOf, RawConfig, RawFallbackProvider, RawModelEntry, RawProvider, Section};
use super::sections;
use super::types::{
    AuxiliaryConfig, Config, FallbackProvider, ModelConfig, ProviderConfig, TitleGenerationConfig,
};

/// A validated configuration and the warnings (unknown keys, ignored values) found on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct Validated {
    pub config: Config,
    pub warnings: Vec<String>,
    /// Accepted-but-ignored keys that are set (see `unsupported`).
    pub ignored: Vec<String>,
}

/// Types, defaults and checks every setting. `env` is the environment after the `.env` merge;
/// it is only read.
pub fn validate(
    raw: &RawConfig,
    env: &BTreeMap<String, String>,
) -> Result<Validated, ConfigErrors> {
    let mut issues = Issues::default();
    warn_unknown(
        &mut issues,
        "",
        &raw.unknown,
        &[IGNORED_TOP_LEVEL, OTHER_PLATFORMS],
    );

    let gateway = issues
        .section("gateway", raw.gateway.as_ref())
        .unwrap_or_default();
    warn_unknown(
        &mut issues,
        "gateway",
        &gateway.unknown,
        &[IGNORED_GATEWAY, OTHER_PLATFORMS],
    );
    let platforms_block = issues
        .section("platforms", raw.platforms.as_ref())
        .unwrap_or_default();
    warn_unknown(
        &mut issues,
        "platforms",
        &platforms_block.unknown,
        &[OTHER_PLATFORMS],
    );
    let gateway_platforms = issues
        .section("gateway.platforms", gateway.platforms.as_ref())
        .unwrap_or_default();
    warn_unknown(
        &mut issues,
        "gateway.platforms",
        &gateway_platforms.unknown,
        &[OTHER_PLATFORMS],
    );
    let blocks = Blocks {
        top: raw,
        platforms: &platforms_block,
        gateway: &gateway,
        gateway_platforms: &gateway_platforms,
    };

    // Hermes looks for these gateway settings at the top level, falling back to `gateway:`
    // if the top level lacks the key.
    let top_or_gateway = |key: &str, top: Option<&Value>, nested: Option<&Value>| {
        at(key, top).or_else(|| at(format!("gateway.{key}"), nested))
    };
    let (reset_label, reset_section) = match &raw.session_reset {
        Some(section) => ("session_reset", Some(section)),
        None => ("gateway.session_reset", gateway.session_reset.as_ref()),
    };
    let (streaming_label, streaming_section) = match &raw.streaming {
        Some(section) => ("streaming", Some(section)),
        None => ("gateway.streaming", gateway.streaming.as_ref()),
    };

    let defaults = Config::default();
    let mut config = Config {
        model: model(&mut issues, raw.model.as_ref()),
        providers: providers(&mut issues, raw.providers.as_ref(), env),
        fallback_providers: fallback_providers(&mut issues, raw.fallback_providers.as_ref()),
        approvals: sections::approvals(&mut issues, raw.approvals.as_ref()),
        command_allowlist: issues
            .list(
                at("command_allowlist", raw.command_allowlist.as_ref()),
                false,
            )
            .unwrap_or_default(),
        session_reset: sections::session_reset(&mut issues, reset_label, reset_section),
        reset_by_type: sections::reset_overrides(
            &mut issues,
            "reset_by_type",
            raw.reset_by_type.as_ref(),
        ),
        reset_by_platform: sections::reset_overrides(
            &mut issues,
            "reset_by_platform",
            raw.reset_by_platform.as_ref(),
        ),
        group_sessions_per_user: issues.bool(
            top_or_gateway(
                "group_sessions_per_user",
                raw.group_sessions_per_user.as_ref(),
                gateway.group_sessions_per_user.as_ref(),
            ),
            defaults.group_sessions_per_user,
        ),
        thread_sessions_per_user: issues.bool(
            top_or_gateway(
                "thread_sessions_per_user",
                raw.thread_sessions_per_user.as_ref(),
                gateway.thread_sessions_per_user.as_ref(),
            ),
            defaults.thread_sessions_per_user,
        ),
        unauthorized_dm_behavior: issues.choice::<UnauthorizedDmBehavior>(
            top_or_gateway(
                "unauthorized_dm_behavior",
                raw.unauthorized_dm_behavior.as_ref(),
                gateway.unauthorized_dm_behavior.as_ref(),
            ),
            defaults.unauthorized_dm_behavior,
        ),
        streaming: sections::streaming(&mut issues, streaming_label, streaming_section),
        display: sections::display(&mut issues, raw.display.as_ref(), env),
        agent: sections::agent(&mut issues, raw.agent.as_ref()),
        compression: sections::compression(&mut issues, raw.compression.as_ref()),
        gateway: platforms::gateway_access(&mut issues, &gateway, env),
        platforms: defaults.platforms,
        api_server: listeners::api_server(&mut issues, &blocks, env),
        admin: listeners::admin(&mut issues, raw.admin.as_ref()),
        delivery: super::delivery::delivery(&mut issues, raw.delivery.as_ref()),
        cron: super::cron::cron(&mut issues, raw.cron.as_ref(), raw.timezone.as_ref(), env),
        state: super::state::state(&mut issues, raw.state.as_ref(), env),
        mcp_servers: super::mcp::mcp_servers(&mut issues, raw.mcp_servers.as_ref()),
        network: network::network(&mut issues, raw.tls.as_ref(), env),
        media: super::media::media(&mut issues, raw, &gateway),
        speech: super::speech::speech(&mut issues, raw.tts.as_ref(), raw.voice.as_ref()),
        skills: super::skills::skills(&mut issues, raw.skills.as_ref()),
        web: super::web::web(
            &mut issues,
            raw.web.as_ref(),
            raw.security.as_ref(),
            raw.browser.as_ref(),
            env,
        ),
        toolsets: Default::default(),
        context_file_max_chars: super::skills::context_file_max_chars(
            &mut issues,
            raw.context_file_max_chars.as_ref(),
        ),
        prompt: super::prompt::prompt(&mut issues, raw.agent.as_ref(), raw.platform_hints.as_ref()),
        personality: {
            let agent = match &raw.agent {
                Some(super::raw::Section::Map(agent)) => Some(agent),
                _ => None,
            };
            super::personality::personality(
                &mut issues,
                agent.and_then(|a| a.system_prompt.as_ref()),
                agent.and_then(|a| a.personalities.as_ref()),
                raw.personalities.as_ref(),
                env,
            )
        },
        terminal: super::terminal::terminal(&mut issues, raw.terminal.as_ref(), env),
        hooks: super::hooks::hooks(
            &mut issues,
            raw.hooks.as_ref(),
            raw.hooks_auto_accept.as_ref(),
            env,
        ),
        auxiliary: AuxiliaryConfig {
            title_generation: TitleGenerationConfig {
                enabled: issues.bool(
                    at(
                        "auxiliary.title_generation.enabled",
                        raw.auxiliary
                            .as_ref()
                            .and_then(|a| a.pointer("/title_generation/enabled")),
                    ),
                    true,
                ),
            },
        },
    };
    config.platforms.telegram =
        platforms::chat_platform(&mut issues, &blocks, &env_overrides::TELEGRAM, env);
    config.platforms.discord =
        platforms::chat_platform(&mut issues, &blocks, &env_overrides::DISCORD, env);
    config.platforms.slack =
        platforms::chat_platform(&mut issues, &blocks, &env_overrides::SLACK, env);
    config.platforms.signal =
        platforms::chat_platform(&mut issues, &blocks, &env_overrides::SIGNAL, env);
    config.platforms.webhook = platforms::webhook(&mut issues, &blocks, env);
    config.platforms.whatsapp_cloud =
        super::whatsapp_cloud::whatsapp_cloud(&mut issues, &blocks, env);
    let disabled_toolsets = match &raw.agent {
        Some(super::raw::Section::Map(agent)) => agent.disabled_toolsets.as_ref(),
        _ => None,
    };
    config.toolsets = super::toolsets::toolsets(
        &mut issues,
        raw.platform_toolsets.as_ref(),
        disabled_toolsets,
        &config.mcp_servers,
    );
    super::toolsets::check_guest_tools(
        &mut issues,
        &config.gateway.guest_tools,
        &config.mcp_servers,
    );
    listeners::check_ports(&mut issues, &config.api_server, &config.admin);
    issues.errors.extend(durations::check_env(env));

    if issues.errors.is_empty() {
        Ok(Validated {
            config,
            warnings: issues.warnings,
            ignored: issues.ignored,
        })
    } else {
        Err(ConfigErrors(issues.errors))
    }
}

fn model(issues: &mut Issues, entry: Option<&RawModelEntry>) -> ModelConfig {
    let defaults = ModelConfig::default();
    match entry {
        None => defaults,
        Some(RawModelEntry::Name(name)) => ModelConfig {
            default: issues.string(at("model", Some(&Value::String(name.clone())))),
            ..defaults
        },
        Some(RawModelEntry::Invalid(other)) => {
            issues.error(
                "model",
                format!("expected a model name or a mapping, got {}", kind(other)),
            );
            defaults
        }
        Some(RawModelEntry::Block(block)) => {
            warn_unknown(issues, "model", &block.unknown, &[IGNORED_MODEL]);
            ModelConfig {
                provider: issues
                    .string(at("model.provider", block.provider.as_ref()))
                    .unwrap_or(defaults.provider),
                api_mode: api_mode(issues, "model.api_mode", block.api_mode.as_ref()),
                default: issues.string(at("model.default", block.default.as_ref())),
                base_url: issues.url(at("model.base_url", block.base_url.as_ref())),
                api_key: issues.secret(at("model.api_key", block.api_key.as_ref())),
                context_length: issues.opt_uint(
                    at("model.context_length", block.context_length.as_ref()),
                    1,
                    u64::MAX,
                ),
            }
        }
    }
}

/// `providers.<name>` credentials, with `OPENAI_API_KEY` and friends layered on top.
fn providers(
    issues: &mut Issues,
    section: Option<&Section<BTreeMap<String, Section<RawProvider>>>>,
    env: &BTreeMap<String, String>,
) -> BTreeMap<String, ProviderConfig> {
    let mut providers = BTreeMap::new();
    for (name, entry) in issues.section("providers", section).unwrap_or_default() {
        let prefix = format!("providers.{name}");
        // Hermes provider entries carry much more (model lists, api_mode, ...); only the
        // credentials matter to the gateway, so the rest is ignored without a warning.
        let Some(entry) = issues.section(&prefix, Some(&entry)) else {
            continue;
        };
        let provider = ProviderConfig {
            base_url: issues.url(at(format!("{prefix}.base_url"), entry.base_url.as_ref())),
            api_key: issues.secret(at(format!("{prefix}.api_key"), entry.api_key.as_ref())),
        };
        providers.insert(name, provider);
    }
    for (var, provider, field) in env_overrides::PROVIDER_ENV {
        let Some(leaf) = env_leaf(env, var) else {
            continue;
        };
        let entry = providers.entry((*provider).to_owned()).or_default();
        match field {
            ProviderField::ApiKey => entry.api_key = issues.secret(Some(leaf)),
            ProviderField::BaseUrl => entry.base_url = issues.url(Some(leaf)),
        }
    }
    providers
}

fn fallback_providers(
    issues: &mut Issues,
    list: Option<&ListOf<Section<RawFallbackProvider>>>,
) -> Vec<FallbackProvider> {
    let items = match list {
        None => return Vec::new(),
        Some(ListOf::Invalid(other)) => {
            issues.error(
                "fallback_providers",
                format!(
                    "expected a list of {{provider, model}} entries, got {}",
                    kind(other)
                ),
            );
            return Vec::new();
        }
        Some(ListOf::List(items)) => items,
    };
    let mut fallbacks = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let prefix = format!("fallback_providers[{index}]");
        let entry = match item {
            Section::Map(entry) => entry,
            Section::Invalid(other) => {
                issues.error(
                    &prefix,
                    format!(
                        "expected a mapping with provider and model, got {}",
                        kind(other)
                    ),
                );
                continue;
            }
        };
        warn_unknown(issues, &prefix, &entry.unknown, &[IGNORED_FALLBACK]);
        let mut required = |field: &str, value: Option<&Value>| -> Option<String> {
            let key = format!("{prefix}.{field}");
            let missing = match value {
                None | Some(Value::Null) => true,
                Some(Value::String(text)) => text.trim().is_empty(),
                Some(_) => false,
            };
            if missing {
                issues.error(key, "required");
                return None;
            }
            issues.string(at(&key, value))
        };
        let provider = required("provider", entry.provider.as_ref());
        let model = required("model", entry.model.as_ref());
        let api_mode = api_mode(
            issues,
            &format!("{prefix}.api_mode"),
            entry.api_mode.as_ref(),
        );
        let base_url = issues.url(at(format!("{prefix}.base_url"), entry.base_url.as_ref()));
        let api_key = issues.secret(at(format!("{prefix}.api_key"), entry.api_key.as_ref()));
        if let (Some(provider), Some(model)) = (provider, model) {
            fallbacks.push(FallbackProvider {
                provider,
                model,
                api_mode,
                base_url,
                api_key,
            });
        }
    }
    fallbacks
}

/// `api_mode`: one of the three protocols; empty (as Hermes writes it) means unset.
fn api_mode(issues: &mut Issues, key: &str, value: Option<&Value>) -> Option<ApiMode> {
    let value = value.filter(|v| v.as_str().is_none_or(|text| !text.trim().is_empty()));
    issues.opt_choice(at(key, value))
}
