//! Spoken replies: `tts:` (which text-to-speech service, voice and model) and `voice:` (whether
//! a voice note is answered with a voice note by default). hermesd calls two services itself,
//! OpenAI's speech endpoint (or any local server speaking it, through `tts.openai.base_url`)
//! and ElevenLabs; every other Hermes provider name is accepted and reported. The Opus
//! encoding is always done in-process (`tools::tts::opus`).

use serde::Serialize;
use serde_json::{Map, Value};

use super::parse::{Issues, at, kind};

/// The providers hermesd can call.
pub const TTS_PROVIDERS: &[&str] = &["openai", "elevenlabs"];

/// Hermes's other providers: accepted, reported as not supported. `edge` is Hermes's default.
pub const TTS_OTHER_PROVIDERS: &[&str] = &[
    "deepinfra",
    "edge",
    "gemini",
    "kittentts",
    "minimax",
    "mistral",
    "neutts",
    "piper",
    "xai",
];

/// `tts.*` keys Hermes reads that hermesd accepts without acting on: the other providers'
/// blocks, command providers, and the Nous managed gateway.
pub const IGNORED_TTS: &[&str] = &[
    "deepinfra",
    "edge",
    "gemini",
    "kittentts",
    "minimax",
    "mistral",
    "neutts",
    "piper",
    "providers",
    "use_gateway",
    "xai",
];

/// `voice.*` keys that only matter to Hermes's terminal client (push-to-talk recording).
pub const IGNORED_VOICE: &[&str] = &[
    "beep_enabled",
    "max_recording_seconds",
    "record_key",
    "silence_duration",
    "silence_threshold",
];

/// `tts:` and `voice:`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpeechConfig {
    pub tts: TtsConfig,
    /// `voice.auto_tts`: answer a voice note with a voice note in chats without a `/voice`
    /// setting.
    pub auto_tts: bool,
}

/// `tts:`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TtsConfig {
    /// Lower-cased and trimmed, as Hermes reads it.
    pub provider: String,
    /// `tts.speed`: the fallback for each provider's own `speed`.
    pub speed: f64,
    pub openai: TtsOpenAiConfig,
    pub elevenlabs: TtsElevenLabsConfig,
}

/// `tts.openai`: OpenAI's `/audio/speech` or a local server speaking it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TtsOpenAiConfig {
    pub model: String,
    pub voice: String,
    /// `tts.openai.speed`; `None` falls back to `tts.speed`.
    pub speed: Option<f64>,
    /// A local server; hermesd then needs no key (Hermes insists on one).
    pub base_url: Option<String>,
    pub max_text_length: Option<u64>,
}

/// `tts.elevenlabs`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TtsElevenLabsConfig {
    pub voice_id: String,
    pub model_id: String,
    /// hermesd's own (Hermes hard-codes the address), like `stt.elevenlabs.base_url`.
    pub base_url: Option<String>,
    pub max_text_length: Option<u64>,
}

impl Default for SpeechConfig {
    fn default() -> Self {
        Self {
            tts: TtsConfig {
                provider: "edge".to_owned(),
                speed: 1.0,
                openai: TtsOpenAiConfig {
                    model: "gpt-4o-mini-tts".to_owned(),
                    voice: "alloy".to_owned(),
                    speed: None,
                    base_url: None,
                    max_text_length: None,
                },
                elevenlabs: TtsElevenLabsConfig {
                    voice_id: "pNInz6obpgDQGcFmaJgB".to_owned(),
                    model_id: "eleven_multilingual_v2".to_owned(),
                    base_url: None,
                    max_text_length: None,
                },
            },
            auto_tts: false,
        }
    }
}

impl TtsConfig {
    /// Whether hermesd can call this provider at all (keys are checked where they are used).
    pub fn provider_supported(&self) -> bool {
        TTS_PROVIDERS.contains(&self.provider.as_str())
    }
}

fn mapping<'a>(
    issues: &mut Issues,
    key: &str,
    value: Option<&'a Value>,
) -> Option<&'a Map<String, Value>> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(other) => {
            issues.error(key, format!("expected a mapping, got {}", kind(other)));
            None
        }
    }
}

