//! Endpoints (provider, protocol, URL, key, model) and how the validated config turns into
//! the primary endpoint and its fallback chain.

use super::error::ProviderError;
use super::mode::{ApiMode, canonical_provider, known_provider, resolve_api_mode};
use crate::config::{Config, FallbackProvider, Secret};

/// One model on one server: everything needed to call it.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub provider: String,
    pub mode: ApiMode,
    pub base_url: String,
    pub api_key: Option<Secret>,
    pub model: String,
}

impl Endpoint {
    /// An endpoint whose API mode is resolved from the provider name and base URL.
    pub fn new(
        provider: impl Into<String>,
        base_url: impl Into<String>,
        api_key: Option<Secret>,
        model: impl Into<String>,
    ) -> Self {
        let provider = provider.into();
        let base_url = base_url.into();
        Self {
            mode: resolve_api_mode(None, &provider, &base_url),
            provider,
            base_url,
            api_key,
            model: model.into(),
        }
    }

    /// The same endpoint with an explicit API mode.
    pub fn with_mode(mut self, mode: ApiMode) -> Self {
        self.mode = mode;
        self
    }
}

const NOTHING_CONFIGURED: &str = "no model provider configured: set model.provider and \
    model.default in config.yaml, or OPENAI_BASE_URL for an OpenAI-compatible server, or an \
    API key (OPENROUTER_API_KEY, ANTHROPIC_API_KEY or OPENAI_API_KEY) with model.default";

/// The primary endpoint from `model` (and `providers.<name>`), then the usable
/// `fallback_providers` in order. A fallback that cannot be used (no base URL, no key where
/// one is needed) is skipped with a warning: it must not stop the primary from working.
pub(crate) fn endpoints_from_config(config: &Config) -> Result<Vec<Endpoint>, ProviderError> {
    let mut endpoints = vec![primary(config)?];
    for (index, fallback) in config.fallback_providers.iter().enumerate() {
        match fallback_endpoint(config, fallback) {
            Ok(endpoint) => endpoints.push(endpoint),
            Err(reason) => tracing::warn!(
                entry = format!("fallback_providers[{index}]"),
                provider = %fallback.provider,
                "skipping a fallback provider: {reason}"
            ),
        }
    }
    Ok(endpoints)
}

fn primary(config: &Config) -> Result<Endpoint, ProviderError> {
    let model_config = &config.model;
    let provider = canonical_provider(&model_config.provider);
    let (provider, base_url, api_key) = if provider.is_empty() || provider == "auto" {
        auto_provider(config).ok_or_else(|| not_configured(NOTHING_CONFIGURED))?
    } else {
        let entry = config.providers.get(&provider);
        let base_url = non_empty(model_config.base_url.as_deref())
            .or_else(|| entry.and_then(|entry| non_empty(entry.base_url.as_deref())))
            .or_else(|| known_provider(&provider).and_then(|known| known.base_url))
            .ok_or_else(|| {
                not_configured(format!(
                    "model provider '{provider}' has no base URL: set model.base_url or \
                     providers.{provider}.base_url in config.yaml"
                ))
            })?
            .to_owned();
        let api_key = model_config
            .api_key
            .clone()
            .or_else(|| entry.and_then(|entry| entry.api_key.clone()));
        (provider, base_url, api_key)
    };
    if api_key.is_none() && needs_key(&provider, &base_url) {
        return Err(not_configured(format!(
            "model provider '{provider}' needs an API key: set providers.{provider}.api_key or \
             model.api_key in config.yaml (or the provider's *_API_KEY variable)"
        )));
    }
    let model = non_empty(model_config.default.as_deref()).ok_or_else(|| {
        not_configured(format!(
            "no model configured for provider '{provider}': set model.default in config.yaml"
        ))
    })?;
    let mode = resolve_api_mode(model_config.api_mode, &provider, &base_url);
    Ok(Endpoint::new(provider, base_url, api_key, model).with_mode(mode))
}

