//! The HTTP API's middleware, on tower-http where it has the piece: a request id on every
//! request (`x-request-id`, kept when the client sends one, echoed back) and a tracing span
//! carrying it, so every log line of the request names it; Hermes's origin rule and CORS
//! for the configured origins; a per-request timeout; and the run limit for chat
//! completions (429 with `Retry-After` once `max_concurrent_runs` are in flight, never a
//! queue). The limit is not a layer: the handler takes a slot only after the key, the body
//! and its size checked out (`admission.rs`), so a refused client never holds one.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use super::errors::openai_error;

/// The longest a request may take to produce its response head. A non-streamed chat
/// completion is a whole agent turn, hence the generous bound; a streamed one answers its
/// head at once and is bounded by the agent's own limits.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// What a refused client is told to wait before trying again (Hermes sends the same).
const RETRY_AFTER_SECS: &str = "1";
const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const SESSION_ID: HeaderName = HeaderName::from_static("x-hermes-session-id");

/// How often a saturated API says so in the log: a flood must not become a log flood.
const SATURATION_LOG_EVERY: Duration = Duration::from_secs(10);

/// The cap on chat completions in flight, shared by every request.
#[derive(Clone, Debug)]
pub struct RunLimit {
    permits: Option<Arc<Semaphore>>,
    max: u32,
    /// Refusals not logged yet, and when the last saturation warning went out.
    refused: Arc<std::sync::Mutex<(u64, Option<std::time::Instant>)>>,
}

impl RunLimit {
    /// `max` runs at once; 0 means no cap (as in Hermes).
    pub fn new(max: u32) -> Self {
        let permits = (max > 0).then(|| Arc::new(Semaphore::new(max as usize)));
        Self {
            permits,
            max,
            refused: Arc::default(),
        }
    }

    /// Counts a refusal; warns on the first and then at most every [`SATURATION_LOG_EVERY`]
    /// with the number refused since.
    fn note_refusal(&self) {
        let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        refused.0 += 1;
        let due = refused
            .1
            .is_none_or(|last| last.elapsed() >= SATURATION_LOG_EVERY);
        if due {
            tracing::warn!(
                max = self.max,
                refused = refused.0,
                "API server saturated: chat completions refused with 429"
            );
            *refused = (0, Some(std::time::Instant::now()));
        }
    }
}

impl RunLimit {
    /// A run slot while fewer than the cap are in flight (`None` inside `Ok` when there is
    /// no cap), else Hermes's 429 with `Retry-After`. Called only for a request already
    /// authenticated, read and validated, so a slot is never held by a refused client.
    pub fn admit(&self) -> Result<Option<OwnedSemaphorePermit>, Box<Response>> {
        let Some(permits) = &self.permits else {
            return Ok(None);
        };
        match permits.clone().try_acquire_owned() {
            Ok(permit) => Ok(Some(permit)),
            Err(_) => {
                self.note_refusal();
                let mut response = openai_error(
                    StatusCode::TOO_MANY_REQUESTS,
                    &format!("Too many concurrent runs (max {})", self.max),
                    "rate_limit_error",
                    None,
                    Some("rate_limit_exceeded"),
                );
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from_static(RETRY_AFTER_SECS),
                );
                Err(Box::new(response))
            }
        }
    }
}

/// A streamed reply keeps its run going after the response head, so its slot travels with
/// the body and is returned when the stream ends or the client goes away; any other
/// response returns it when dropped here.
pub fn hold_permit_while_streaming(
    response: Response,
    permit: Option<OwnedSemaphorePermit>,
) -> Response {
    let Some(permit) = permit else {
        return response;
    };
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !streamed {
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _held = &permit;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// Hermes's rule: a browser request (it carries `Origin`) from an origin not configured is
/// refused with 403 before anything else; requests without `Origin` (curl, SDKs) pass.
async fn refuse_foreign_origin(
    State(origins): State<Arc<[String]>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let allowed = origins
            .iter()
            .any(|o| o == "*" || o.as_bytes() == origin.as_bytes());
        if !allowed {
            tracing::warn!(
                origin = %String::from_utf8_lossy(origin.as_bytes()),
                "API server refused a request from an origin not in cors_origins"
            );
            return StatusCode::FORBIDDEN.into_response();
        }
    }
    next.run(request).await
}

/// CORS for the configured origins: exact matches (or any, for `*`), preflight answered,
/// credentials never allowed (the API authenticates with a Bearer key, not cookies).
fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow_origin = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow_origin)
            .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                HeaderName::from_static("idempotency-key"),
                SESSION_ID,
            ])
            .expose_headers([SESSION_ID, REQUEST_ID])
            .allow_credentials(false)
            .max_age(Duration::from_secs(600)),
    )
}

/// Wraps the routes (outermost last): request id → span → echo of the id → origin rule →
/// CORS → timeout.
pub fn wrap(app: Router, cors_origins: &[String]) -> Router {
    let origins: Arc<[String]> = cors_origins.to_vec().into();
    let app = app.layer(TimeoutLayer::with_status_code(
        StatusCode::GATEWAY_TIMEOUT,
        REQUEST_TIMEOUT,
    ));
    let app = match cors(cors_origins) {
        Some(cors) => app.layer(cors),
        None => app,
    };
    app.layer(middleware::from_fn_with_state(
        origins,
        refuse_foreign_origin,
    ))
    .layer(PropagateRequestIdLayer::new(REQUEST_ID))
    .layer(
        TraceLayer::new_for_http().make_span_with(|request: &Request| {
            let id = request
                .headers()
                .get(&REQUEST_ID)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .unwrap_or_default();
            tracing::info_span!(
                "api_request",
                request_id = %id,
                method = %request.method(),
                path = %request.uri().path(),
            )
        }),
    )
    .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
}
