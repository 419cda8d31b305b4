//! The OpenAI-compatible HTTP API (`API_SERVER_*`, default `127.0.0.1:8642`), as Hermes's
//! `api_server.py` serves it: `GET /health`, `GET /v1/models`, `GET /v1/skills`, `POST /v1/chat/completions`
//! (JSON or SSE), Bearer auth on everything but `/health`, session continuity through
//! `X-Hermes-Session-Id`. Requests go through the same router, sessions, agent and
//! persistence as chat messages; the answer is the HTTP response, so nothing is journaled
//! for later delivery (a client whose connection drops retries).
//!
//! A chat completion is admitted in a fixed order (`chat::completions`): the key, then the
//! body within `body_timeout_seconds` and the byte limit, then `max_messages` and
//! `max_request_chars` (`admission.rs`), and only then one of the `max_concurrent_runs`
//! slots (`layers::RunLimit`). A refused request never holds a slot.

mod admission;
mod chat;
mod errors;
mod ids;
mod layers;
mod skills;
mod sse;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router as HttpRouter;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use tokio_util::sync::CancellationToken;

use crate::config::ApiServerConfig;
use crate::gateway::router::Router;

/// Hermes's `MAX_REQUEST_BYTES`.
pub const MAX_REQUEST_BYTES: usize = 10_000_000;
/// Shortest accepted `API_SERVER_KEY`.
pub const MIN_KEY_CHARS: usize = 16;
/// The model id advertised when `API_SERVER_MODEL_NAME` is not set.
pub const DEFAULT_MODEL_NAME: &str = "hermes-agent";

/// Why the API server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ApiServerError {
    #[error(
        "API_SERVER_KEY is required for the HTTP API (at least {MIN_KEY_CHARS} characters); \
         set it in $HERMES_HOME/.env"
    )]
    MissingKey,
    #[error("API_SERVER_KEY must be at least {MIN_KEY_CHARS} characters (it has {0})")]
    ShortKey(usize),
    #[error("api_server.host {0:?} is not an IP address")]
    BadHost(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Checks the key and host without binding (also run by `config check`); the address to
/// listen on.
pub fn validate(config: &ApiServerConfig) -> Result<SocketAddr, ApiServerError> {
    let key = config.key.as_ref().ok_or(ApiServerError::MissingKey)?;
    let chars = key.expose().chars().count();
    if chars < MIN_KEY_CHARS {
        return Err(ApiServerError::ShortKey(chars));
    }
    let ip: std::net::IpAddr = config
        .host
        .parse()
        .map_err(|_| ApiServerError::BadHost(config.host.clone()))?;
    Ok(SocketAddr::new(ip, config.port))
}

#[derive(Clone)]
pub(crate) struct ApiState {
    router: Arc<Router>,
    key: Arc<str>,
    model_name: Arc<str>,
    /// Chat completions in flight, taken only after a request passed admission.
    runs: layers::RunLimit,
    limits: admission::RequestLimits,
}

/// Validates the configuration and binds the listener; serving starts with [`serve`].
pub async fn bind(config: &ApiServerConfig) -> Result<tokio::net::TcpListener, ApiServerError> {
    let addr = validate(config)?;
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ApiServerError::Bind { addr, source })
}

/// Serves the API on `listener` until `shutdown` fires.
pub fn serve(
    listener: tokio::net::TcpListener,
    config: &ApiServerConfig,
    router: Arc<Router>,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<std::io::Result<()>> {
    let state = ApiState {
        router,
        key: config
            .key
            .as_ref()
            .map(|k| Arc::from(k.expose()))
            .unwrap_or_else(|| Arc::from("")),
        model_name: Arc::from(
            config
                .model_name
                .clone()
                .unwrap_or_else(|| DEFAULT_MODEL_NAME.to_owned()),
        ),
        runs: layers::RunLimit::new(config.max_concurrent_runs),
        limits: admission::RequestLimits::from_config(config),
    };
    let app = routes(state, config);
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
    })
}

fn routes(state: ApiState, config: &ApiServerConfig) -> HttpRouter {
    let app = HttpRouter::new()
        .route("/health", get(chat::health))
        .route("/v1/health", get(chat::health))
        .route("/v1/models", get(chat::models))
        .route("/v1/skills", get(skills::list))
        .route("/v1/chat/completions", post(chat::completions))
        .fallback(errors::not_found)
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .with_state(state);
    layers::wrap(app, &config.cors_origins)
}
