//! Whether the model can see images, and the `auxiliary.vision` model that describes a photo
//! in words for one that cannot.
//!
//! Hermes asks models.dev (a catalogue fetched over the network) whether a model takes
//! images; hermesd keeps no such catalogue, so it recognises the families known to take
//! images by name, and `model.supports_vision` settles any other model.

use std::time::Duration;

use crate::agent::message::{ChatMessage, ImagePart};
use crate::agent::provider::{
    EntryError, HttpSettings, ModelClient, ModelRequest, ProviderError, auxiliary_endpoint,
};
use crate::config::{Config, ImageInputMode};
use hermes_adapter::net::{Net, NetError};

/// How a turn's photos reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// As image parts of the user message.
    Native,
    /// Described by the `auxiliary.vision` model; the description goes in the text.
    Described,
    /// Neither: the user is told the model cannot see images.
    Unseen,
}

/// The route for `model` under the config (Hermes's `decide_image_input_mode`, with the
/// fallback model's absence made visible instead of a silent text description).
pub fn route(config: &Config, model: &str) -> Route {
    let media = &config.media;
    let aux = media.vision.is_configured();
    let native = takes_images(media.image_input_mode, media.supports_vision, model);
    match (native, aux) {
        (true, _) => Route::Native,
        (false, true) => Route::Described,
        (false, false) => Route::Unseen,
    }
}

/// Whether images go to `model` as image parts under `agent.image_input_mode` and
/// `model.supports_vision`.
pub fn takes_images(mode: ImageInputMode, supports_vision: Option<bool>, model: &str) -> bool {
    match mode {
        ImageInputMode::Native => true,
        ImageInputMode::Text => false,
        ImageInputMode::Auto => supports_vision.unwrap_or_else(|| known_vision_model(model)),
    }
}

/// Model families that take images, matched on the name after any `vendor/` prefix.
pub fn known_vision_model(model: &str) -> bool {
    let name = model.to_ascii_lowercase();
    let name = name.rsplit('/').next().unwrap_or_default();
    const PREFIXES: &[&str] = &[
        "gpt-4o",
        "chatgpt-4o",
        "gpt-4.1",
        "gpt-4-turbo",
        "gpt-5",
        "o1",
        "o3",
        "o4",
        "claude-3",
        "claude-sonnet-4",
        "claude-opus-4",
        "claude-haiku-4",
        "claude-4",
        "gemini",
        "gemma-3",
        "grok-4",
        "llava",
        "pixtral",
        "llama-4",
        "mistral-small-3",
        "mistral-medium-3",
    ];
    // Text-only variants of otherwise visual families.
    const TEXT_ONLY: &[&str] = &["o1-mini", "o3-mini", "gpt-4o-audio", "gpt-4o-mini-audio"];
    if TEXT_ONLY.iter().any(|p| name.starts_with(p)) {
        return false;
    }
    PREFIXES.iter().any(|p| name.starts_with(p)) || name.contains("vision") || name.contains("-vl")
}

/// What the describing model is asked.
const DESCRIBE_PROMPT: &str = "Describe this image for someone who cannot see it. Cover \
everything in it: any text (verbatim), people, objects, charts or code, their layout and \
colours. Answer with the description only.";

/// Why a photo got no description; the text ends a sentence the user reads.
#[derive(Debug, thiserror::Error)]
pub enum DescribeError {
    #[error("auxiliary.vision.model is not set")]
    NoModel,
    #[error("auxiliary.vision cannot be used: {0}")]
    Unusable(#[source] EntryError),
    #[error(transparent)]
    Network(#[from] NetError),
    #[error(transparent)]
    Model(#[from] ProviderError),
    #[error("the vision model gave an empty description")]
    EmptyReply,
}

/// Asks the `auxiliary.vision` model to describe `image`.
pub async fn describe(config: &Config, image: &ImagePart) -> Result<String, DescribeError> {
    let vision = &config.media.vision;
    let provider = match vision.provider.as_str() {
        "" | "auto" => "custom",
        named => named,
    };
    let model = vision.model.as_deref().ok_or(DescribeError::NoModel)?;
    // A bare base URL falls back to the OpenAI key, as Hermes does.
    let api_key = vision.api_key.clone().or_else(|| {
        vision
            .base_url
            .as_ref()
            .and_then(|_| config.providers.get("openai")?.api_key.clone())
    });
    let endpoint = auxiliary_endpoint(config, provider, model, vision.base_url.as_deref(), api_key)
        .map_err(DescribeError::Unusable)?;
    let net = Net::new(&config.network)?;
    let http = HttpSettings {
        request_timeout: Duration::from_secs(vision.timeout_secs),
        ..HttpSettings::default()
    };
    let client = ModelClient::with_net(&net, endpoint, Vec::new(), http)?;
    let mut message = ChatMessage::user(DESCRIBE_PROMPT);
    message.images = vec![image.clone()];
    let request = ModelRequest {
        messages: vec![message],
        ..ModelRequest::default()
    };
    let reply = client.complete(&request, &mut |_| {}).await?;
    reply
        .content
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
        .ok_or(DescribeError::EmptyReply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_families_are_recognised() {
        for model in [
            "gpt-4o-mini",
            "openai/gpt-4.1",
            "anthropic/claude-sonnet-4",
            "claude-3-5-haiku-latest",
            "google/gemini-2.5-flash",
            "qwen2.5-vl-72b-instruct",
            "llama-3.2-11b-vision-instruct",
        ] {
            assert!(known_vision_model(model), "{model}");
        }
        for model in [
            "o3-mini",
            "gpt-3.5-turbo",
            "deepseek-chat",
            "fake-model",
            "",
        ] {
            assert!(!known_vision_model(model), "{model}");
        }
    }

    #[test]
    fn the_route_follows_mode_override_and_fallback() {
        let mut config = Config::default();
        assert_eq!(route(&config, "gpt-4o"), Route::Native);
        assert_eq!(route(&config, "deepseek-chat"), Route::Unseen);
        config.media.supports_vision = Some(true);
        assert_eq!(route(&config, "deepseek-chat"), Route::Native);
        config.media.supports_vision = Some(false);
        assert_eq!(route(&config, "gpt-4o"), Route::Unseen);
        config.media.vision.model = Some("gpt-4o-mini".into());
        assert_eq!(route(&config, "gpt-4o"), Route::Described);
        config.media.image_input_mode = ImageInputMode::Native;
        assert_eq!(route(&config, "deepseek-chat"), Route::Native);
        config.media.image_input_mode = ImageInputMode::Text;
        config.media.supports_vision = Some(true);
        assert_eq!(route(&config, "gpt-4o"), Route::Described);
    }
}
