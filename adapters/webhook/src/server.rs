//! `POST /webhooks/<route>`: one request, checked in the order that keeps work off the
//! unauthenticated path — route, size, signature, rate — then turned into one journaled
//! event. The sender hears `202` only after the event is recorded (so a crash after that
//! still runs it), `200 duplicate` for a delivery id already recorded, and an error with
//! nothing recorded otherwise: 404 unknown route, 403 disabled route, 413 too large, 401
//! bad signature, 429 with `Retry-After`, 400 unreadable body, 422 a destination the payload
//! did not fill, 503 with `Retry-After` when the journal could not take it.

use std::collections::HashSet;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use hermes_adapter::{
    AdapterContext, ChatType, DeadLetter, MessageEvent, RecordOutcome, ReplyTarget, SessionSource,
    WEBHOOK_PLATFORM,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::github::Thread;
use crate::route::{Deliver, Route};
use crate::settings::Settings;
use crate::signature::{self, Scheme};
use crate::subscriptions::RouteTable;
use crate::{filters, render};

/// What the handlers share.
pub struct Shared {
    pub settings: Settings,
    pub routes: RouteTable,
    limiter: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
    warned_v1: Mutex<HashSet<String>>,
    pub ctx: AdapterContext,
}

impl Shared {
    pub fn new(settings: Settings, ctx: AdapterContext) -> Self {
        let per_minute = NonZeroU32::new(settings.rate_limit).unwrap_or(NonZeroU32::MIN);
        Self {
            routes: RouteTable::new(&settings),
            limiter: RateLimiter::hashmap(Quota::per_minute(per_minute)),
            clock: DefaultClock::default(),
            warned_v1: Mutex::new(HashSet::new()),
            settings,
            ctx,
        }
    }
}

pub fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new()
        .route("/health", get(health))
        .route("/webhooks/{route}", post(receive))
        .with_state(shared)
}

async fn health() -> Json<Value> {
    Json(json!({"status": "ok", "platform": WEBHOOK_PLATFORM}))
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({"error": message}))).into_response()
}

async fn receive(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let settings = &shared.settings;
    let Some(route) = shared.routes.get(&name, settings) else {
        return error(StatusCode::NOT_FOUND, &format!("unknown route: {name}"));
    };
    if !route.enabled {
        return error(StatusCode::FORBIDDEN, &format!("route disabled: {name}"));
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > settings.max_body_bytes as u64) {
        return error(StatusCode::PAYLOAD_TOO_LARGE, "payload too large");
    }
    // The cap holds for chunked bodies too, whatever Content-Length said.
    let Ok(body) = axum::body::to_bytes(body, settings.max_body_bytes).await else {
        return error(StatusCode::PAYLOAD_TOO_LARGE, "payload too large");
    };
    if !route.insecure() {
        match signature::verify(&headers, &body, route.secret.expose(), unix_now()) {
            Ok(Scheme::GenericV1) => warn_v1_once(&shared, &name),
            Ok(_) => {}
            Err(refusal) => {
                tracing::warn!(route = %name, reason = %refusal, "webhook refused: bad signature");
                return error(StatusCode::UNAUTHORIZED, "invalid signature");
            }
        }
    }
    if let Err(later) = shared.limiter.check_key(&name) {
        let wait = later.wait_time_from(shared.clock.now());
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        tracing::info!(route = %name, retry_after = seconds, "webhook rate limit reached");
        let mut response = error(StatusCode::TOO_MANY_REQUESTS, "rate limit exceeded");
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, seconds.max(1).into());
        return response;
    }
    let Some(payload) = parse_payload(&body) else {
        return keep_undecodable(&shared, &name, &headers, &body).await;
    };
    let event_type = event_type(&headers, &payload);
    if !route.events.is_empty() && !route.events.contains(&event_type) {
        tracing::debug!(route = %name, event = %event_type, "webhook event not taken by this route");
        return (
            StatusCode::OK,
            Json(json!({"status": "ignored", "event": event_type})),
        )
            .into_response();
    }
    // Filters are looked at only on routes that have them (the headers copied once then).
    if !route.filters.is_empty() {
        let header_map = headers_json(&headers);
        let subject = filters::Subject {
            payload: &payload,
            event_type: &event_type,
            headers: &header_map,
            home: &settings.home,
        };
        if !filters::all_match(&route.filters, &subject) {
            tracing::info!(route = %name, event = %event_type, "webhook event filtered out");
            return (
                StatusCode::OK,
                Json(json!({"status": "ignored", "reason": "filter", "route": name})),
            )
                .into_response();
        }
    }
    let target = match reply_target(&route, &payload, settings) {
        Ok(target) => target,
        Err(message) => {
            tracing::warn!(route = %name, problem = %message, "webhook event has no destination");
            return error(StatusCode::UNPROCESSABLE_ENTITY, &message);
        }
    };
    let prompt = prompt(&route, &payload, &event_type, settings);
    let delivery = delivery_id(&headers, &name, &body);
    let event = event(&name, &delivery, prompt, target);
    tracing::info!(route = %name, event = %event_type, delivery = %delivery, "webhook event received");
    match shared.ctx.deliver(event).await {
        RecordOutcome::Recorded => (
            StatusCode::ACCEPTED,
            Json(
                json!({"status": "accepted", "route": name, "event": event_type,
                "delivery_id": delivery}),
            ),
        )
            .into_response(),
        RecordOutcome::Duplicate => (
            StatusCode::OK,
            Json(json!({"status": "duplicate", "delivery_id": delivery})),
        )
            .into_response(),
        RecordOutcome::Refused => error(StatusCode::FORBIDDEN, "refused"),
        RecordOutcome::Failed => not_recorded(),
    }
}

