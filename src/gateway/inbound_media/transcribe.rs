//! Speech to text through OpenAI's `POST /audio/transcriptions`
//! (https://platform.openai.com/docs/api-reference/audio/createTranscription): a multipart
//! upload of the file with `model` and `response_format=json`, answered `{"text": ...}`.
//! Groq, Mistral (https://docs.mistral.ai/api/#tag/audio.transcriptions) and local Whisper
//! servers speak the same API, so one client serves them all. ElevenLabs Scribe has its own
//! `POST /speech-to-text` (https://elevenlabs.io/docs/api-reference/speech-to-text/convert):
//! the key in `xi-api-key`, the model as `model_id`, also answered with `text`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::config::{Config, Secret, SttConfig};
use hermes_adapter::net::Net;

/// OpenAI refuses uploads over 25 MB; a larger file is refused before it is sent.
pub const MAX_AUDIO_BYTES: u64 = 25 * 1024 * 1024;

const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
const GROQ_BASE_URL: &str = "https://api.groq.com/openai/v1";
const GROQ_MODEL: &str = "whisper-large-v3-turbo";
const MISTRAL_BASE_URL: &str = "https://api.mistral.ai/v1";
const ELEVENLABS_BASE_URL: &str = "https://api.elevenlabs.io/v1";
/// A minute of speech uploads and transcribes in seconds; a stuck server must not hold the
/// turn for long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// A transcription endpoint that can be called.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcriber {
    pub provider: &'static str,
    pub base_url: String,
    pub api_key: Option<Secret>,
    pub model: String,
    /// ElevenLabs's own API rather than OpenAI's.
    pub elevenlabs: bool,
    /// More form fields (ElevenLabs's options).
    pub fields: Vec<(&'static str, String)>,
}

/// Why a voice message was not transcribed; each reads as the end of a sentence for the user.
#[derive(Debug, thiserror::Error)]
pub enum SttError {
    #[error("the file is {} MB, over the 25 MB transcription limit", .0 / (1024 * 1024))]
    TooLarge(u64),
    #[error("cannot read the file ({0})")]
    Read(#[from] std::io::Error),
    #[error("the transcription service failed ({0})")]
    Service(String),
}

/// Why no transcription service can be used; each names the setting to change. Cloned
/// because one answer serves every voice message of a turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    #[error("transcription is turned off (stt.enabled)")]
    Disabled,
    #[error(
        "stt.provider is openai but no key is set \
         (stt.openai.api_key, VOICE_TOOLS_OPENAI_KEY or OPENAI_API_KEY)"
    )]
    NoOpenAiKey,
    /// A hosted provider whose key comes only from the environment.
    #[error("stt.provider is {provider} but {variable} is not set")]
    NoKey {
        provider: &'static str,
        variable: &'static str,
    },
    #[error(
        "no transcription service is set up (stt.provider is '{provider}'; hermesd can use \
         openai, groq, mistral or elevenlabs — Hermes's local faster-whisper runs only in \
         Python, so run a local Whisper server and set it as openai with \
         stt.openai.base_url)"
    )]
    Unsupported { provider: String },
}

