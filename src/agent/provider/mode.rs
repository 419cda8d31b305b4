//! The three wire protocols (API modes; the enum lives with the config that names them), how
//! one is chosen, and the providers we know by name (default base URL, whether a key is
//! needed).

pub use crate::config::ApiMode;

impl ApiMode {
    /// The URL requests go to. Anthropic base URLs are conventionally given without `/v1`
    /// (`https://api.anthropic.com`, `https://api.minimax.io/anthropic`); one ending in `/v1`
    /// is accepted too.
    pub fn request_url(self, base_url: &str) -> String {
        let base = base_url.trim().trim_end_matches('/');
        match self {
            Self::ChatCompletions => format!("{base}/chat/completions"),
            Self::CodexResponses => format!("{base}/responses"),
            Self::AnthropicMessages if base.ends_with("/v1") => format!("{base}/messages"),
            Self::AnthropicMessages => format!("{base}/v1/messages"),
        }
    }
}

/// Chooses the API mode in the seed's order: an explicit mode, then the provider's own
/// protocol, then base-URL conventions, then `chat_completions`.
pub fn resolve_api_mode(explicit: Option<ApiMode>, provider: &str, base_url: &str) -> ApiMode {
    explicit
        .or_else(|| known_provider(provider).and_then(|known| known.mode))
        .or_else(|| mode_for_url(base_url))
        .unwrap_or(ApiMode::ChatCompletions)
}

/// Base-URL conventions, as Hermes' `_detect_api_mode_for_url`: the exact Anthropic host and
/// gateways exposing the Anthropic protocol under `/anthropic` speak Messages; the OpenAI and
/// xAI hosts want the Responses API (GPT-5 tool calls with reasoning fail on chat/completions).
/// Hosts are compared exactly, so `api.anthropic.com.example.test` matches nothing.
fn mode_for_url(base_url: &str) -> Option<ApiMode> {
    let url = reqwest::Url::parse(base_url.trim()).ok()?;
    let host = url.host_str()?.to_ascii_lowercase();
    let path = url.path().trim_end_matches('/').to_ascii_lowercase();
    match host.as_str() {
        "api.anthropic.com" => Some(ApiMode::AnthropicMessages),
        "api.openai.com" | "api.x.ai" => Some(ApiMode::CodexResponses),
        "api.kimi.com" if path.contains("/coding") => Some(ApiMode::AnthropicMessages),
        _ if path.ends_with("/anthropic") || path.ends_with("/anthropic/v1") => {
            Some(ApiMode::AnthropicMessages)
        }
        _ => None,
    }
}

/// A provider known by name.
#[derive(Debug, Clone, Copy)]
pub struct KnownProvider {
    pub name: &'static str,
    pub base_url: Option<&'static str>,
    /// The provider's own protocol; `None` leaves the choice to the base URL.
    pub mode: Option<ApiMode>,
    /// Cloud APIs refuse requests without a key; local servers take none.
    pub needs_key: bool,
}

const fn known(
    name: &'static str,
    base_url: Option<&'static str>,
    mode: Option<ApiMode>,
    needs_key: bool,
) -> KnownProvider {
    KnownProvider {
        name,
        base_url,
        mode,
        needs_key,
    }
}

use ApiMode::{
    AnthropicMessages as Messages, ChatCompletions as Chat, CodexResponses as Responses,
};

const KNOWN: &[KnownProvider] = &[
    known(
        "openrouter",
        Some("https://openrouter.ai/api/v1"),
        Some(Chat),
        true,
    ),
    // No fixed mode: api.openai.com means Responses, an OPENAI_BASE_URL elsewhere means a
    // chat-completions server.
    known("openai", Some("https://api.openai.com/v1"), None, true),
    known(
        "anthropic",
        Some("https://api.anthropic.com"),
        Some(Messages),
        true,
    ),
    known(
        "nous",
        Some("https://inference-api.nousresearch.com/v1"),
        Some(Chat),
        true,
    ),
    known(
        "deepseek",
        Some("https://api.deepseek.com/v1"),
        Some(Chat),
        true,
    ),
    known("xai", Some("https://api.x.ai/v1"), Some(Responses), true),
    known(
        "gemini",
        Some("https://generativelanguage.googleapis.com/v1beta/openai"),
        Some(Chat),
        true,
    ),
    known(
        "ollama",
        Some("http://127.0.0.1:11434/v1"),
        Some(Chat),
        false,
    ),
    known(
        "lmstudio",
        Some("http://127.0.0.1:1234/v1"),
        Some(Chat),
        false,
    ),
    known("vllm", Some("http://127.0.0.1:8000/v1"), Some(Chat), false),
    known(
        "llamacpp",
        Some("http://127.0.0.1:8080/v1"),
        Some(Chat),
        false,
    ),
    known("custom", None, None, false),
];

