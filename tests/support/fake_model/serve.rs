//! The HTTP side of the fake model: routes, recording, and a step rendered in the request's
//! wire format, as JSON or as a (possibly slow, stalled or cut) event stream.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use serde_json::Value;

use super::script::Step;
use super::{Format, RecordedRequest, Shared, anthropic, chat, lock, models, responses};

/// How the server is kept alive; dropping it stops the server.
#[derive(Debug)]
pub enum Lifetime {
    Task(tokio::task::AbortHandle),
    Thread(Option<tokio::sync::oneshot::Sender<()>>),
}

impl Drop for Lifetime {
    fn drop(&mut self) {
        match self {
            Lifetime::Task(handle) => handle.abort(),
            Lifetime::Thread(stop) => {
                if let Some(stop) = stop.take() {
                    let _ = stop.send(());
                }
            }
        }
    }
}

fn router(shared: Arc<Shared>) -> Router {
    let route = |format: Format| {
        post(
            move |State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes| {
                respond(shared, format, headers, body)
            },
        )
    };
    Router::new()
        .route("/v1/chat/completions", route(Format::Chat))
        .route("/v1/responses", route(Format::Responses))
        .route("/v1/messages", route(Format::Anthropic))
        .route("/v1/models", get(list_models))
        // Requests with images are large: Anthropic takes up to 32 MB per request
        // (https://docs.anthropic.com/en/api/overview#request-size-limits), OpenAI more;
        // axum's own 2 MB default would refuse what the real servers accept.
        .layer(axum::extract::DefaultBodyLimit::max(32 * 1024 * 1024))
        .with_state(shared)
}

/// Real model servers answer promptly; without TCP_NODELAY a small write waits for the
/// client's delayed ACK (~40 ms) and the fake would look slow.
fn no_delay(stream: &mut tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
}

pub async fn on_current_runtime(shared: Arc<Shared>) -> (SocketAddr, Lifetime) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the fake model on 127.0.0.1:0");
    let addr = listener.local_addr().expect("fake model address");
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener.tap_io(no_delay), router(shared)).await;
    });
    (addr, Lifetime::Task(task.abort_handle()))
}

pub fn on_own_thread(shared: Arc<Shared>) -> (SocketAddr, Lifetime) {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake model on 127.0.0.1:0");
    listener
        .set_nonblocking(true)
        .expect("non-blocking fake model listener");
    let addr = listener.local_addr().expect("fake model address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("fake-model".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("fake model runtime");
            runtime.block_on(async move {
                let listener =
                    tokio::net::TcpListener::from_std(listener).expect("fake model listener");
                let _ = axum::serve(listener.tap_io(no_delay), router(shared))
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        })
        .expect("spawn the fake model thread");
    (addr, Lifetime::Thread(Some(stop)))
}

async fn list_models(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let query = query.unwrap_or_default();
    let pairs: std::collections::HashMap<String, String> = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let path = if query.is_empty() {
        "/v1/models".to_owned()
    } else {
        format!("/v1/models?{query}")
    };
    lock(&shared.models_requests).push(RecordedRequest {
        path,
        headers: recorded_headers(&headers),
        body: Value::Null,
        body_text: String::new(),
        received_at: Instant::now(),
    });
    let anthropic = headers.contains_key("anthropic-version");
    let listing = lock(&shared.models).clone();
    let (status, body) = models::answer(listing.as_deref(), anthropic, &pairs);
    json(status, body)
}

fn recorded_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value)
        })
        .collect()
}