/// A positive whole number; Hermes ignores booleans and non-positive values, so do we (with
/// a warning, since the key then has no effect).
fn max_text_length(issues: &mut Issues, key: &str, value: Option<&Value>) -> Option<u64> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n > 0) => n.as_u64(),
        Some(other) => {
            issues.warn(format!(
                "{key}: expected a positive whole number, got {}; the provider's own limit applies",
                super::parse::shown(other)
            ));
            None
        }
    }
}

fn speed(issues: &mut Issues, key: &str, value: Option<&Value>) -> Option<f64> {
    let value = value.filter(|v| !v.is_null())?;
    match value.as_f64() {
        Some(n) if n > 0.0 && n.is_finite() => Some(n),
        _ => {
            issues.error(
                key,
                format!(
                    "expected a positive number, got {}",
                    super::parse::shown(value)
                ),
            );
            None
        }
    }
}

/// Warns about keys of `section` that are neither read nor in `ignored`; returns the
/// ignored ones that are set, for the one "not supported yet" warning.
fn check_keys(
    issues: &mut Issues,
    label: &str,
    section: &Map<String, Value>,
    known: &[&str],
    ignored: &[&str],
) {
    for (key, value) in section {
        if ignored.contains(&key.as_str()) {
            if super::unsupported::is_set(value) {
                issues.ignored.push(format!("{label}.{key}"));
            }
        } else if !known.contains(&key.as_str()) {
            issues.warn(format!("unknown key '{label}.{key}'"));
        }
    }
}

/// Reads `tts:` and `voice:` from the top level of the config tree.
pub fn speech(issues: &mut Issues, tts: Option<&Value>, voice: Option<&Value>) -> SpeechConfig {
    let defaults = SpeechConfig::default();
    let mut tts_out = defaults.tts.clone();
    if let Some(section) = mapping(issues, "tts", tts) {
        // Blocks of providers hermesd does not call are accepted and reported when set.
        let known = ["provider", "speed", "openai", "elevenlabs"];
        check_keys(issues, "tts", section, &known, IGNORED_TTS);
        // Empty means Hermes's default, like no key at all.
        let provider = issues.string(at("tts.provider", section.get("provider")));
        let provider_set = provider.is_some();
        if let Some(provider) = provider {
            tts_out.provider = provider.to_ascii_lowercase();
        }
        if let Some(speed) = speed(issues, "tts.speed", section.get("speed")) {
            tts_out.speed = speed;
        }
        if let Some(openai) = mapping(issues, "tts.openai", section.get("openai")) {
            check_keys(
                issues,
                "tts.openai",
                openai,
                &["model", "voice", "speed", "base_url", "max_text_length"],
                &[],
            );
            let o = &mut tts_out.openai;
            if let Some(model) = issues.string(at("tts.openai.model", openai.get("model"))) {
                o.model = model;
            }
            if let Some(voice) = issues.string(at("tts.openai.voice", openai.get("voice"))) {
                o.voice = voice;
            }
            o.speed = speed(issues, "tts.openai.speed", openai.get("speed"));
            o.base_url = issues.url(at("tts.openai.base_url", openai.get("base_url")));
            o.max_text_length = max_text_length(
                issues,
                "tts.openai.max_text_length",
                openai.get("max_text_length"),
            );
        }
        if let Some(eleven) = mapping(issues, "tts.elevenlabs", section.get("elevenlabs")) {
            check_keys(
                issues,
                "tts.elevenlabs",
                eleven,
                &["voice_id", "model_id", "base_url", "max_text_length"],
                &[],
            );
            let e = &mut tts_out.elevenlabs;
            if let Some(voice) =
                issues.string(at("tts.elevenlabs.voice_id", eleven.get("voice_id")))
            {
                e.voice_id = voice;
            }
            if let Some(model) =
                issues.string(at("tts.elevenlabs.model_id", eleven.get("model_id")))
            {
                e.model_id = model;
            }
            e.base_url = issues.url(at("tts.elevenlabs.base_url", eleven.get("base_url")));
            e.max_text_length = max_text_length(
                issues,
                "tts.elevenlabs.max_text_length",
                eleven.get("max_text_length"),
            );
        }
        if provider_set && !tts_out.provider_supported() {
            report_unsupported(issues, &tts_out.provider);
        }
    }
    let mut auto_tts = defaults.auto_tts;
    if let Some(section) = mapping(issues, "voice", voice) {
        check_keys(issues, "voice", section, &["auto_tts"], IGNORED_VOICE);
        auto_tts = issues.bool(at("voice.auto_tts", section.get("auto_tts")), auto_tts);
    }
    SpeechConfig {
        tts: tts_out,
        auto_tts,
    }
}

