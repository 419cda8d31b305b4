//! A fake text-to-speech server with two APIs, each as documented:
//!
//! OpenAI `POST /v1/audio/speech`
//! (https://platform.openai.com/docs/api-reference/audio/createSpeech):
//! - a bearer key, else 401 `{"error": {..., "code": "invalid_api_key"}}`
//!   (https://platform.openai.com/docs/api-reference/authentication,
//!   https://platform.openai.com/docs/guides/error-codes/api-errors);
//! - JSON with `model`, `input` (at most 4096 characters) and `voice` (one of the documented
//!   voices), else 400 `invalid_request_error`;
//! - `response_format` one of mp3, opus, aac, flac, wav, pcm (default mp3), else 400; `pcm`
//!   is raw 24 kHz 16-bit little-endian mono, `wav` the same in a RIFF file;
//! - 429 with `retry-after` when rate-limited
//!   (https://platform.openai.com/docs/guides/rate-limits), 500 `server_error` when failing.
//!
//! ElevenLabs `POST /v1/text-to-speech/{voice_id}?output_format=...`
//! (https://elevenlabs.io/docs/api-reference/text-to-speech/convert):
//! - the key in `xi-api-key`, else 401 `{"detail": {"status": "invalid_api_key"}}`;
//! - JSON `text` required, else 422 `{"detail": [{"type": "missing", "loc": ["body", "text"]}]}`
//!   (the API's validation error shape);
//! - `output_format` among the documented ones; `pcm_<rate>` is raw 16-bit mono at that rate;
//! - 429 `{"detail": {"status": "too_many_concurrent_requests"}}`
//!   (https://elevenlabs.io/docs/api-reference/errors).
//!
//! Audio is a 220 Hz tone, 60 ms per character of input (about 6 s per 100 characters,
//! a speaker's pace). Faults are switched on per request count ([`FakeTts::fail_next`]).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

const OPENAI_VOICES: &[&str] = &[
    "alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse",
    "marin", "cedar",
];
const OPENAI_FORMATS: &[&str] = &["mp3", "opus", "aac", "flac", "wav", "pcm"];
const ELEVENLABS_FORMATS: &[&str] = &[
    "mp3_22050_32",
    "mp3_44100_32",
    "mp3_44100_64",
    "mp3_44100_96",
    "mp3_44100_128",
    "mp3_44100_192",
    "pcm_8000",
    "pcm_16000",
    "pcm_22050",
    "pcm_24000",
    "pcm_44100",
    "pcm_48000",
    "ulaw_8000",
    "alaw_8000",
    "opus_48000_32",
    "opus_48000_64",
    "opus_48000_96",
    "opus_48000_128",
    "opus_48000_192",
];

/// One request the fake received (refused ones included).
#[derive(Debug, Clone)]
pub struct TtsRequest {
    /// `openai` or `elevenlabs`.
    pub api: &'static str,
    pub path: String,
    pub query: BTreeMap<String, String>,
    /// The key as sent (bearer token or `xi-api-key`).
    pub key: Option<String>,
    pub body: Value,
    pub status: u16,
}

/// A fault for the next requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 429 with `retry-after: 7`.
    RateLimited,
    /// 500 (OpenAI) / 500 (ElevenLabs).
    ServerError,
}

#[derive(Debug, Default)]
struct Shared {
    key: String,
    requests: Vec<TtsRequest>,
    faults: Vec<Fault>,
}

/// A running fake; dropping it stops the server.
#[derive(Debug)]
pub struct FakeTts {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::AbortHandle,
}