/// A signed body that is neither JSON nor form data: kept as a dead letter for the operator
/// (it came from the configured sender, so it is not noise) and refused with 400, which
/// tells the sender not to retry; when it cannot be kept, 503 asks for it again.
async fn keep_undecodable(
    shared: &Shared,
    route: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let letter = DeadLetter {
        platform: WEBHOOK_PLATFORM.to_owned(),
        item_id: format!("{route}:{}", delivery_id(headers, route, body)),
        source: None,
        raw: String::from_utf8_lossy(body).into_owned(),
        error: "the body is neither JSON nor form data".to_owned(),
    };
    match shared.ctx.dead_letter(letter).await {
        RecordOutcome::Failed => not_recorded(),
        _ => error(
            StatusCode::BAD_REQUEST,
            "the body is neither JSON nor form data",
        ),
    }
}

fn not_recorded() -> Response {
    let mut response = error(
        StatusCode::SERVICE_UNAVAILABLE,
        "not recorded; send it again later",
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, 5u64.into());
    response
}

fn warn_v1_once(shared: &Shared, route: &str) {
    let mut warned = shared.warned_v1.lock().unwrap_or_else(|p| p.into_inner());
    if warned.insert(route.to_owned()) {
        tracing::warn!(
            route,
            "webhook sender uses the body-only X-Webhook-Signature, which a captured request can \
             replay; have it send X-Webhook-Signature-V2 with X-Webhook-Timestamp"
        );
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// JSON, else form fields as an object of strings.
fn parse_payload(body: &[u8]) -> Option<Value> {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        return Some(value);
    }
    let text = std::str::from_utf8(body).ok()?;
    let fields: serde_json::Map<String, Value> = url::form_urlencoded::parse(text.as_bytes())
        .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
        .collect();
    (!fields.is_empty()).then_some(Value::Object(fields))
}

fn event_type(headers: &HeaderMap, payload: &Value) -> String {
    ["x-github-event", "x-gitlab-event"]
        .iter()
        .find_map(|name| headers.get(*name)?.to_str().ok().map(str::to_owned))
        .or_else(|| {
            ["event_type", "type"]
                .iter()
                .find_map(|key| payload.get(*key)?.as_str().map(str::to_owned))
        })
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn headers_json(headers: &HeaderMap) -> Value {
    Value::Object(
        headers
            .iter()
            .filter_map(|(name, value)| {
                Some((
                    name.as_str().to_owned(),
                    Value::String(value.to_str().ok()?.to_owned()),
                ))
            })
            .collect(),
    )
}

/// The sender's id for this delivery, so a redelivery is recognised; without one, a hash of
/// the route, the signature headers and the body (a balancer's retry of the same request).
fn delivery_id(headers: &HeaderMap, route: &str, body: &[u8]) -> String {
    let given = [
        "x-github-delivery",
        "svix-id",
        "x-gitlab-event-uuid",
        "x-request-id",
    ]
    .iter()
    .find_map(|name| headers.get(*name)?.to_str().ok())
    .map(str::trim)
    .filter(|id| !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_graphic()));
    if let Some(id) = given {
        return id.to_owned();
    }
    let mut hash = Sha256::new();
    hash.update(route.as_bytes());
    for name in [
        "x-hub-signature-256",
        "x-webhook-signature-v2",
        "x-webhook-timestamp",
        "x-webhook-signature",
        "svix-signature",
    ] {
        if let Some(value) = headers.get(name) {
            hash.update(name.as_bytes());
            hash.update(value.as_bytes());
        }
    }
    hash.update(body);
    format!("sha256-{}", &hex::encode(hash.finalize())[..32])
}

fn rendered(route: &Route, key: &str, payload: &Value) -> Option<String> {
    let text = match route.deliver_extra.get(key)? {
        Value::String(s) => render::fill(s, payload, ""),
        Value::Null => return None,
        other => other.to_string(),
    };
    let text = text.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// Where this event's answer goes (see [`ReplyTarget`]); `None` is the log.
fn reply_target(
    route: &Route,
    payload: &Value,
    settings: &Settings,
) -> Result<Option<ReplyTarget>, String> {
    let target = match &route.deliver {
        Deliver::Log => return Ok(None),
        Deliver::GithubComment => {
            let repo = rendered(route, "repo", payload).unwrap_or_default();
            let number = rendered(route, "pr_number", payload).unwrap_or_default();
            let thread = Thread::new(&repo, &number).ok_or_else(|| {
                "deliver_extra.repo and pr_number did not fill in as owner/name and a positive \
                 number from this payload"
                    .to_owned()
            })?;
            ReplyTarget {
                platform: WEBHOOK_PLATFORM.to_owned(),
                chat_id: thread.chat_id(),
                thread_id: None,
                verbatim: false,
            }
        }
        Deliver::Platform(platform) => {
            let home = settings.targets.get(platform).cloned().unwrap_or_default();
            let thread = rendered(route, "message_thread_id", payload)
                .or_else(|| rendered(route, "thread_id", payload));
            let (chat_id, thread_id) = match rendered(route, "chat_id", payload) {
                Some(chat) => (chat, thread),
                None => (
                    home.home_chat
                        .ok_or_else(|| format!("no chat_id and {platform} has no home channel"))?,
                    thread.or(home.home_thread),
                ),
            };
            ReplyTarget {
                platform: platform.clone(),
                chat_id,
                thread_id,
                verbatim: false,
            }
        }
    };
    Ok(Some(ReplyTarget {
        verbatim: route.deliver_only,
        ..target
    }))
}

fn prompt(route: &Route, payload: &Value, event_type: &str, settings: &Settings) -> String {
    let prompt = render::prompt(&route.prompt, payload, event_type, &route.name);
    if route.deliver_only {
        return prompt;
    }
    for skill in &route.skills {
        match settings
            .skill_message
            .as_ref()
            .and_then(|load| load(skill, &prompt))
        {
            Some(message) => return message,
            None => {
                tracing::warn!(route = %route.name, skill = %skill, "webhook route names a skill the home does not have")
            }
        }
    }
    prompt
}

fn event(route: &str, delivery: &str, text: String, target: Option<ReplyTarget>) -> MessageEvent {
    let chat_id = format!("webhook:{route}:{delivery}");
    let source = SessionSource {
        chat_name: Some(format!("webhook/{route}")),
        chat_type: ChatType::Dm,
        user_name: Some(route.to_owned()),
        ..SessionSource::dm(WEBHOOK_PLATFORM, &chat_id, &format!("webhook:{route}"))
    };
    let mut event = MessageEvent::text(&format!("{route}:{delivery}"), source, &text);
    event.message_id = Some(delivery.to_owned());
    event.timestamp = unix_now() as f64;
    event.reply_target = target;
    event
}
