//! The handlers: health, model list, chat completions (request parsing and the JSON reply;
//! streaming lives in `sse.rs`).

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hermes_adapter::{ChatType, MessageEvent, SessionSource};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::ApiState;
use super::admission::RequestLimits;
use super::admission::{Refusal, check_declared_length, log_refusal, read_body};
use super::errors::{bad_request, check_auth, openai_error};
use super::ids::{SESSION_HEADER, completion_id, with_session};
use super::layers::hold_permit_while_streaming;
use crate::gateway::router::API_PLATFORM;
use crate::state::{NewMessage, NewSession, now_epoch};

fn bad(message: &str, param: Option<&str>) -> Box<Response> {
    Box::new(bad_request(message, param))
}

fn refuse(refusal: Refusal) -> Box<Response> {
    log_refusal(&refusal);
    Box::new(refusal.response())
}

const MAX_SESSION_HEADER_LEN: usize = 256;

pub async fn health() -> Json<Value> {
    Json(json!({"status": "ok", "platform": "hermes-agent", "version": env!("CARGO_PKG_VERSION")}))
}

pub async fn models(State(state): State<ApiState>, headers: HeaderMap) -> Response {
    if let Err(denied) = check_auth(&headers, &state.key) {
        return *denied;
    }
    let now = now_epoch() as i64;
    let name = state.model_name.as_ref();
    Json(json!({
        "object": "list",
        "data": [{
            "id": name, "object": "model", "created": now, "owned_by": "hermes",
            "permission": [], "root": name, "parent": null
        }]
    }))
    .into_response()
}

/// A validated chat-completions request.
pub struct ChatRequest {
    pub system: Option<String>,
    /// Earlier user/assistant messages sent by the client, oldest first.
    pub history: Vec<(String, String)>,
    pub user_text: String,
    pub stream: bool,
    pub model: Option<String>,
}

/// Flattens OpenAI content (a string or a list of parts) to text.
fn content_text(content: &Value, param: &str) -> Result<String, Box<Response>> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => {
            let mut texts = Vec::new();
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") | Some("input_text") => {
                        texts.push(part.get("text").and_then(Value::as_str).unwrap_or(""))
                    }
                    Some(_) => {}
                    None => {
                        return Err(bad(
                            "Each content part must be an object with a 'type'",
                            Some(param),
                        ));
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        _ => Err(bad(
            "Message content must be text or an array of content parts",
            Some(param),
        )),
    }
}

/// Parses and validates a request body; refuses one beyond `limits` (413) before anything
/// of it is stored.
pub fn parse_request(body: &[u8], limits: &RequestLimits) -> Result<ChatRequest, Box<Response>> {
    let body: Value =
        serde_json::from_slice(body).map_err(|_| bad("Invalid JSON in request body", None))?;
    let Some(messages) = body
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
    else {
        return Err(bad("Missing or invalid 'messages' field", Some("messages")));
    };
    if messages.len() > limits.max_messages {
        return Err(refuse(Refusal::TooManyMessages {
            count: messages.len(),
            limit: limits.max_messages,
        }));
    }
    let mut system: Option<String> = None;
    let mut conversation = Vec::new();
    let mut total_chars = 0usize;
    for (i, message) in messages.iter().enumerate() {
        let param = format!("messages[{i}]");
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("Each message needs a string 'role'", Some(&param)))?;
        let content = content_text(
            message.get("content").unwrap_or(&Value::Null),
            &format!("{param}.content"),
        )?;
        total_chars += content.chars().count();
        if total_chars > limits.max_chars {
            let rest: usize = messages[i + 1..]
                .iter()
                .filter_map(|m| m.get("content"))
                .filter_map(|c| content_text(c, "").ok())
                .map(|text| text.chars().count())
                .sum();
            return Err(refuse(Refusal::TooManyChars {
                count: total_chars + rest,
                limit: limits.max_chars,
            }));
        }
        match role {
            "system" | "developer" => {
                system = Some(match system {
                    Some(s) => format!("{s}\n{content}"),
                    None => content,
                })
            }
            "user" | "assistant" => conversation.push((role.to_owned(), content)),
            _ => {}
        }
    }
    let user_text = match conversation.last() {
        Some((role, text)) if role == "user" && !text.trim().is_empty() => text.clone(),
        _ => {
            return Err(bad("No user message found in messages", Some("messages")));
        }
    };
    conversation.pop();
    let stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("'stream' must be a boolean", Some("stream"))),
    };
    Ok(ChatRequest {
        system,
        history: conversation,
        user_text,
        stream,
        model: body.get("model").and_then(Value::as_str).map(str::to_owned),
    })
}

