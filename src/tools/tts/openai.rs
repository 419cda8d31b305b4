//! OpenAI's speech endpoint (https://platform.openai.com/docs/api-reference/audio/createSpeech):
//! `POST {base}/audio/speech` with a bearer key and JSON `{model, input, voice,
//! response_format, speed?}`; the body of a success is the audio itself. `pcm` is raw 24 kHz
//! 16-bit little-endian mono without a header (same page, "response_format"). Local servers
//! more often honour `wav`, so a server of the operator's own is asked for that; either way
//! the answer is recognised by its first bytes.

use serde_json::json;

use super::{Speaker, TtsError, error_code, http_error, retry_after};

/// OpenAI's `pcm` rate (API reference, `response_format`).
const PCM_RATE: u32 = 24_000;

/// Returns the answer's bytes and the rate to assume if they are raw PCM.
pub(super) async fn speak(
    client: &reqwest::Client,
    speaker: &Speaker,
    text: &str,
) -> Result<(Vec<u8>, u32), TtsError> {
    let format = if speaker.custom_server { "wav" } else { "pcm" };
    let mut body = json!({
        "model": speaker.model,
        "input": text,
        "voice": speaker.voice,
        "response_format": format,
    });
    if let Some(speed) = speaker.speed {
        body["speed"] = json!(speed);
    }
    let url = format!("{}/audio/speech", speaker.base_url.trim_end_matches('/'));
    let mut request = client.post(url).json(&body);
    if let Some(key) = &speaker.api_key {
        request = request.bearer_auth(key.expose());
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
