//! The admin HTTP endpoint (loopback only): `/health` says the process can still answer
//! (see `Router::liveness_problems`), `/ready` that every enabled adapter is live,
//! `/metrics` exposes the counters, `/log-level` reads and sets the log filter, `/send`
//! takes a message from the operator's scripts into a chat (`admin_send.rs`).
//!
//! Two walls, both in `admin_guard.rs`: every request must name the listener in `Host`
//! (a loopback name with its port), so a web page cannot reach it through DNS rebinding;
//! and a request that changes state needs the admin token or the API key as a Bearer token.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::adapter_health::{AdapterHealth, AdapterStatus};
pub use super::admin_guard::AdminCredentials;
use super::admin_guard::{self, AdminGuard};
use super::metrics::GatewayMetrics;
use crate::config::AdminConfig;
use crate::state::Store;

/// What the handlers read; cheap to clone.
#[derive(Debug, Clone)]
pub struct AdminState {
    pub metrics: Arc<GatewayMetrics>,
    pub adapters: Arc<AdapterHealth>,
    /// The store whose writer statistics `/metrics` reports, once it is open.
    pub store: Option<Store>,
    /// The live log filter (`GET`/`PUT /log-level`), when logging was installed.
    pub log: Option<crate::logging::LogControl>,
    /// Asked by `/health` for the problems that stop the daemon answering, once it runs.
    pub router: Option<Arc<super::router::Router>>,
    /// The Bearer tokens that may change state (`admin.token`, `API_SERVER_KEY`).
    pub credentials: AdminCredentials,
}

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(
        "admin.host: '{host}' is not a loopback address; the admin API answers reads without \
         authentication"
    )]
    NotLoopback { host: String },
    #[error("cannot listen on {addr} for the admin API: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// The address to bind for the validated `admin` config (`localhost` means 127.0.0.1).
pub fn admin_addr(config: &AdminConfig) -> Result<SocketAddr, AdminError> {
    let host = config.host.trim_start_matches('[').trim_end_matches(']');
    let ip = if host.eq_ignore_ascii_case("localhost") {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse::<IpAddr>()
            .ok()
            .filter(IpAddr::is_loopback)
            .ok_or_else(|| AdminError::NotLoopback {
                host: config.host.clone(),
            })?
    };
    Ok(SocketAddr::new(ip, config.port))
}

/// The routes for a listener on `port`, behind the Host and write guards.
pub fn router(state: AdminState, port: u16) -> Router {
    let guard = AdminGuard::new(port, state.credentials.clone());
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .route("/log-level", get(log_level).put(set_log_level))
        .merge(super::admin_send::routes(state.router.clone()))
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            guard,
            admin_guard::guard,
        ))
}

/// Binds `addr` (which must be loopback) and serves until `shutdown` is cancelled. Returns
/// the bound address (useful with port 0) and the server task.
pub async fn serve_admin(
    addr: SocketAddr,
    state: AdminState,
    shutdown: CancellationToken,
) -> Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>), AdminError> {
    if !addr.ip().is_loopback() {
        return Err(AdminError::NotLoopback {
            host: addr.ip().to_string(),
        });
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| AdminError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| AdminError::Bind { addr, source })?;
    tracing::info!(addr = %bound, "admin API listening");
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let server = axum::serve(listener, router(state, bound.port()))
        .with_graceful_shutdown(async move { shutdown.cancelled().await });
    Ok((bound, tokio::spawn(async move { server.await })))
}

/// `GET /log-level`: the filter in effect.
async fn log_level(State(state): State<AdminState>) -> impl IntoResponse {
    match state.log.as_ref().map(|log| log.current()) {
        Some(Ok(filter)) => (
            StatusCode::OK,
            Json(serde_json::json!({ "filter": filter })),
        ),
        Some(Err(e)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({ "error": e.to_string() })),
        ),
        None => (
            StatusCode::NOT_FOUND,
            Json(serde_json::json!({ "error": "logging is not controllable in this process" })),
        ),
    }
}

/// `PUT /log-level` with a `RUST_LOG`-style body (`debug`, `hermesd=debug,hyper=warn`).
async fn set_log_level(State(state): State<AdminState>, body: String) -> impl IntoResponse {
    let Some(log) = state.log.as_ref() else {
        return (
            StatusCode::NOT_FOUND,
            Json(serde_json::json!({ "error": "logging is not controllable in this process" })),
        );
    };
    match log.set_filter(body.trim()) {
        Ok(()) => {
            tracing::info!(
                filter = body.trim(),
                "log filter changed through the admin API"
            );
            (
                StatusCode::OK,
                Json(serde_json::json!({ "filter": body.trim() })),
            )
        }
        Err(e) => (
            StatusCode::BAD_REQUEST,
            Json(serde_json::json!({ "error": e.to_string() })),
        ),
    }
}

/// 200 while the daemon can answer; 503 with the reasons when the same probe that gates the
/// systemd watchdog ping finds a dead state.db writer or a turn stuck past its budget.
async fn health(State(state): State<AdminState>) -> impl IntoResponse {
    let problems = state
        .router
        .as_ref()
        .map(|router| router.liveness_problems())
        .unwrap_or_default();
    if problems.is_empty() {
        (StatusCode::OK, Json(serde_json::json!({ "status": "ok" })))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({ "status": "unhealthy", "problems": problems })),
        )
    }
}

#[derive(Serialize)]
struct Readiness {
    status: &'static str,
    adapters: BTreeMap<String, AdapterStatus>,
    /// Each MCP server's connection: reported, never a reason to be unready (the agent
    /// works without a server's tools while it is retried).
    mcp_servers: BTreeMap<String, crate::tools::mcp::ServerStatus>,
}

async fn ready(State(state): State<AdminState>) -> impl IntoResponse {
    let adapters = state.adapters.snapshot();
    let live = adapters
        .values()
        .all(|s| s.state == super::adapter_health::AdapterState::Live);
    let (code, status) = if live {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not_ready")
    };
    let mcp_servers = state
        .router
        .as_ref()
        .map(|router| router.mcp().statuses())
        .unwrap_or_default();
    (
        code,
        Json(Readiness {
            status,
            adapters,
            mcp_servers,
        }),
    )
}

async fn metrics(State(state): State<AdminState>) -> impl IntoResponse {
    let text = state
        .metrics
        .render(&state.adapters, state.store.as_ref().map(Store::stats));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
}