impl Drop for FakeTts {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeTts {
    /// Starts on `127.0.0.1:0`, accepting `key` for both APIs.
    pub async fn start(key: &str) -> FakeTts {
        let shared = Arc::new(Mutex::new(Shared {
            key: key.to_owned(),
            ..Shared::default()
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake TTS server");
        let addr = listener.local_addr().expect("fake TTS address");
        let app = Router::new()
            .route("/v1/audio/speech", post(openai))
            .route("/v1/text-to-speech/{voice_id}", post(elevenlabs))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        })
        .abort_handle();
        FakeTts { addr, shared, task }
    }

    /// OpenAI's base (`.../v1`), for `tts.openai.base_url`.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// ElevenLabs's base (without `/v1`), for `tts.elevenlabs.base_url`.
    pub fn elevenlabs_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The next `count` requests fail with `fault`.
    pub fn fail_next(&self, fault: Fault, count: usize) {
        let mut shared = self.shared.lock().unwrap();
        shared.faults.extend(std::iter::repeat_n(fault, count));
    }

    pub fn requests(&self) -> Vec<TtsRequest> {
        self.shared.lock().unwrap().requests.clone()
    }
}

/// A 220 Hz tone at half scale, 60 ms per character, as s16le samples at `rate`.
pub fn tone(chars: usize, rate: u32) -> Vec<u8> {
    let samples = (chars as u64 * u64::from(rate) * 60 / 1000) as usize;
    (0..samples)
        .flat_map(|i| {
            let t = i as f32 / rate as f32;
            let v = (0.5 * (2.0 * std::f32::consts::PI * 220.0 * t).sin() * 32767.0) as i16;
            v.to_le_bytes()
        })
        .collect()
}

fn wav(pcm: &[u8], rate: u32) -> Vec<u8> {
    let mut out = b"RIFF".to_vec();
    out.extend_from_slice(&(36 + pcm.len() as u32).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&(pcm.len() as u32).to_le_bytes());
    out.extend_from_slice(pcm);
    out
}

fn answer(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn audio(bytes: Vec<u8>, media_type: &'static str) -> Response {
    (StatusCode::OK, [("content-type", media_type)], bytes).into_response()
}

fn record(shared: &Mutex<Shared>, mut request: TtsRequest, response: Response) -> Response {
    request.status = response.status().as_u16();
    shared.lock().unwrap().requests.push(request);
    response
}

fn take_fault(shared: &Mutex<Shared>) -> Option<Fault> {
    let mut shared = shared.lock().unwrap();
    (!shared.faults.is_empty()).then(|| shared.faults.remove(0))
}

fn openai_error(status: StatusCode, kind: &str, code: Option<&str>, message: &str) -> Response {
    answer(
        status,
        json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
    )
}

async fn openai(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let key = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let request = TtsRequest {
        api: "openai",
        path: "/v1/audio/speech".to_owned(),
        query: BTreeMap::new(),
        key: key.clone(),
        body: body.clone(),
        status: 0,
    };
    let expected = shared.lock().unwrap().key.clone();
    if key.as_deref() != Some(expected.as_str()) {
        let response = openai_error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            Some("invalid_api_key"),
            "Incorrect API key provided.",
        );
        return record(&shared, request, response);
    }
    let response = match take_fault(&shared) {
        Some(Fault::RateLimited) => {
            let mut response = openai_error(
                StatusCode::TOO_MANY_REQUESTS,
                "requests",
                Some("rate_limit_exceeded"),
                "Rate limit reached for requests.",
            );
            response
                .headers_mut()
                .insert("retry-after", "7".parse().unwrap());
            response
        }
        Some(Fault::ServerError) => openai_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            None,
            "The server had an error while processing your request.",
        ),
        None => openai_speech(&body),
    };
    record(&shared, request, response)
}

fn openai_speech(body: &Value) -> Response {
    let bad = |param: &str, message: &str| {
        answer(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": null}}),
        )
    };
    let Some(input) = body["input"].as_str().filter(|s| !s.is_empty()) else {
        return bad("input", "input is required.");
    };
    if input.chars().count() > 4096 {
        return bad("input", "input is longer than 4096 characters.");
    }
    if body["model"].as_str().is_none_or(str::is_empty) {
        return bad("model", "model is required.");
    }
    if !body["voice"]
        .as_str()
        .is_some_and(|v| OPENAI_VOICES.contains(&v))
    {
        return bad("voice", "voice is not one of the supported voices.");
    }
    let format = body["response_format"].as_str().unwrap_or("mp3");
    if !OPENAI_FORMATS.contains(&format) {
        return bad("response_format", "response_format is not supported.");
    }
    let pcm = tone(input.chars().count(), 24_000);
    match format {
        "pcm" => audio(pcm, "audio/pcm"),
        "wav" => audio(wav(&pcm, 24_000), "audio/wav"),
        // The fake makes no compressed audio: a recognisable MP3 header and no frames
        // (hermesd never asks for these).
        _ => audio(b"ID3\x04\0\0\0\0\0\0".to_vec(), "audio/mpeg"),
    }
}

async fn elevenlabs(
    State(shared): State<Arc<Mutex<Shared>>>,
    Path(voice_id): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let key = headers
        .get("xi-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let request = TtsRequest {
        api: "elevenlabs",
        path: format!("/v1/text-to-speech/{voice_id}"),
        query: query.clone(),
        key: key.clone(),
        body: body.clone(),
        status: 0,
    };
    let expected = shared.lock().unwrap().key.clone();
    if key.as_deref() != Some(expected.as_str()) {
        let response = answer(
            StatusCode::UNAUTHORIZED,
            json!({"detail": {"status": "invalid_api_key", "message": "Invalid API key"}}),
        );
        return record(&shared, request, response);
    }
    let response = match take_fault(&shared) {
        Some(Fault::RateLimited) => answer(
            StatusCode::TOO_MANY_REQUESTS,
            json!({"detail": {"status": "too_many_concurrent_requests",
                "message": "Too many concurrent requests for your plan."}}),
        ),
        Some(Fault::ServerError) => answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"detail": {"status": "internal_error", "message": "Internal error."}}),
        ),
        None => elevenlabs_speech(&body, &query),
    };
    record(&shared, request, response)
}

fn elevenlabs_speech(body: &Value, query: &BTreeMap<String, String>) -> Response {
    let Some(text) = body["text"].as_str().filter(|s| !s.is_empty()) else {
        return answer(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"detail": [{"type": "missing", "loc": ["body", "text"], "msg": "Field required"}]}),
        );
    };
    let format = query
        .get("output_format")
        .map_or("mp3_44100_128", String::as_str);
    if !ELEVENLABS_FORMATS.contains(&format) {
        return answer(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"detail": [{"type": "enum", "loc": ["query", "output_format"], "msg": "Input should be a valid output format"}]}),
        );
    }
    match format
        .strip_prefix("pcm_")
        .and_then(|r| r.parse::<u32>().ok())
    {
        Some(rate) => audio(tone(text.chars().count(), rate), "audio/pcm"),
        None => audio(b"ID3\x04\0\0\0\0\0\0".to_vec(), "audio/mpeg"),
    }
}
