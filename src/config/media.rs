//! Settings for photos and voice messages sent from chats: how images reach the model
//! (`agent.image_input_mode`, `model.supports_vision`, the `auxiliary.vision` fallback model)
//! and how voice is transcribed (`stt`, with Hermes's top-level and `gateway:` spellings of
//! `stt_enabled` / `stt_echo_transcripts`).

use serde::Serialize;
use serde_json::Value;

use super::choice::ImageInputMode;
use super::parse::{Issues, at};
use super::raw::{RawConfig, RawGateway, RawModelEntry, Section};
use super::secret::Secret;

/// The speech-to-text providers hermesd can call: OpenAI, Groq and Mistral speak OpenAI's
/// `/audio/transcriptions` (a local server is `openai` with `stt.openai.base_url`),
/// ElevenLabs its own `/speech-to-text`. Hermes's in-process `local` (faster-whisper) is not
/// among them.
pub const STT_PROVIDERS: &[&str] = &["openai", "groq", "mistral", "elevenlabs"];

/// Photos and voice from chats.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MediaConfig {
    /// `agent.image_input_mode`.
    pub image_input_mode: ImageInputMode,
    /// `model.supports_vision`: overrides hermesd's list of models known to take images.
    pub supports_vision: Option<bool>,
    /// `auxiliary.vision`: describes photos for a main model that cannot see them.
    pub vision: AuxVisionConfig,
    pub stt: SttConfig,
}

/// `auxiliary.vision`. Configured when any of provider (other than `auto`), model or
/// base_url is set, as in Hermes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuxVisionConfig {
    pub provider: String,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<Secret>,
    pub timeout_secs: u64,
}

impl AuxVisionConfig {
    pub fn is_configured(&self) -> bool {
        !matches!(self.provider.as_str(), "" | "auto")
            || self.model.is_some()
            || self.base_url.is_some()
    }
}

/// `stt`: transcription of voice messages and audio files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SttConfig {
    pub enabled: bool,
    /// Send the transcript back to the chat before the agent answers.
    pub echo_transcripts: bool,
    pub provider: String,
    pub openai: SttOpenAiConfig,
    /// `stt.mistral.model`: Mistral's Voxtral model.
    pub mistral_model: String,
    pub elevenlabs: SttElevenLabsConfig,
}

/// `stt.elevenlabs`: ElevenLabs Scribe.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SttElevenLabsConfig {
    pub model_id: String,
    /// Forces the language (ISO 639, e.g. `eng`); `None` lets Scribe detect it.
    pub language_code: Option<String>,
    pub tag_audio_events: bool,
    pub diarize: bool,
    pub base_url: Option<String>,
}

/// `stt.openai`: OpenAI's Whisper API or any server speaking it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SttOpenAiConfig {
    pub model: String,
    pub base_url: Option<String>,
    pub api_key: Option<Secret>,
}

impl Default for MediaConfig {
    fn default() -> Self {
        Self {
            image_input_mode: ImageInputMode::Auto,
            supports_vision: None,
            vision: AuxVisionConfig {
                provider: "auto".to_owned(),
                model: None,
                base_url: None,
                api_key: None,
                timeout_secs: 120,
            },
            stt: SttConfig {
                enabled: true,
                echo_transcripts: true,
                provider: "local".to_owned(),
                openai: SttOpenAiConfig {
                    model: "whisper-1".to_owned(),
                    base_url: None,
                    api_key: None,
                },
                mistral_model: "voxtral-mini-latest".to_owned(),
                elevenlabs: SttElevenLabsConfig {
                    model_id: "scribe_v2".to_owned(),
                    language_code: None,
                    tag_audio_events: false,
                    diarize: false,
                    base_url: None,
                },
            },
        }
    }
}

/// Reads the media settings from wherever Hermes looks for them.
pub fn media(issues: &mut Issues, raw: &RawConfig, gateway: &RawGateway) -> MediaConfig {
    let defaults = MediaConfig::default();
    let agent = match &raw.agent {
        Some(Section::Map(agent)) => agent.image_input_mode.as_ref(),
        _ => None,
    };
    let supports_vision = match &raw.model {
        Some(RawModelEntry::Block(block)) => block.supports_vision.as_ref(),
        _ => None,
    };
    let vision = raw.auxiliary.as_ref().and_then(|a| a.get("vision"));
    let field = |name: &str| vision.and_then(|v| v.get(name));
    let vision = AuxVisionConfig {
        provider: issues
            .string(at("auxiliary.vision.provider", field("provider")))
            .unwrap_or(defaults.vision.provider),
        model: issues.string(at("auxiliary.vision.model", field("model"))),
        base_url: issues.url(at("auxiliary.vision.base_url", field("base_url"))),
        api_key: issues.secret(at("auxiliary.vision.api_key", field("api_key"))),
        timeout_secs: issues.uint(
            at("auxiliary.vision.timeout", field("timeout")),
            defaults.vision.timeout_secs,
            1,
            3600,
        ),
    };
    MediaConfig {
        image_input_mode: issues.choice(
            at("agent.image_input_mode", agent),
            defaults.image_input_mode,
        ),
        supports_vision: issues.opt_bool(at("model.supports_vision", supports_vision)),
        vision,
        stt: stt(issues, raw, gateway, defaults.stt),
    }
}