fn report_unsupported(issues: &mut Issues, provider: &str) {
    let hermes = if TTS_OTHER_PROVIDERS.contains(&provider) {
        "a Hermes provider"
    } else {
        "not a provider hermesd knows"
    };
    issues.warn(format!(
        "tts.provider: '{provider}' is {hermes} and {}, so replies are never spoken; use {} \
         (a local speech server: openai with tts.openai.base_url)",
        super::unsupported::NOT_SUPPORTED_YET,
        TTS_PROVIDERS.join(" or ")
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_other_provider_block_is_accepted_and_reported() {
        for provider in TTS_OTHER_PROVIDERS {
            assert!(IGNORED_TTS.contains(provider), "{provider}");
        }
    }

    fn read(tts: Value, voice: Value) -> (SpeechConfig, Issues) {
        let mut issues = Issues::default();
        let config = speech(&mut issues, Some(&tts), Some(&voice));
        (config, issues)
    }

    #[test]
    fn nothing_set_is_the_hermes_defaults_and_no_warning() {
        let mut issues = Issues::default();
        let config = speech(&mut issues, None, None);
        assert_eq!(config, SpeechConfig::default());
        assert!(issues.warnings.is_empty() && issues.errors.is_empty());
        assert_eq!(config.tts.provider, "edge");
        assert!(!config.tts.provider_supported());
    }

    #[test]
    fn provider_keys_are_read_and_lower_cased() {
        let (config, issues) = read(
            json!({"provider": " OpenAI ", "speed": 1.5,
                   "openai": {"model": "tts-1", "voice": "nova", "speed": 2.0,
                              "base_url": "http://127.0.0.1:8880/v1", "max_text_length": 100},
                   "elevenlabs": {"voice_id": "v1", "model_id": "eleven_flash_v2_5"}}),
            json!({"auto_tts": true}),
        );
        assert!(issues.errors.is_empty(), "{:?}", issues.errors);
        assert!(issues.warnings.is_empty(), "{:?}", issues.warnings);
        assert_eq!(config.tts.provider, "openai");
        assert_eq!(config.tts.speed, 1.5);
        assert_eq!(config.tts.openai.model, "tts-1");
        assert_eq!(config.tts.openai.speed, Some(2.0));
        assert_eq!(config.tts.openai.max_text_length, Some(100));
        assert_eq!(
            config.tts.openai.base_url.as_deref(),
            Some("http://127.0.0.1:8880/v1")
        );
        assert_eq!(config.tts.elevenlabs.model_id, "eleven_flash_v2_5");
        assert!(config.auto_tts);
    }

    #[test]
    fn unsupported_providers_and_cli_keys_are_reported() {
        let (_, issues) = read(
            json!({"provider": "edge", "edge": {"voice": "en-US-AriaNeural"}, "use_gateway": true}),
            json!({"record_key": "ctrl+b", "auto_tts": false}),
        );
        assert!(issues.errors.is_empty());
        assert_eq!(issues.warnings.len(), 1, "{:?}", issues.warnings);
        assert!(issues.warnings[0].contains("tts.provider: 'edge'"));
        assert!(issues.warnings[0].contains("not supported by hermesd yet"));
        assert_eq!(
            issues.ignored,
            ["tts.edge", "tts.use_gateway", "voice.record_key"]
        );

        let (_, issues) = read(json!({"provider": "say-it", "bogus": 1}), json!(null));
        assert!(
            issues
                .warnings
                .iter()
                .any(|w| w.contains("'say-it' is not a provider"))
        );
        assert!(
            issues
                .warnings
                .iter()
                .any(|w| w.contains("unknown key 'tts.bogus'"))
        );
    }

    #[test]
    fn bad_values_are_errors_or_warnings_naming_the_key() {
        let (config, issues) = read(
            json!({"speed": "fast", "openai": {"max_text_length": true}, "elevenlabs": 3}),
            json!({"auto_tts": "maybe"}),
        );
        let keys: Vec<&str> = issues.errors.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["tts.speed", "tts.elevenlabs", "voice.auto_tts"]);
        assert!(issues.warnings[0].contains("tts.openai.max_text_length"));
        assert_eq!(config.tts.openai.max_text_length, None);
    }
}
