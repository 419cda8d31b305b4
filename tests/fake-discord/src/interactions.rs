//! Interaction responses as Discord enforces them
//! (<https://discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction>):
//! the initial callback must arrive within 3 seconds of the interaction, or the token is
//! invalid and Discord answers 404 "Unknown interaction" (JSON code 10062); an interaction
//! is acknowledged once (a second callback gets 400, code 40060); after that, the token
//! edits or deletes the original response through `/webhooks/{app}/{token}/messages/@original`
//! for 15 minutes. For a component's deferred update (type 6), `@original` is the message
//! the component is on.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use crate::rest::{error, no_content, ok};
use crate::state::State;

/// Discord's deadline for the initial response.
pub const CALLBACK_DEADLINE: Duration = Duration::from_secs(3);
/// How long the token works for follow-ups.
const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// What the fake remembers of a dispatched interaction.
#[derive(Debug, Clone)]
pub struct InteractionRecord {
    pub channel_id: String,
    /// The message a clicked component is on.
    pub message_id: Option<String>,
    pub token: String,
    pub created: Instant,
    /// The initial response's type, once acknowledged in time.
    pub acknowledged: Option<u64>,
    /// A callback that came too late (after [`CALLBACK_DEADLINE`]).
    pub late_callbacks: u32,
}

impl InteractionRecord {
    /// A just-dispatched interaction `id` (its token is `itoken-{id}`).
    pub fn new(channel_id: &str, message_id: Option<&str>, id: &str) -> Self {
        Self {
            channel_id: channel_id.to_owned(),
            message_id: message_id.map(str::to_owned),
            token: format!("itoken-{id}"),
            created: Instant::now(),
            acknowledged: None,
            late_callbacks: 0,
        }
    }
}

fn unknown_interaction() -> (StatusCode, Option<Response>) {
    error(StatusCode::NOT_FOUND, 10062, "Unknown interaction")
}

/// `POST /interactions/{id}/{token}/callback`.
pub fn callback(
    state: &mut State,
    id: &str,
    token: &str,
    body: &Value,
) -> (StatusCode, Option<Response>) {
    let Some(record) = state.interactions.get_mut(id).filter(|r| r.token == token) else {
        return unknown_interaction();
    };
    if record.created.elapsed() > CALLBACK_DEADLINE {
        record.late_callbacks += 1;
        return unknown_interaction();
    }
    if record.acknowledged.is_some() {
        return error(
            StatusCode::BAD_REQUEST,
            40060,
            "Interaction has already been acknowledged.",
        );
    }
    let kind = body["type"].as_u64().unwrap_or(0);
    record.acknowledged = Some(kind);
    // UPDATE_MESSAGE (7) edits the message the component was on.
    if kind == 7 {
        let record = record.clone();
        edit_component_message(state, &record, &body["data"]);
    }
    no_content()
}

fn edit_component_message(state: &mut State, record: &InteractionRecord, data: &Value) -> bool {
    let Some(message_id) = &record.message_id else {
        return false;
    };
    let Some(message) = state.find_message_mut(&record.channel_id, message_id) else {
        return false;
    };
    for field in ["content", "components"] {
        if let Some(value) = data.get(field) {
            message[field] = value.clone();
        }
    }
    true
}

/// The acknowledged interaction whose token is `token`, while the token lives.
fn by_token<'a>(state: &'a State, token: &str) -> Option<&'a InteractionRecord> {
    state.interactions.values().find(|r| {
        r.token == token && r.acknowledged.is_some() && r.created.elapsed() < TOKEN_LIFETIME
    })
}

/// `PATCH /webhooks/{app}/{token}/messages/@original`.
pub fn edit_original(
    state: &mut State,
    token: &str,
    body: &Value,
) -> (StatusCode, Option<Response>) {
    let Some(record) = by_token(state, token).cloned() else {
        return unknown_interaction();
    };
    if !edit_component_message(state, &record, body) {
        return error(StatusCode::NOT_FOUND, 10008, "Unknown Message");
    }
    let message_id = record.message_id.clone().unwrap_or_default();
    match state.find_message_mut(&record.channel_id, &message_id) {
        Some(message) => ok(message.clone()),
        None => error(StatusCode::NOT_FOUND, 10008, "Unknown Message"),
    }
}

/// `DELETE /webhooks/{app}/{token}/messages/@original`.
pub fn delete_original(state: &State, token: &str) -> (StatusCode, Option<Response>) {
    match by_token(state, token) {
        Some(_) => no_content(),
        None => unknown_interaction(),
    }
}