/// Hermes's `_derive_chat_session_id`: stable across the turns of one client conversation.
pub fn derive_session_id(system: Option<&str>, first_user: &str) -> String {
    let seed = format!("{}\n{first_user}", system.unwrap_or(""));
    let digest = hex::encode(Sha256::digest(seed.as_bytes()));
    format!("api-{}", &digest[..16])
}

fn session_from_header(headers: &HeaderMap) -> Result<Option<String>, Box<Response>> {
    let Some(value) = headers.get(SESSION_HEADER) else {
        return Ok(None);
    };
    let id = value
        .to_str()
        .map_err(|_| bad("Invalid session ID", None))?
        .trim();
    if id.is_empty() {
        return Ok(None);
    }
    if id.len() > MAX_SESSION_HEADER_LEN {
        return Err(bad("Session ID too long", None));
    }
    let unsafe_path = id.contains("..")
        || id.contains('/')
        || id.contains('\\')
        || id.chars().any(char::is_control)
        || (id.len() >= 2 && id.as_bytes()[1] == b':');
    if unsafe_path {
        return Err(bad("Invalid session ID", None));
    }
    Ok(Some(id.to_owned()))
}

/// `POST /v1/chat/completions`. The order is the point: the key is checked first, then the
/// body is read within its deadline and checked against the limits, and only then is a run
/// slot taken, so no one who is refused ever holds one.
pub async fn completions(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Err(denied) = check_auth(&headers, &state.key) {
        return *denied;
    }
    if let Err(refusal) = check_declared_length(&headers, &state.limits) {
        return *refuse(refusal);
    }
    let body = match read_body(body, &state.limits).await {
        Ok(body) => body,
        Err(refusal) => return *refuse(refusal),
    };
    let request = match parse_request(&body, &state.limits) {
        Ok(request) => request,
        Err(response) => return *response,
    };
    drop(body);
    let permit = match state.runs.admit() {
        Ok(permit) => permit,
        Err(busy) => return *busy,
    };
    let response = run_completion(&state, &headers, request).await;
    hold_permit_while_streaming(response, permit)
}

async fn run_completion(state: &ApiState, headers: &HeaderMap, request: ChatRequest) -> Response {
    let session_id = match session_from_header(headers) {
        Ok(Some(id)) => id,
        Ok(None) => {
            let first_user = request
                .history
                .iter()
                .find(|(role, _)| role == "user")
                .map(|(_, text)| text.as_str())
                .unwrap_or(&request.user_text);
            let id = derive_session_id(request.system.as_deref(), first_user);
            if let Err(e) = seed_history(state, &id, &request.history).await {
                return openai_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("cannot store the conversation: {e}"),
                    "server_error",
                    None,
                    None,
                );
            }
            id
        }
        Err(response) => return *response,
    };
    let model = request
        .model
        .clone()
        .unwrap_or_else(|| state.model_name.to_string());
    let event = api_event(&session_id, &request.user_text);
    if request.stream {
        return super::sse::stream(state.clone(), event, session_id, model, request.system).await;
    }
    match state.router.submit_api(event, None, request.system).await {
        Ok(reply) => {
            let body = json!({
                "id": completion_id(),
                "object": "chat.completion",
                "created": now_epoch() as i64,
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.text},
                    "finish_reason": "stop"
                }],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
            });
            with_session(Json(body).into_response(), &reply.session_id)
        }
        Err(message) => with_session(
            openai_error(
                StatusCode::BAD_GATEWAY,
                &message.to_string(),
                "server_error",
                None,
                Some("agent_incomplete"),
            ),
            &session_id,
        ),
    }
}

