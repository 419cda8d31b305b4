//! A fake speech-to-text server answering like OpenAI's `POST /v1/audio/transcriptions`
//! (https://platform.openai.com/docs/api-reference/audio/createTranscription), which Groq
//! and local Whisper servers copy. It records every upload for assertions.
//!
//! What it enforces, each from that documentation:
//! - a bearer key (`Authorization: Bearer ...`), else 401 (https://platform.openai.com/docs/api-reference/authentication);
//! - multipart fields `file` and `model`, both required, else 400;
//! - the file's format by its name: flac, mp3, mp4, mpeg, mpga, m4a, ogg, wav or webm, else 400;
//! - uploads of at most 25 MB ("File uploads are currently limited to 25 MB",
//!   https://platform.openai.com/docs/guides/speech-to-text), else 413;
//! - `response_format` `json` (the default) answers `{"text": ...}`, `text` the bare text.
//!
//! It also answers ElevenLabs Scribe's `POST /v1/speech-to-text`
//! (https://elevenlabs.io/docs/api-reference/speech-to-text/convert): the key in the
//! `xi-api-key` header (else 401), multipart `model_id` (required, else 422 as the API's
//! validation errors are) and `file`, and optional form fields such as `language_code`,
//! `tag_audio_events` and `diarize`; the answer carries the transcript in `text`.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Multipart, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;

const LIMIT: usize = 25 * 1024 * 1024;
const FORMATS: &[&str] = &[
    "flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "wav", "webm",
];

/// One accepted upload.
#[derive(Debug, Clone)]
pub struct Upload {
    pub model: String,
    pub file_name: String,
    pub bytes: Vec<u8>,
    pub response_format: Option<String>,
    pub authorization: String,
    /// The other form fields, by name (ElevenLabs's options).
    pub fields: Vec<(String, String)>,
}

#[derive(Debug, Default)]
struct Shared {
    transcript: String,
    uploads: Vec<Upload>,
    /// Requests of any kind, refused ones included.
    requests: usize,
}

/// A running fake; dropping it stops the server.
#[derive(Debug)]
pub struct FakeStt {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::AbortHandle,
}

impl Drop for FakeStt {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeStt {
    /// Starts on `127.0.0.1:0`; every transcription answers `transcript`.
    pub async fn start(transcript: &str) -> FakeStt {
        let shared = Arc::new(Mutex::new(Shared {
            transcript: transcript.to_owned(),
            ..Shared::default()
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake STT server");
        let addr = listener.local_addr().expect("fake STT address");
        let app = Router::new()
            .route("/v1/audio/transcriptions", post(transcribe))
            .route("/v1/speech-to-text", post(scribe))
            // Read past the 25 MB limit so an oversized upload gets OpenAI's 413, not a
            // dropped connection.
            .layer(DefaultBodyLimit::max(LIMIT * 2))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeStt {
            addr,
            shared,
            task: task.abort_handle(),
        }
    }

    /// `http://127.0.0.1:PORT/v1`, as `stt.openai.base_url` takes it.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn uploads(&self) -> Vec<Upload> {
        self.shared.lock().unwrap().uploads.clone()
    }

    /// Every request that reached the server, accepted or not.
    pub fn requests(&self) -> usize {
        self.shared.lock().unwrap().requests
    }
}

fn error(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"message": message, "type": "invalid_request_error"}})),
    )
        .into_response()
}

async fn transcribe(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: HeaderMap,
    mut form: Multipart,
) -> Response {
    shared.lock().unwrap().requests += 1;
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if !authorization.starts_with("Bearer ") || authorization.len() <= "Bearer ".len() {
        return error(StatusCode::UNAUTHORIZED, "You didn't provide an API key.");
    }
    let (mut model, mut file, mut response_format) = (None, None, None);
    let parts = match read_form(&mut form).await {
        Ok(parts) => parts,
        Err(response) => return response,
    };
    for (name, file_name, bytes) in parts {
        match name.as_str() {
            "file" => file = Some((file_name.unwrap_or_default(), bytes)),
            "model" => model = Some(String::from_utf8_lossy(&bytes).into_owned()),
            "response_format" => {
                response_format = Some(String::from_utf8_lossy(&bytes).into_owned())
            }
            _ => {}
        }
    }
    let (Some(model), Some((file_name, bytes))) = (model, file) else {
        return error(StatusCode::BAD_REQUEST, "file and model are required");
    };
    if bytes.len() > LIMIT {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Maximum content size limit (26214400) exceeded.",
        );
    }
    let extension = file_name
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    if !FORMATS.contains(&extension.as_str()) {
        return error(
            StatusCode::BAD_REQUEST,
            "Invalid file format. Supported formats: flac, m4a, mp3, mp4, mpeg, mpga, ogg, wav, webm",
        );
    }
    let mut shared = shared.lock().unwrap();
    shared.uploads.push(Upload {
        model,
        file_name,
        bytes,
        response_format: response_format.clone(),
        authorization,
        fields: Vec::new(),
    });
    let text = shared.transcript.clone();
    match response_format.as_deref() {
        Some("text") => text.into_response(),
        _ => axum::Json(json!({"text": text})).into_response(),
    }
}

/// ElevenLabs Scribe's speech-to-text.
async fn scribe(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: HeaderMap,
    mut form: Multipart,
) -> Response {
    shared.lock().unwrap().requests += 1;
    let key = headers
        .get("xi-api-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if key.is_empty() {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(
                json!({"detail": {"status": "invalid_api_key", "message": "Invalid API key"}}),
            ),
        )
            .into_response();
    }
    let (mut model, mut file, mut fields) = (None, None, Vec::new());
    let parts = match read_form(&mut form).await {
        Ok(parts) => parts,
        Err(response) => return response,
    };
    for (name, file_name, bytes) in parts {
        match name.as_str() {
            "file" => file = Some((file_name.unwrap_or_default(), bytes)),
            "model_id" => model = Some(String::from_utf8_lossy(&bytes).into_owned()),
            _ => fields.push((name, String::from_utf8_lossy(&bytes).into_owned())),
        }
    }
    let (Some(model), Some((file_name, bytes))) = (model.clone(), file.clone()) else {
        // A validation error names each missing field, as the API's 422 answers do.
        let missing: Vec<_> = [("model_id", model.is_none()), ("file", file.is_none())]
            .into_iter()
            .filter(|(_, missing)| *missing)
            .map(|(name, _)| json!({"loc": ["body", name], "msg": "Field required"}))
            .collect();
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            axum::Json(json!({ "detail": missing })),
        )
            .into_response();
    };
    let mut shared = shared.lock().unwrap();
    shared.uploads.push(Upload {
        model,
        file_name,
        bytes,
        response_format: None,
        authorization: key,
        fields,
    });
    let text = shared.transcript.clone();
    axum::Json(json!({"language_code": "eng", "language_probability": 0.98, "text": text}))
        .into_response()
}

/// The multipart fields as (name, file name, bytes); a malformed body is a 400.
async fn read_form(
    form: &mut Multipart,
) -> Result<Vec<(String, Option<String>, Vec<u8>)>, Response> {
    let mut out = Vec::new();
    loop {
        let field = match form.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => return Ok(out),
            Err(e) => return Err(error(StatusCode::BAD_REQUEST, &e.to_string())),
        };
        let name = field.name().unwrap_or_default().to_owned();
        let file_name = field.file_name().map(str::to_owned);
        match field.bytes().await {
            Ok(bytes) => out.push((name, file_name, bytes.to_vec())),
            Err(e) => return Err(error(StatusCode::BAD_REQUEST, &e.to_string())),
        }
    }
}