/// `provider: auto`: an explicit base URL (a local or custom server) first, then
/// `OPENAI_BASE_URL`, then the first provider with a key. Keys are never sent to a host they
/// were not configured for: a custom base URL only gets `model.api_key`.
fn auto_provider(config: &Config) -> Option<(String, String, Option<Secret>)> {
    let model_key = config.model.api_key.clone();
    if let Some(base_url) = non_empty(config.model.base_url.as_deref()) {
        return Some(("custom".to_owned(), base_url.to_owned(), model_key));
    }
    if let Some(openai) = config.providers.get("openai")
        && let Some(base_url) = non_empty(openai.base_url.as_deref())
    {
        let key = model_key.or_else(|| openai.api_key.clone());
        return Some(("openai".to_owned(), base_url.to_owned(), key));
    }
    ["openrouter", "anthropic", "openai"]
        .into_iter()
        .find_map(|name| {
            let key = config.providers.get(name)?.api_key.clone()?;
            let base_url = known_provider(name)?.base_url?;
            Some((name.to_owned(), base_url.to_owned(), Some(key)))
        })
}

/// Why a fallback or auxiliary provider entry cannot be used (it is then skipped, or its
/// task reports this to the user).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("it has no base_url and the provider has no default one")]
    NoBaseUrl,
    #[error("it has no api_key and providers.{provider}.api_key is not set")]
    NoApiKey { provider: String },
}

/// The endpoint of an auxiliary task's own model (`auxiliary.vision`), resolved as a
/// fallback entry is: its base URL, else `providers.<name>`, else the provider's own.
pub fn auxiliary_endpoint(
    config: &Config,
    provider: &str,
    model: &str,
    base_url: Option<&str>,
    api_key: Option<Secret>,
) -> Result<Endpoint, EntryError> {
    fallback_endpoint(
        config,
        &FallbackProvider {
            provider: provider.to_owned(),
            model: model.to_owned(),
            api_mode: None,
            base_url: base_url.map(str::to_owned),
            api_key,
        },
    )
}

fn fallback_endpoint(config: &Config, fallback: &FallbackProvider) -> Result<Endpoint, EntryError> {
    let provider = canonical_provider(&fallback.provider);
    let entry = config.providers.get(&provider);
    let known = known_provider(&provider);
    let base_url = non_empty(fallback.base_url.as_deref())
        .or_else(|| entry.and_then(|entry| non_empty(entry.base_url.as_deref())))
        .or_else(|| known.and_then(|known| known.base_url))
        .ok_or(EntryError::NoBaseUrl)?;
    let api_key = fallback
        .api_key
        .clone()
        .or_else(|| entry.and_then(|entry| entry.api_key.clone()));
    if api_key.is_none() && needs_key(&provider, base_url) {
        return Err(EntryError::NoApiKey { provider });
    }
    let mode = resolve_api_mode(fallback.api_mode, &provider, base_url);
    Ok(Endpoint::new(provider, base_url, api_key, fallback.model.clone()).with_mode(mode))
}

/// A known cloud provider at its own URL refuses requests without a key; the same name
/// pointed elsewhere (`OPENAI_BASE_URL` at a local vLLM) may need none.
fn needs_key(provider: &str, base_url: &str) -> bool {
    known_provider(provider).is_some_and(|known| {
        known.needs_key
            && known.base_url.is_some_and(|default| {
                default.trim_end_matches('/') == base_url.trim().trim_end_matches('/')
            })
    })
}

fn non_empty(text: Option<&str>) -> Option<&str> {
    text.map(str::trim).filter(|text| !text.is_empty())
}

fn not_configured(message: impl Into<String>) -> ProviderError {
    ProviderError::NotConfigured(message.into())
}

#[cfg(test)]
#[path = "endpoint_tests.rs"]
mod tests;