/// Hermes' spellings of the same providers.
const ALIASES: &[(&str, &str)] = &[
    ("claude", "anthropic"),
    ("grok", "xai"),
    ("x-ai", "xai"),
    ("google", "gemini"),
    ("lm-studio", "lmstudio"),
    ("lm_studio", "lmstudio"),
    ("llama.cpp", "llamacpp"),
    ("llama-cpp", "llamacpp"),
];

/// The canonical lowercase name of a provider (`Claude` → `anthropic`).
pub fn canonical_provider(name: &str) -> String {
    let lower = name.trim().to_ascii_lowercase();
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == lower)
        .map(|(_, canonical)| (*canonical).to_owned())
        .unwrap_or(lower)
}

/// What we know about a provider name, if anything.
pub fn known_provider(name: &str) -> Option<&'static KnownProvider> {
    let name = canonical_provider(name);
    KNOWN.iter().find(|known| known.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_beats_provider_beats_url_beats_default() {
        let anthropic_url = "https://api.anthropic.com";
        assert_eq!(
            resolve_api_mode(Some(Chat), "anthropic", anthropic_url),
            Chat
        );
        assert_eq!(
            resolve_api_mode(None, "openrouter", anthropic_url),
            Chat,
            "a provider with a protocol of its own wins over the URL"
        );
        assert_eq!(resolve_api_mode(None, "custom", anthropic_url), Messages);
        assert_eq!(
            resolve_api_mode(None, "Claude", "http://proxy.test/v1"),
            Messages
        );
        assert_eq!(
            resolve_api_mode(None, "custom", "http://127.0.0.1:8080/v1"),
            Chat
        );
        assert_eq!(resolve_api_mode(None, "mystery", "not a url"), Chat);
    }

    #[test]
    fn url_conventions() {
        assert_eq!(mode_for_url("https://api.openai.com/v1"), Some(Responses));
        assert_eq!(mode_for_url("https://api.x.ai/v1/"), Some(Responses));
        assert_eq!(
            mode_for_url("https://api.minimax.io/anthropic"),
            Some(Messages)
        );
        assert_eq!(mode_for_url("https://gw.test/anthropic/v1"), Some(Messages));
        assert_eq!(
            mode_for_url("https://api.kimi.com/coding/v1"),
            Some(Messages)
        );
        assert_eq!(mode_for_url("https://api.anthropic.com.evil.test/v1"), None);
        assert_eq!(
            mode_for_url("https://proxy.test/api.anthropic.com/v1"),
            None
        );
        assert_eq!(mode_for_url("https://openrouter.ai/api/v1"), None);
    }

    #[test]
    fn request_urls() {
        assert_eq!(
            Chat.request_url("http://127.0.0.1:1/v1/"),
            "http://127.0.0.1:1/v1/chat/completions"
        );
        assert_eq!(
            Responses.request_url("https://api.openai.com/v1"),
            "https://api.openai.com/v1/responses"
        );
        assert_eq!(
            Messages.request_url("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            Messages.request_url("http://127.0.0.1:1/v1"),
            "http://127.0.0.1:1/v1/messages"
        );
    }

    #[test]
    fn names_round_trip() {
        use crate::config::Choice;
        for name in ApiMode::NAMES {
            assert_eq!(ApiMode::from_name(name).map(ApiMode::as_str), Some(*name));
        }
        assert_eq!(ApiMode::from_name("bedrock_converse"), None);
    }
}