async fn respond(
    shared: Arc<Shared>,
    format: Format,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let body_text = String::from_utf8_lossy(&bytes).into_owned();
    let body: Value = serde_json::from_str(&body_text).unwrap_or(Value::Null);
    if body_text.contains(super::TITLE_PROMPT_START) {
        // A session-title request (sent in the background after a first exchange): answered
        // out of band, so it never takes a scripted step or counts as a conversation request.
        let model = body["model"].as_str().unwrap_or("fake-model").to_owned();
        let title = shared.title_reply(&body);
        return json(200, reply_json(format, &super::Reply::text(title), &model));
    }
    shared.record(RecordedRequest {
        path: format_path(format).to_owned(),
        headers: recorded_headers(&headers),
        body: body.clone(),
        body_text,
        received_at: Instant::now(),
    });
    let model = body["model"].as_str().unwrap_or("fake-model").to_owned();
    let stream = body["stream"].as_bool() == Some(true);
    let include_usage = body.pointer("/stream_options/include_usage") == Some(&Value::Bool(true));
    let Some(step) = shared.next_step(format, &body) else {
        let message = "fake model: unexpected request (the script is empty)";
        return error(format, 500, &[], message);
    };
    let frames = |reply| match format {
        Format::Chat => chat::events(reply, &model, include_usage),
        Format::Anthropic => anthropic::events(reply, &model),
        Format::Responses => responses::events(reply, &model),
    };
    let first_event = match format {
        Format::Chat => chat::first_event(&model),
        Format::Anthropic => anthropic::first_event(&model, None),
        Format::Responses => responses::first_event(&model),
    };
    match step {
        Step::Reply(reply) if stream => {
            let frames = frames(&reply);
            sse(shared, [frames.body, frames.end].concat(), None, false)
        }
        Step::Reply(reply) => json(200, reply_json(format, &reply, &model)),
        Step::Gated { reply, gate } => {
            if let Ok(permit) = gate.acquire().await {
                permit.forget();
            }
            if stream {
                let frames = frames(&reply);
                sse(shared, [frames.body, frames.end].concat(), None, false)
            } else {
                json(200, reply_json(format, &reply, &model))
            }
        }
        Step::Slow { reply, delay } if stream => {
            let frames = frames(&reply);
            sse(
                shared,
                [frames.body, frames.end].concat(),
                Some(delay),
                false,
            )
        }
        Step::Slow { reply, delay } => {
            tokio::time::sleep(delay).await;
            json(200, reply_json(format, &reply, &model))
        }
        Step::Error {
            status,
            headers,
            message,
        } => error(format, status, &headers, &message),
        Step::Stall if stream => sse(shared, vec![first_event], None, true),
        Step::Stall => std::future::pending().await,
        Step::Malformed if stream => sse(
            shared,
            vec![first_event, "data: {not json\n\n".into()],
            None,
            false,
        ),
        Step::Malformed => raw(200, "application/json", "{\"choices\": [ not json".into()),
        Step::EmptyChoices if stream => sse(shared, empty_events(format, &model), None, false),
        Step::EmptyChoices => json(200, empty_json(format, &model)),
        Step::Truncated(reply) if stream => sse(shared, frames(&reply).body, None, false),
        Step::Truncated(reply) => {
            let mut text = reply_json(format, &reply, &model).to_string();
            let mut cut = text.len() / 2;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            raw(200, "application/json", text)
        }
        Step::Raw {
            status,
            content_type,
            body,
        } => raw(status, &content_type, body),
    }
}

fn format_path(format: Format) -> &'static str {
    match format {
        Format::Chat => "/v1/chat/completions",
        Format::Responses => "/v1/responses",
        Format::Anthropic => "/v1/messages",
    }
}

fn reply_json(format: Format, reply: &super::Reply, model: &str) -> Value {
    match format {
        Format::Chat => chat::json(reply, model),
        Format::Anthropic => anthropic::json(reply, model),
        Format::Responses => responses::json(reply, model),
    }
}

fn empty_json(format: Format, model: &str) -> Value {
    match format {
        Format::Chat => chat::empty_json(model),
        Format::Anthropic => anthropic::empty_json(model),
        Format::Responses => responses::empty_json(model),
    }
}

fn empty_events(format: Format, model: &str) -> Vec<String> {
    match format {
        Format::Chat => chat::empty_events(model),
        Format::Anthropic => anthropic::empty_events(model),
        Format::Responses => responses::empty_events(model),
    }
}

fn error(format: Format, status: u16, headers: &[(String, String)], message: &str) -> Response {
    let body = match format {
        Format::Chat => chat::error_body(status, message),
        Format::Anthropic => anthropic::error_body(status, message),
        Format::Responses => responses::error_body(status, message),
    };
    let mut response = json(status, body);
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            header::HeaderName::from_bytes(name.as_bytes()),
            header::HeaderValue::from_str(value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

fn json(status: u16, body: Value) -> Response {
    raw(status, "application/json", body.to_string())
}

fn raw(status: u16, content_type: &str, body: String) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .unwrap_or_default()
}

/// Counts a stream as disconnected when it is dropped before its last frame was taken.
struct EndGuard {
    shared: Arc<Shared>,
    finished: bool,
}

impl EndGuard {
    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.disconnects.send_modify(|n| *n += 1);
        }
    }
}

/// An event-stream body: the frames, `delay` apart, then either the end or (`stall`) silence
/// until the client goes away.
fn sse(shared: Arc<Shared>, frames: Vec<String>, delay: Option<Duration>, stall: bool) -> Response {
    let guard = EndGuard {
        shared,
        finished: false,
    };
    let state = (frames.into_iter(), guard, true);
    let stream =
        futures_util::stream::unfold(state, move |(mut frames, mut guard, first)| async move {
            match frames.next() {
                Some(frame) => {
                    if let (Some(delay), false) = (delay, first) {
                        tokio::time::sleep(delay).await;
                    }
                    Some((
                        Ok::<_, Infallible>(Bytes::from(frame)),
                        (frames, guard, false),
                    ))
                }
                None => {
                    if stall {
                        std::future::pending::<()>().await;
                    }
                    guard.finish();
                    None
                }
            }
        });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_default()
}
