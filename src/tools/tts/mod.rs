//! Text to speech: the configured service (`tts.provider`) turns text into audio, which
//! hermesd encodes itself as an Ogg/Opus voice note. Used by the `text_to_speech` tool and by
//! the gateway's spoken replies (which may not reach into the gateway, hence this floor).
//!
//! Services: OpenAI's `POST /audio/speech` (any OpenAI-compatible local server through
//! `tts.openai.base_url`, which then needs no key) and ElevenLabs's
//! `POST /v1/text-to-speech/{voice_id}`. Both are asked for uncompressed audio (`audio`),
//! which [`opus`] encodes; errors become one sentence that never carries the key.

pub mod audio;
mod elevenlabs;
pub mod markdown;
mod openai;
pub mod opus;
pub mod tool;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use hermes_adapter::net::NetSettings;

use crate::config::{Secret, SpeechConfig};

const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
const ELEVENLABS_BASE_URL: &str = "https://api.elevenlabs.io";
/// A few thousand characters synthesize in seconds; a stuck service must not hold a turn.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A speech service that can be called.
#[derive(Debug, Clone, PartialEq)]
pub struct Speaker {
    pub provider: &'static str,
    pub base_url: String,
    pub api_key: Option<Secret>,
    /// OpenAI's `model` / ElevenLabs's `model_id`.
    pub model: String,
    /// OpenAI's `voice` / ElevenLabs's voice id.
    pub voice: String,
    /// OpenAI only; sent when not 1.0, clamped to 0.25–4.0.
    pub speed: Option<f64>,
    /// `base_url` points at a server of the operator's own (OpenAI-compatible).
    pub custom_server: bool,
    /// Longest text sent; longer text is cut.
    pub max_chars: usize,
}

/// Why no speech service can be used; each names the setting to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    #[error(
        "tts.provider is '{0}', which hermesd cannot call (use openai or elevenlabs; a local \
         speech server: openai with tts.openai.base_url)"
    )]
    Unsupported(String),
    #[error(
        "tts.provider is openai but no key is set (VOICE_TOOLS_OPENAI_KEY or OPENAI_API_KEY), \
         and tts.openai.base_url names no server of your own"
    )]
    NoOpenAiKey,
    #[error("tts.provider is elevenlabs but ELEVENLABS_API_KEY is not set")]
    NoElevenLabsKey,
}