fn api_event(session_id: &str, text: &str) -> MessageEvent {
    let source = SessionSource {
        chat_type: ChatType::Dm,
        user_name: Some("api".to_owned()),
        ..SessionSource::dm(API_PLATFORM, session_id, "api")
    };
    let mut event = MessageEvent::text(
        &format!("api-{:032x}", rand::random::<u128>()),
        source,
        text,
    );
    event.timestamp = now_epoch();
    event
}

/// A new client conversation that arrives with earlier messages: store them first so the
/// agent sees them (later turns of the same conversation find the session in state.db).
async fn seed_history(
    state: &ApiState,
    session_id: &str,
    history: &[(String, String)],
) -> crate::state::StoreResult<()> {
    let store = state.router.store();
    if history.is_empty() || store.get_session(session_id).await?.is_some() {
        return Ok(());
    }
    store
        .create_session(NewSession::new(session_id, API_PLATFORM))
        .await?;
    for (role, text) in history {
        store
            .append_message(NewMessage::text(session_id, role.as_str(), text))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_match_hermes() {
        // sha256("\nhello")[:16], as Python's `_derive_chat_session_id(None, "hello")`.
        let id = derive_session_id(None, "hello");
        assert!(id.starts_with("api-") && id.len() == 20, "{id}");
        assert_eq!(id, derive_session_id(Some(""), "hello"));
        assert_ne!(id, derive_session_id(Some("sys"), "hello"));
    }

    fn limits() -> RequestLimits {
        RequestLimits {
            body_timeout: std::time::Duration::from_secs(30),
            max_body_bytes: 1 << 20,
            max_messages: 4,
            max_chars: 10,
        }
    }

    fn parse_request(body: &[u8]) -> Result<ChatRequest, Box<Response>> {
        super::parse_request(body, &limits())
    }

    #[test]
    fn requests_beyond_the_limits_are_refused_with_413() {
        let five =
            br#"{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "a"},
            {"role": "user", "content": "a"}, {"role": "user", "content": "a"},
            {"role": "user", "content": "a"}]}"#;
        let refused = parse_request(five).err().expect("five messages refused");
        assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let long = br#"{"messages": [{"role": "system", "content": "123456"},
            {"role": "user", "content": "12345"}]}"#;
        let refused = parse_request(long)
            .err()
            .expect("eleven characters refused");
        assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let fits = br#"{"messages": [{"role": "system", "content": "12345"},
            {"role": "user", "content": "12345"}]}"#;
        assert!(parse_request(fits).is_ok());
    }

    #[test]
    fn requests_are_validated() {
        assert!(parse_request(b"{").is_err());
        assert!(parse_request(br#"{"messages": []}"#).is_err());
        assert!(
            parse_request(br#"{"messages": [{"role": "assistant", "content": "x"}]}"#).is_err()
        );
        assert!(parse_request(br#"{"messages": [{"role": "user", "content": 5}]}"#).is_err());
        let ok = parse_request(
            br#"{"messages": [{"role": "system", "content": "s"},
                {"role": "user", "content": [{"type": "text", "text": "a"}]},
                {"role": "assistant", "content": "b"},
                {"role": "user", "content": "c"}], "stream": true}"#,
        )
        .unwrap_or_else(|_| panic!("valid request"));
        assert_eq!(ok.user_text, "c");
        assert_eq!(ok.history.len(), 2);
        assert!(ok.stream);
        assert_eq!(ok.system.as_deref(), Some("s"));
    }
}
