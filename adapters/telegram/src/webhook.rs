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

/// The ports `setWebhook` accepts (https://core.telegram.org/bots/api#setwebhook: "Ports
/// currently supported for webhooks: 443, 80, 88, 8443").
pub const WEBHOOK_PORTS: [u16; 4] = [443, 80, 88, 8443];
/// `secret_token`'s length bounds (https://core.telegram.org/bots/api#setwebhook).
const SECRET_LEN: std::ops::RangeInclusive<usize> = 1..=256;

/// What `setWebhook` would refuse with a 400, found before start-up instead of in a restart
/// loop: the URL must be HTTPS on a supported port, and the secret 1–256 characters of
/// `A-Z a-z 0-9 _ -`. The messages name the settings, never the secret's value.
pub fn check_set_webhook_rules(url: &str, secret: &str) -> Vec<String> {
    let mut errors = Vec::new();
    match reqwest::Url::parse(url) {
        Ok(parsed) if parsed.scheme() != "https" => errors.push(format!(
            "telegram: webhook_url / TELEGRAM_WEBHOOK_URL must be an https:// URL (Telegram only delivers webhooks over HTTPS), not {url:?}"
        )),
        Ok(parsed) => {
            let port = parsed.port_or_known_default().unwrap_or(443);
            if !WEBHOOK_PORTS.contains(&port) {
                errors.push(format!(
                    "telegram: webhook_url / TELEGRAM_WEBHOOK_URL uses port {port}; Telegram delivers webhooks only to ports 443, 80, 88 or 8443 (put a reverse proxy in front of TELEGRAM_WEBHOOK_PORT)"
                ));
            }
        }
        Err(e) => errors.push(format!(
            "telegram: webhook_url / TELEGRAM_WEBHOOK_URL is not a URL ({e}): {url:?}"
        )),
    }
    let well_formed = SECRET_LEN.contains(&secret.chars().count())
        && secret
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !well_formed {
        errors.push(format!(
            "telegram: webhook_secret / TELEGRAM_WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ and - (it has {} characters; Telegram refuses any other secret_token)",
            secret.chars().count()
        ));
    }
    errors
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::check_set_webhook_rules;

    #[test]
    fn set_webhook_rules_follow_the_bot_api() {
        let ok = "https://bot.example.com/telegram/hook";
        assert!(check_set_webhook_rules(ok, "s3cret_Hook-1").is_empty());
        assert!(check_set_webhook_rules("https://b.example:8443/h", &"a".repeat(256)).is_empty());
        let cases = [
            ("http://bot.example.com/h", "ok", "https://"),
            ("https://bot.example.com:8080/h", "ok", "port 8080"),
            (ok, "has space", "TELEGRAM_WEBHOOK_SECRET"),
            (ok, "dot.not.allowed", "TELEGRAM_WEBHOOK_SECRET"),
        ];
        for (url, secret, needle) in cases {
            let errors = check_set_webhook_rules(url, secret).join("\n");
            assert!(errors.contains(needle), "{url} {secret}: {errors}");
            assert!(
                !errors.contains(secret) || secret == "ok",
                "the secret is not echoed"
            );
        }
        let long = check_set_webhook_rules(ok, &"a".repeat(257)).join("\n");
        assert!(long.contains("257 characters"), "{long}");
    }
}
