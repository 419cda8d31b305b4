//! Webhook mode: an axum `Router` the core mounts in its own HTTP server. Telegram POSTs each
//! update with `X-Telegram-Bot-Api-Secret-Token`; a wrong or missing secret gets 401, and the
//! answer is 200 only once the update is recorded (or deliberately ignored), so Telegram
//! retries anything that was not.

use std::sync::{Arc, RwLock};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use hermes_adapter::{AdapterContext, RecordOutcome};
use serde_json::Value;

use crate::api::types::Update;
use crate::intake::{Completion, Disposition, IntakeHandle};
use hermes_adapter::Secret;

pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// Where `run` installs the intake while the adapter is running.
#[derive(Debug, Clone, Default)]
pub struct WebhookSlot {
    inner: Arc<RwLock<Option<(IntakeHandle, AdapterContext)>>>,
}

impl WebhookSlot {
    pub fn install(&self, intake: IntakeHandle, ctx: AdapterContext) {
        *self.inner.write().unwrap_or_else(|e| e.into_inner()) = Some((intake, ctx));
    }

    pub fn clear(&self) {
        *self.inner.write().unwrap_or_else(|e| e.into_inner()) = None;
    }

    fn get(&self) -> Option<(IntakeHandle, AdapterContext)> {
        self.inner.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[derive(Clone)]
struct WebhookState {
    secret: Secret,
    slot: WebhookSlot,
}

/// The router serving `POST {path}`.
pub fn router(path: &str, secret: Secret, slot: WebhookSlot) -> Router {
    Router::new()
        .route(path, post(receive))
        .with_state(WebhookState { secret, slot })
}

async fn receive(State(state): State<WebhookState>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let presented = headers
        .get(SECRET_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !constant_time_eq(presented, state.secret.expose().as_bytes()) {
        return StatusCode::UNAUTHORIZED;
    }
    let Some((intake, ctx)) = state.slot.get() else {
        // Not running (starting or stopping): Telegram will deliver it again.
        return StatusCode::SERVICE_UNAVAILABLE;
    };
    ctx.progress.report();
    let update: Update = match serde_json::from_slice(&body) {
        Ok(update) => update,
        // Kept by the core before Telegram is told it arrived (an error status: it retries).
        Err(e) => {
            let raw: Value = serde_json::from_slice(&body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
            let id = raw["update_id"].as_i64().unwrap_or(-1);
            let letter = crate::dead_letter::dead_letter(id, &raw, &e);
            return match ctx.dead_letter(letter).await {
                RecordOutcome::Failed => StatusCode::INTERNAL_SERVER_ERROR,
                _ => StatusCode::OK,
            };
        }
    };
    let (done, answer) = Completion::oneshot(update.update_id);
    intake.submit(update, done).await;
    match answer.await {
        Ok(Disposition::Acknowledge) => StatusCode::OK,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
