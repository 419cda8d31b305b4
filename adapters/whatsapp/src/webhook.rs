//! The webhook Meta calls (<https://developers.facebook.com/docs/graph-api/webhooks/getting-started>):
//!
//! - `GET <path>?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…` — the subscription
//!   handshake: the challenge is echoed only for our verify token (403 otherwise, 503 while
//!   none is configured, so nobody can subscribe a listener that has none).
//! - `POST <path>` — a signed delivery. Checked in the order that keeps work off the
//!   unauthenticated path: size (413), a configured app secret (503), `X-Hub-Signature-256`
//!   (401), then the payload. `200` goes back only once every message in it is recorded in
//!   the journal (or known there: a redelivery); if the journal could not take one, `503`
//!   makes Meta deliver the whole payload again later. A signed body that is not a
//!   notification is kept as a dead letter and answered `200`, so Meta stops resending it.
//! - `GET /health` — the listener's own liveness probe.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hermes_adapter::{AdapterContext, DeadLetter, RecordOutcome};
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::inbound::{self, PLATFORM};
use crate::settings::{MAX_BODY_BYTES, Settings};

/// What the handlers share with the adapter.
pub struct Shared {
    pub settings: Settings,
    pub ctx: AdapterContext,
    /// The newest recorded message id per chat: the read receipt and typing indicator need one.
    pub last_inbound: Arc<Mutex<HashMap<String, String>>>,
}

pub fn router(shared: Arc<Shared>) -> axum::Router {
    let path = shared.settings.webhook_path.clone();
    axum::Router::new()
        .route("/health", get(health))
        .route(&path, get(verify).post(receive))
        .with_state(shared)
}

async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok", "platform": PLATFORM}))
}

fn plain(status: StatusCode, text: &str) -> Response {
    (status, text.to_owned()).into_response()
}

async fn verify(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let Some(expected) = &shared.settings.verify_token else {
        return plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "verify token not configured",
        );
    };
    if query.get("hub.mode").map(String::as_str) != Some("subscribe") {
        return plain(StatusCode::BAD_REQUEST, "hub.mode must be subscribe");
    }
    let given = query
        .get("hub.verify_token")
        .map(String::as_str)
        .unwrap_or("");
    if !bool::from(given.as_bytes().ct_eq(expected.expose().as_bytes())) {
        tracing::warn!(
            platform = PLATFORM,
            "webhook subscription refused: wrong verify token"
        );
        return plain(StatusCode::FORBIDDEN, "verify token mismatch");
    }
    match query.get("hub.challenge").filter(|c| !c.is_empty()) {
        Some(challenge) => {
            tracing::info!(platform = PLATFORM, "webhook subscription verified");
            plain(StatusCode::OK, challenge)
        }
        None => plain(StatusCode::BAD_REQUEST, "hub.challenge missing"),
    }
}

fn not_recorded() -> Response {
    let mut response = plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "not recorded; send it again",
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, 5u64.into());
    response
}

async fn receive(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Body) -> Response {
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        return plain(StatusCode::PAYLOAD_TOO_LARGE, "payload too large");
    };
    let Some(secret) = &shared.settings.app_secret else {
        tracing::error!(
            platform = PLATFORM,
            "webhook delivery refused: WHATSAPP_CLOUD_APP_SECRET is not set"
        );
        return plain(StatusCode::SERVICE_UNAVAILABLE, "app secret not configured");
    };
    let signature = headers
        .get("x-hub-signature-256")
        .and_then(|v| v.to_str().ok());
    if !crate::signature::valid(secret.expose(), &body, signature) {
        tracing::warn!(
            platform = PLATFORM,
            bytes = body.len(),
            "webhook refused: bad X-Hub-Signature-256"
        );
        return plain(StatusCode::UNAUTHORIZED, "invalid signature");
    }
    ctx_progress(&shared);
    let parsed = match inbound::parse(&body, &shared.settings.phone_number_id) {
        Ok(parsed) => parsed,
        Err(why) => return keep_undecodable(&shared, &body, why.to_string()).await,
    };
    for (wamid, recipient, code, details) in &parsed.failed_statuses {
        tracing::warn!(platform = PLATFORM, %wamid, %recipient, code, %details,
            "Meta reports a sent message as not delivered");
    }
    for (wamid, why) in &parsed.skipped {
        tracing::info!(platform = PLATFORM, %wamid, %why, "message not taken");
    }
    let mut failed = false;
    for event in parsed.events {
        let (chat, wamid) = (event.source.chat_id.clone(), event.event_id.clone());
        match shared.ctx.deliver(event).await {
            RecordOutcome::Recorded | RecordOutcome::Duplicate => {
                shared
                    .last_inbound
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(chat, wamid);
            }
            RecordOutcome::Refused => {}
            RecordOutcome::Failed => failed = true,
        }
    }
    if failed {
        return not_recorded();
    }
    plain(StatusCode::OK, "ok")
}

fn ctx_progress(shared: &Shared) {
    shared.ctx.progress.report();
}

async fn keep_undecodable(shared: &Shared, body: &[u8], error: String) -> Response {
    let letter = DeadLetter {
        platform: PLATFORM.to_owned(),
        item_id: format!("sha256-{}", &hex::encode(Sha256::digest(body))[..32]),
        source: None,
        raw: String::from_utf8_lossy(body).into_owned(),
        error,
    };
    match shared.ctx.dead_letter(letter).await {
        RecordOutcome::Failed => not_recorded(),
        _ => plain(StatusCode::OK, "kept"),
    }
}