/// Hermes reads `stt` at the top level, else under `gateway:`; `stt_enabled` and
/// `stt_echo_transcripts` (top level, else `gateway.stt_echo_transcripts`) win over the
/// section's own `enabled` / `echo_transcripts`.
fn stt(
    issues: &mut Issues,
    raw: &RawConfig,
    gateway: &RawGateway,
    defaults: SttConfig,
) -> SttConfig {
    let (label, section) = match &raw.stt {
        Some(section) => ("stt", Some(section)),
        None => ("gateway.stt", gateway.stt.as_ref()),
    };
    let section = match section {
        Some(Value::Object(map)) => Some(map),
        Some(Value::Null) | None => None,
        Some(other) => {
            issues.error(
                label,
                format!("expected a mapping, got {}", super::parse::kind(other)),
            );
            None
        }
    };
    let get = |name: &str| section.and_then(|map| map.get(name));
    let openai = get("openai");
    let openai_field = |name: &str| openai.and_then(|o| o.get(name));
    let nested = |section: &str, name: &str| get(section).and_then(|o| o.get(name));
    let enabled = match raw.stt_enabled.as_ref() {
        Some(value) => issues.bool(at("stt_enabled", Some(value)), defaults.enabled),
        None => issues.bool(
            at(format!("{label}.enabled"), get("enabled")),
            defaults.enabled,
        ),
    };
    let echo_transcripts = match (&raw.stt_echo_transcripts, &gateway.stt_echo_transcripts) {
        (Some(value), _) => issues.bool(at("stt_echo_transcripts", Some(value)), true),
        (None, Some(value)) => issues.bool(at("gateway.stt_echo_transcripts", Some(value)), true),
        (None, None) => issues.bool(
            at(format!("{label}.echo_transcripts"), get("echo_transcripts")),
            defaults.echo_transcripts,
        ),
    };
    let provider_key = format!("{label}.provider");
    let provider = issues
        .string(at(&provider_key, get("provider")))
        .map(|p| p.to_ascii_lowercase())
        .unwrap_or(defaults.provider);
    // `local` is Hermes's default and sits in most Hermes files: the chat says what to do
    // when a voice message comes. Any other provider hermesd cannot call is worth a warning.
    if provider != "local" && !STT_PROVIDERS.contains(&provider.as_str()) {
        issues.warn(format!(
            "{provider_key}: '{provider}' is not available in hermesd, so voice messages \
             are not transcribed; use {} (a local Whisper server: openai with \
             {label}.openai.base_url)",
            STT_PROVIDERS.join(" or ")
        ));
    }
    SttConfig {
        enabled,
        echo_transcripts,
        provider,
        openai: SttOpenAiConfig {
            model: issues
                .string(at(format!("{label}.openai.model"), openai_field("model")))
                .unwrap_or(defaults.openai.model),
            base_url: issues.url(at(
                format!("{label}.openai.base_url"),
                openai_field("base_url"),
            )),
            api_key: issues.secret(at(
                format!("{label}.openai.api_key"),
                openai_field("api_key"),
            )),
        },
        mistral_model: issues
            .string(at(
                format!("{label}.mistral.model"),
                nested("mistral", "model"),
            ))
            .unwrap_or(defaults.mistral_model),
        elevenlabs: SttElevenLabsConfig {
            model_id: issues
                .string(at(
                    format!("{label}.elevenlabs.model_id"),
                    nested("elevenlabs", "model_id"),
                ))
                .unwrap_or(defaults.elevenlabs.model_id),
            language_code: issues.string(at(
                format!("{label}.elevenlabs.language_code"),
                nested("elevenlabs", "language_code"),
            )),
            tag_audio_events: issues.bool(
                at(
                    format!("{label}.elevenlabs.tag_audio_events"),
                    nested("elevenlabs", "tag_audio_events"),
                ),
                false,
            ),
            diarize: issues.bool(
                at(
                    format!("{label}.elevenlabs.diarize"),
                    nested("elevenlabs", "diarize"),
                ),
                false,
            ),
            base_url: issues.url(at(
                format!("{label}.elevenlabs.base_url"),
                nested("elevenlabs", "base_url"),
            )),
        },
    }
}
