//! Config → endpoints.

use super::*;
use crate::config::ProviderConfig;

fn config(provider: &str, model: Option<&str>) -> Config {
    let mut config = Config::default();
    config.model.provider = provider.to_owned();
    config.model.default = model.map(str::to_owned);
    config
}

fn with_key(mut config: Config, provider: &str, key: &str) -> Config {
    config.providers.insert(
        provider.to_owned(),
        ProviderConfig {
            base_url: None,
            api_key: Some(Secret::new(key)),
        },
    );
    config
}

fn message(result: Result<Vec<Endpoint>, ProviderError>) -> String {
    result.expect_err("should not be configured").to_string()
}

#[test]
fn nothing_configured_is_one_clear_error() {
    let text = message(endpoints_from_config(&Config::default()));
    assert!(
        text.starts_with("no model provider configured: set model.provider and model.default"),
        "{text}"
    );
}

#[test]
fn a_named_provider_gets_its_default_url_key_and_mode() {
    let config = with_key(
        config("anthropic", Some("claude-sonnet-4")),
        "anthropic",
        "sk-ant",
    );
    let endpoints = endpoints_from_config(&config).unwrap();
    let primary = &endpoints[0];
    assert_eq!(primary.provider, "anthropic");
    assert_eq!(primary.base_url, "https://api.anthropic.com");
    assert_eq!(primary.mode, ApiMode::AnthropicMessages);
    assert_eq!(primary.api_key.as_ref().map(Secret::expose), Some("sk-ant"));
    assert_eq!(primary.model, "claude-sonnet-4");
}

#[test]
fn model_settings_beat_provider_settings() {
    let mut config = with_key(
        config("openrouter", Some("m")),
        "openrouter",
        "provider-key",
    );
    config.model.api_key = Some(Secret::new("model-key"));
    config.model.base_url = Some("http://127.0.0.1:9/v1".into());
    let primary = &endpoints_from_config(&config).unwrap()[0];
    assert_eq!(
        primary.api_key.as_ref().map(Secret::expose),
        Some("model-key")
    );
    assert_eq!(primary.base_url, "http://127.0.0.1:9/v1");
    assert_eq!(primary.mode, ApiMode::ChatCompletions);
}

#[test]
fn cloud_providers_need_a_key_and_a_model() {
    let text = message(endpoints_from_config(&config("openrouter", Some("m"))));
    assert!(text.contains("'openrouter' needs an API key"), "{text}");
    let text = message(endpoints_from_config(&with_key(
        config("openrouter", None),
        "openrouter",
        "k",
    )));
    assert!(text.contains("set model.default"), "{text}");
    let text = message(endpoints_from_config(&config("custom", Some("m"))));
    assert!(text.contains("'custom' has no base URL"), "{text}");
}

#[test]
fn local_servers_need_no_key() {
    let primary = &endpoints_from_config(&config("ollama", Some("qwen3"))).unwrap()[0];
    assert_eq!(primary.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(primary.api_key, None);
}

#[test]
fn auto_prefers_a_base_url_then_openai_base_url_then_keys() {
    let mut custom = with_key(config("auto", Some("m")), "openrouter", "or-key");
    custom.model.base_url = Some("http://127.0.0.1:8080/v1".into());
    let primary = &endpoints_from_config(&custom).unwrap()[0];
    assert_eq!(
        (primary.provider.as_str(), primary.api_key.is_none()),
        ("custom", true)
    );

    let mut openai_compat = with_key(config("auto", Some("m")), "openrouter", "or-key");
    openai_compat.providers.insert(
        "openai".into(),
        ProviderConfig {
            base_url: Some("http://127.0.0.1:8000/v1".into()),
            api_key: None,
        },
    );
    let primary = &endpoints_from_config(&openai_compat).unwrap()[0];
    assert_eq!(primary.provider, "openai");
    assert_eq!(primary.mode, ApiMode::ChatCompletions);

    let keyed = with_key(config("auto", Some("m")), "anthropic", "sk-ant");
    let primary = &endpoints_from_config(&keyed).unwrap()[0];
    assert_eq!(primary.provider, "anthropic");
    assert_eq!(primary.mode, ApiMode::AnthropicMessages);
}

#[test]
fn fallbacks_follow_in_order_and_unusable_ones_are_skipped() {
    let mut config = with_key(config("openrouter", Some("m")), "openrouter", "or-key");
    config.fallback_providers = vec![
        FallbackProvider {
            provider: "anthropic".into(),
            model: "claude".into(),
            api_mode: None,
            base_url: None,
            api_key: None,
        },
        FallbackProvider {
            provider: "openai".into(),
            model: "gpt-5".into(),
            api_mode: None,
            base_url: None,
            api_key: Some(Secret::new("sk-openai")),
        },
        FallbackProvider {
            provider: "openrouter".into(),
            model: "other".into(),
            api_mode: Some(ApiMode::CodexResponses),
            base_url: None,
            api_key: None,
        },
    ];
    let endpoints = endpoints_from_config(&config).unwrap();
    let names: Vec<(&str, &str, ApiMode)> = endpoints
        .iter()
        .map(|e| (e.provider.as_str(), e.model.as_str(), e.mode))
        .collect();
    assert_eq!(
        names,
        [
            ("openrouter", "m", ApiMode::ChatCompletions),
            ("openai", "gpt-5", ApiMode::CodexResponses),
            ("openrouter", "other", ApiMode::CodexResponses),
        ],
        "anthropic has no key and is skipped; openrouter's fallback reuses providers.openrouter \
         with its explicit api_mode"
    );
    assert_eq!(
        endpoints[2].api_key.as_ref().map(Secret::expose),
        Some("or-key")
    );
}

#[test]
fn an_explicit_api_mode_beats_the_provider_and_url() {
    let mut config = config("custom", Some("m"));
    config.model.base_url = Some("https://api.anthropic.com".into());
    assert_eq!(
        endpoints_from_config(&config).unwrap()[0].mode,
        ApiMode::AnthropicMessages
    );
    config.model.api_mode = Some(ApiMode::ChatCompletions);
    assert_eq!(
        endpoints_from_config(&config).unwrap()[0].mode,
        ApiMode::ChatCompletions
    );
}