/// The endpoint the config and environment name, or why there is none (a sentence naming
/// the setting to change).
pub fn transcriber(
    config: &Config,
    env: &BTreeMap<String, String>,
) -> Result<Transcriber, SetupError> {
    let stt: &SttConfig = &config.media.stt;
    if !stt.enabled {
        return Err(SetupError::Disabled);
    }
    let var = |name: &str| {
        env.get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    match stt.provider.as_str() {
        "openai" => {
            let api_key = stt
                .openai
                .api_key
                .clone()
                .or_else(|| var("VOICE_TOOLS_OPENAI_KEY").map(Secret::new))
                .or_else(|| var("OPENAI_API_KEY").map(Secret::new));
            let base_url = stt
                .openai
                .base_url
                .clone()
                .or_else(|| var("STT_OPENAI_BASE_URL"))
                .unwrap_or_else(|| OPENAI_BASE_URL.to_owned());
            if api_key.is_none() && base_url == OPENAI_BASE_URL {
                return Err(SetupError::NoOpenAiKey);
            }
            Ok(Transcriber {
                provider: "openai",
                base_url,
                api_key,
                model: stt.openai.model.clone(),
                elevenlabs: false,
                fields: Vec::new(),
            })
        }
        "groq" => {
            let api_key = var("GROQ_API_KEY")
                .map(Secret::new)
                .ok_or(SetupError::NoKey {
                    provider: "groq",
                    variable: "GROQ_API_KEY",
                })?;
            Ok(Transcriber {
                provider: "groq",
                base_url: var("GROQ_BASE_URL").unwrap_or_else(|| GROQ_BASE_URL.to_owned()),
                api_key: Some(api_key),
                model: var("STT_GROQ_MODEL").unwrap_or_else(|| GROQ_MODEL.to_owned()),
                elevenlabs: false,
                fields: Vec::new(),
            })
        }
        "mistral" => {
            let api_key = var("MISTRAL_API_KEY")
                .map(Secret::new)
                .ok_or(SetupError::NoKey {
                    provider: "mistral",
                    variable: "MISTRAL_API_KEY",
                })?;
            Ok(Transcriber {
                provider: "mistral",
                base_url: MISTRAL_BASE_URL.to_owned(),
                api_key: Some(api_key),
                model: var("STT_MISTRAL_MODEL").unwrap_or_else(|| stt.mistral_model.clone()),
                elevenlabs: false,
                fields: Vec::new(),
            })
        }
        "elevenlabs" => {
            let api_key = var("ELEVENLABS_API_KEY")
                .map(Secret::new)
                .ok_or(SetupError::NoKey {
                    provider: "elevenlabs",
                    variable: "ELEVENLABS_API_KEY",
                })?;
            let options = &stt.elevenlabs;
            let flag = |on: bool| if on { "true" } else { "false" }.to_owned();
            let mut fields = vec![
                ("tag_audio_events", flag(options.tag_audio_events)),
                ("diarize", flag(options.diarize)),
            ];
            if let Some(language) = &options.language_code {
                fields.push(("language_code", language.clone()));
            }
            Ok(Transcriber {
                provider: "elevenlabs",
                base_url: options
                    .base_url
                    .clone()
                    .or_else(|| var("ELEVENLABS_STT_BASE_URL"))
                    .unwrap_or_else(|| ELEVENLABS_BASE_URL.to_owned()),
                api_key: Some(api_key),
                model: var("STT_ELEVENLABS_MODEL").unwrap_or_else(|| options.model_id.clone()),
                elevenlabs: true,
                fields,
            })
        }
        other => Err(SetupError::Unsupported {
            provider: other.to_owned(),
        }),
    }
}

/// Checks the size first (nothing is read or sent for a file over [`MAX_AUDIO_BYTES`]),
/// then uploads the file and returns the transcript.
pub async fn transcribe(
    config: &Config,
    transcriber: &Transcriber,
    path: &Path,
    mime_type: &str,
) -> Result<String, SttError> {
    let size = tokio::fs::metadata(path).await?.len();
    if size > MAX_AUDIO_BYTES {
        return Err(SttError::TooLarge(size));
    }
    let bytes = tokio::fs::read(path).await?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "audio".to_owned());
    let mime_type = match mime_type.split_once('/') {
        Some((kind, sub)) if !kind.is_empty() && !sub.is_empty() && mime_type.is_ascii() => {
            mime_type
        }
        _ => "application/octet-stream",
    };
    let file = reqwest::multipart::Part::bytes(bytes)
        .file_name(upload_name(&file_name, mime_type))
        .mime_str(mime_type)
        .map_err(|e| SttError::Service(format!("bad media type: {e}")))?;
    let mut form = reqwest::multipart::Form::new().part("file", file);
    form = if transcriber.elevenlabs {
        form.text("model_id", transcriber.model.clone())
    } else {
        form.text("model", transcriber.model.clone())
            .text("response_format", "json")
    };
    for (name, value) in &transcriber.fields {
        form = form.text(*name, value.clone());
    }
    let client = Net::new(&config.network)
        .map_err(|e| SttError::Service(e.to_string()))?
        .http_client()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|e| SttError::Service(e.to_string()))?;
    let path = if transcriber.elevenlabs {
        "speech-to-text"
    } else {
        "audio/transcriptions"
    };
    let url = format!("{}/{path}", transcriber.base_url.trim_end_matches('/'));
    let mut request = client.post(url).multipart(form);
    if let Some(key) = &transcriber.api_key {
        request = if transcriber.elevenlabs {
            request.header("xi-api-key", key.expose())
        } else {
            request.bearer_auth(key.expose())
        };
    }
    let response = request
        .send()
        .await
        // Without the URL: errors reach the chat and the log, and URLs may carry secrets.
        .map_err(|e| SttError::Service(e.without_url().to_string()))?;
    let status = response.status();
    let body = response
        .text()
        .await
        .map_err(|e| SttError::Service(e.without_url().to_string()))?;
    if !status.is_success() {
        return Err(SttError::Service(format!("HTTP {}", status.as_u16())));
    }
    // `json` answers `{"text": ...}`; a server that ignores response_format may answer
    // plain text.
    let text = match serde_json::from_str::<serde_json::Value>(&body) {
        Ok(value) => value
            .get("text")
            .and_then(|t| t.as_str())
            .map(str::to_owned)
            .ok_or_else(|| SttError::Service("the answer has no text".to_owned()))?,
        Err(_) => body,
    };
    Ok(text.trim().to_owned())
}

