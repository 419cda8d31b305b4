//! ElevenLabs text to speech
//! (https://elevenlabs.io/docs/api-reference/text-to-speech/convert):
//! `POST {base}/v1/text-to-speech/{voice_id}?output_format=pcm_24000`, the key in
//! `xi-api-key`, JSON `{text, model_id}`; a success's body is the audio. `pcm_24000` is raw
//! 16-bit little-endian mono at 24 kHz, available on every plan (44.1 and 48 kHz need paid
//! tiers), and a rate Opus takes without resampling.

use serde_json::json;

use super::{Speaker, TtsError, error_code, http_error, retry_after};

const OUTPUT_FORMAT: &str = "pcm_24000";
const PCM_RATE: u32 = 24_000;

pub(super) async fn speak(
    client: &reqwest::Client,
    speaker: &Speaker,
    text: &str,
) -> Result<(Vec<u8>, u32), TtsError> {
    // The voice id goes into the path: anything but an id is refused before a request.
    if speaker.voice.is_empty()
        || !speaker
            .voice
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
    {
        return Err(TtsError::Refused {
            status: 400,
            detail: Some("tts.elevenlabs.voice_id is not a voice id".to_owned()),
        });
    }
    let url = format!(
        "{}/v1/text-to-speech/{}?output_format={OUTPUT_FORMAT}",
        speaker.base_url.trim_end_matches('/'),
        speaker.voice
    );
    let mut request = client
        .post(url)
        .json(&json!({ "text": text, "model_id": speaker.model }));
    if let Some(key) = &speaker.api_key {
        request = request.header("xi-api-key", key.expose());
    }
    let response = request
        .send()
        .await
        .map_err(|e| TtsError::Network(e.without_url().to_string()))?;
    let status = response.status().as_u16();
    let wait = retry_after(response.headers());
    let bytes = response
        .bytes()
        .await
        .map_err(|e| TtsError::Network(e.without_url().to_string()))?;
    if !(200..300).contains(&status) {
        return Err(http_error(
            status,
            wait,
            error_code(&String::from_utf8_lossy(&bytes)),
        ));
    }
    Ok((bytes.to_vec(), PCM_RATE))
}
