//! OpenAI-style error envelopes and the Bearer check.

use axum::Json;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use subtle::ConstantTimeEq;

/// `{"error": {"message", "type", "param", "code"}}` with `status`.
pub fn openai_error(
    status: StatusCode,
    message: &str,
    kind: &str,
    param: Option<&str>,
    code: Option<&str>,
) -> Response {
    let body = json!({
        "error": {"message": message, "type": kind, "param": param, "code": code}
    });
    (status, Json(body)).into_response()
}

pub fn bad_request(message: &str, param: Option<&str>) -> Response {
    openai_error(
        StatusCode::BAD_REQUEST,
        message,
        "invalid_request_error",
        param,
        None,
    )
}

pub async fn not_found() -> Response {
    openai_error(
        StatusCode::NOT_FOUND,
        "Not found. Routes: GET /health, GET /v1/models, GET /v1/skills, POST /v1/chat/completions.",
        "invalid_request_error",
        None,
        Some("not_found"),
    )
}

/// `Err` with Hermes's 401 unless the request carries `Authorization: Bearer <key>`.
pub fn check_auth(headers: &HeaderMap, key: &str) -> Result<(), Box<Response>> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match presented {
        Some(token) if !key.is_empty() && bool::from(token.as_bytes().ct_eq(key.as_bytes())) => {
            Ok(())
        }
        _ => {
            tracing::warn!("API server rejected a request with a missing or invalid API key");
            Err(Box::new(openai_error(
                StatusCode::UNAUTHORIZED,
                "Invalid API key",
                "invalid_request_error",
                None,
                Some("invalid_api_key"),
            )))
        }
    }
}