/// OpenAI decides the format by the file name's extension and refuses `.oga` (Telegram's
/// voice notes are Ogg Opus named `.oga`), so such a file is sent as `.ogg`.
fn upload_name(file_name: &str, mime_type: &str) -> String {
    let stem = file_name
        .rsplit_once('.')
        .map_or(file_name, |(stem, _)| stem);
    let extension = file_name
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase());
    match extension.as_deref() {
        Some("oga" | "opus") => format!("{stem}.ogg"),
        Some(_) => file_name.to_owned(),
        None if mime_type.contains("ogg") => format!("{file_name}.ogg"),
        None if mime_type.contains("mpeg") => format!("{file_name}.mp3"),
        None => file_name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An environment holding one variable (or none, for `("", "")`).
    fn env(var: (&str, &str)) -> BTreeMap<String, String> {
        BTreeMap::from([(var.0.to_owned(), var.1.to_owned())])
    }

    #[test]
    fn the_provider_decides_endpoint_key_and_model() {
        let mut config = Config::default();
        let reason = transcriber(&config, &env(("OPENAI_API_KEY", "sk-x")))
            .unwrap_err()
            .to_string();
        assert!(reason.contains("stt.provider is 'local'"), "{reason}");

        config.media.stt.provider = "openai".into();
        let t = transcriber(&config, &env(("OPENAI_API_KEY", "sk-x"))).unwrap();
        assert_eq!(t.base_url, OPENAI_BASE_URL);
        assert_eq!(t.api_key.unwrap().expose(), "sk-x");
        assert_eq!(t.model, "whisper-1");
        assert!(transcriber(&config, &env(("", ""))).is_err());
        config.media.stt.openai.base_url = Some("http://127.0.0.1:9/v1".into());
        assert!(
            transcriber(&config, &env(("", "")))
                .unwrap()
                .api_key
                .is_none()
        );

        config.media.stt.provider = "groq".into();
        assert!(transcriber(&config, &env(("", ""))).is_err());
        let t = transcriber(&config, &env(("GROQ_API_KEY", "gsk"))).unwrap();
        assert_eq!(
            (t.base_url.as_str(), t.model.as_str()),
            (GROQ_BASE_URL, GROQ_MODEL)
        );

        config.media.stt.provider = "mistral".into();
        assert!(transcriber(&config, &env(("", ""))).is_err());
        let t = transcriber(&config, &env(("MISTRAL_API_KEY", "mk"))).unwrap();
        assert_eq!(
            (t.base_url.as_str(), t.model.as_str(), t.elevenlabs),
            (MISTRAL_BASE_URL, "voxtral-mini-latest", false)
        );

        config.media.stt.provider = "elevenlabs".into();
        assert!(transcriber(&config, &env(("", ""))).is_err());
        config.media.stt.elevenlabs.language_code = Some("eng".into());
        let t = transcriber(&config, &env(("ELEVENLABS_API_KEY", "xi"))).unwrap();
        assert_eq!(
            (t.base_url.as_str(), t.model.as_str(), t.elevenlabs),
            (ELEVENLABS_BASE_URL, "scribe_v2", true)
        );
        assert!(t.fields.contains(&("language_code", "eng".to_owned())));

        config.media.stt.enabled = false;
        assert!(transcriber(&config, &env(("GROQ_API_KEY", "gsk"))).is_err());
    }

    #[test]
    fn telegram_voice_names_are_sent_as_ogg() {
        assert_eq!(upload_name("file_3.oga", "audio/ogg"), "file_3.ogg");
        assert_eq!(upload_name("voice.ogg", "audio/ogg"), "voice.ogg");
        assert_eq!(upload_name("note.mp3", "audio/mpeg"), "note.mp3");
        assert_eq!(upload_name("blob", "audio/ogg"), "blob.ogg");
    }
}
