//! What every chat-completions reply carries, streamed (`sse.rs`) or not (`chat.rs`): a
//! fresh `chatcmpl-` id and the session it ran in, as the `X-Hermes-Session-Id` header
//! (which a request may also send to continue that session).

use axum::http::HeaderValue;
use axum::response::Response;

pub const SESSION_HEADER: &str = "X-Hermes-Session-Id";

pub fn with_session(mut response: Response, session_id: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(session_id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

pub fn completion_id() -> String {
    format!("chatcmpl-{:029x}", rand::random::<u128>() >> 12)
}