/// Why a synthesis failed; each reads as the end of a sentence.
#[derive(Debug, thiserror::Error)]
pub enum TtsError {
    #[error("{0}")]
    Setup(#[from] SetupError),
    #[error("the speech service refused the key (HTTP {0}); check the provider's API key")]
    Unauthorized(u16),
    #[error("the speech service is rate-limiting requests{}", retry_hint(*.0))]
    RateLimited(Option<u64>),
    #[error("the speech service refused the request (HTTP {status}{})", detail_hint(.detail))]
    Refused { status: u16, detail: Option<String> },
    #[error("the speech service failed (HTTP {0}); try again later")]
    Unavailable(u16),
    #[error("the speech service could not be reached ({0})")]
    Network(String),
    #[error("{0}")]
    Audio(#[from] audio::AudioError),
    #[error("{0}")]
    Encode(#[from] opus::OpusError),
    #[error("cannot write the voice note ({0})")]
    Write(String),
    #[error("there is no text to speak")]
    NoText,
}

fn retry_hint(secs: Option<u64>) -> String {
    secs.map(|s| format!("; retry in {s} s"))
        .unwrap_or_default()
}

fn detail_hint(detail: &Option<String>) -> String {
    detail
        .as_ref()
        .map(|d| format!(": {d}"))
        .unwrap_or_default()
}

/// The longest text ElevenLabs takes per request, by model (its docs' character limits).
fn elevenlabs_cap(model: &str) -> usize {
    match model {
        "eleven_v3" => 5_000,
        "eleven_flash_v2_5" | "eleven_turbo_v2_5" => 40_000,
        "eleven_flash_v2" | "eleven_turbo_v2" => 30_000,
        _ => 10_000,
    }
}

/// The service the config and environment name, or why there is none.
pub fn speaker(
    config: &SpeechConfig,
    env: &BTreeMap<String, String>,
) -> Result<Speaker, SetupError> {
    let tts = &config.tts;
    let var = |name: &str| {
        env.get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .map(|v| Secret::new(v.to_owned()))
    };
    let cap = |own: Option<u64>, default: usize| {
        own.map_or(default, |n| usize::try_from(n).unwrap_or(usize::MAX))
    };
    match tts.provider.as_str() {
        "openai" => {
            let o = &tts.openai;
            let api_key = var("VOICE_TOOLS_OPENAI_KEY").or_else(|| var("OPENAI_API_KEY"));
            let custom_server = o.base_url.is_some();
            if api_key.is_none() && !custom_server {
                return Err(SetupError::NoOpenAiKey);
            }
            let speed = o.speed.unwrap_or(tts.speed);
            Ok(Speaker {
                provider: "openai",
                base_url: o
                    .base_url
                    .clone()
                    .unwrap_or_else(|| OPENAI_BASE_URL.to_owned()),
                api_key,
                model: o.model.clone(),
                voice: o.voice.clone(),
                speed: (speed != 1.0).then(|| speed.clamp(0.25, 4.0)),
                custom_server,
                max_chars: cap(o.max_text_length, 4096),
            })
        }
        "elevenlabs" => {
            let e = &tts.elevenlabs;
            let api_key = var("ELEVENLABS_API_KEY").ok_or(SetupError::NoElevenLabsKey)?;
            Ok(Speaker {
                provider: "elevenlabs",
                base_url: e
                    .base_url
                    .clone()
                    .unwrap_or_else(|| ELEVENLABS_BASE_URL.to_owned()),
                api_key: Some(api_key),
                model: e.model_id.clone(),
                voice: e.voice_id.clone(),
                speed: None,
                custom_server: e.base_url.is_some(),
                max_chars: cap(e.max_text_length, elevenlabs_cap(&e.model_id)),
            })
        }
        other => Err(SetupError::Unsupported(other.to_owned())),
    }
}

/// A voice note written to disk.
#[derive(Debug, Clone, PartialEq)]
pub struct VoiceClip {
    pub duration_secs: f32,
    pub waveform: Vec<u8>,
    pub bytes: usize,
}

impl Speaker {
    /// Asks the service to speak `text` (markdown stripped, cut to the limits) and returns
    /// the audio as samples.
    pub async fn synthesize(&self, net: &NetSettings, text: &str) -> Result<audio::Pcm, TtsError> {
        let spoken = markdown::strip(text);
        let spoken = markdown::cut(&spoken, markdown::MAX_SPOKEN_CHARS);
        let spoken = markdown::cut(spoken, self.max_chars);
        if spoken.trim().is_empty() {
            return Err(TtsError::NoText);
        }
        let client = hermes_adapter::net::Net::new(net)
            .map_err(|e| TtsError::Network(e.to_string()))?
            .http_client()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| TtsError::Network(e.to_string()))?;
        let (body, raw_rate) = match self.provider {
            "elevenlabs" => elevenlabs::speak(&client, self, spoken).await?,
            _ => openai::speak(&client, self, spoken).await?,
        };
        Ok(audio::decode(&body, raw_rate)?)
    }

    /// Synthesizes `text` and writes it to `path` as Ogg/Opus, readable by the owner only
    /// (a voice note is as private as the reply it speaks).
    pub async fn speak_to_file(
        &self,
        net: &NetSettings,
        text: &str,
        path: &Path,
    ) -> Result<VoiceClip, TtsError> {
        let pcm = self.synthesize(net, text).await?;
        let encoded = tokio::task::spawn_blocking(move || opus::encode(pcm))
            .await
            .map_err(|e| TtsError::Write(e.to_string()))??;
        write_private(path, &encoded.ogg)
            .await
            .map_err(|e| TtsError::Write(e.to_string()))?;
        Ok(VoiceClip {
            duration_secs: encoded.duration_secs,
            waveform: encoded.waveform,
            bytes: encoded.ogg.len(),
        })
    }
}

/// Writes `bytes` to `path` through a temporary file renamed into place: the file 0600, new
/// directories 0700 (`home::private`).
pub async fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("ogg.part");
    let bytes = bytes.to_vec();
    let (tmp2, path2) = (tmp.clone(), path.to_path_buf());
    tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        use std::io::Write;
        if let Some(dir) = path2.parent() {
            crate::home::private::create_dir_all(dir)?;
        }
        let mut file = crate::home::private::open_options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp2)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp2, &path2)
    })
    .await
    .map_err(std::io::Error::other)?
}

/// Maps a failed answer to an error, without the body's free text (it may quote the key).
fn http_error(status: u16, retry_after: Option<u64>, code: Option<String>) -> TtsError {
    match status {
        401 | 403 => TtsError::Unauthorized(status),
        429 => TtsError::RateLimited(retry_after),
        500..=599 => TtsError::Unavailable(status),
        _ => TtsError::Refused {
            status,
            detail: code,
        },
    }
}

/// `Retry-After` in seconds (the delta form; a date is ignored).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A short machine-readable code from an error body, if it has one: OpenAI's
/// `error.code`/`error.type`, ElevenLabs's `detail.status`. Only identifier-like values are
/// kept (no free text, which may quote the request).
fn error_code(body: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let candidates = [
        value.pointer("/error/code"),
        value.pointer("/error/type"),
        value.pointer("/detail/status"),
        value.pointer("/detail/0/type"),
    ];
    candidates
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .find(|s| {
            !s.is_empty()
                && s.len() <= 64
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        })
        .map(str::to_owned)
}

#[cfg(test)]
mod tests;
