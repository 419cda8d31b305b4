//! `GET /v1/skills`: the skills the API's agent can load, as Hermes 0.19's API server lists
//! them (`{"object": "list", "data": [{name, description, category}]}`, disabled ones left
//! out, sorted by category then name). Hermes's API server runs no slash commands — a
//! `/skill-name` message goes to the model as written — so this listing is how an HTTP
//! client learns the skills; the agent loads one with `skill_view`.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::ApiState;
use super::errors::check_auth;
use crate::gateway::router::API_PLATFORM;

/// Hermes's cap on a listed description, in characters.
const MAX_DESCRIPTION_CHARS: usize = 1024;

pub async fn list(State(state): State<ApiState>, headers: HeaderMap) -> Response {
    if let Err(denied) = check_auth(&headers, &state.key) {
        return *denied;
    }
    let router = state.router.clone();
    // Discovery walks the skill directories: off the async threads.
    let skills = tokio::task::spawn_blocking(move || router.platform_skills(API_PLATFORM))
        .await
        .unwrap_or_default();
    let mut data: Vec<(String, String, Value)> = skills
        .iter()
        .map(|skill| {
            // Hermes names a category only for `<category>/<skill>/SKILL.md`.
            let dir_name = skill.dir.file_name().and_then(|n| n.to_str());
            let category = skill
                .category
                .split('/')
                .next()
                .filter(|c| Some(*c) != dir_name && *c != "general" && !c.is_empty());
            let entry = json!({
                "name": skill.name,
                "description": capped(&skill.description),
                "category": category,
            });
            (
                category.unwrap_or_default().to_owned(),
                skill.name.clone(),
                entry,
            )
        })
        .collect();
    data.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    let data: Vec<Value> = data.into_iter().map(|(_, _, entry)| entry).collect();
    Json(json!({"object": "list", "data": data})).into_response()
}

fn capped(description: &str) -> String {
    if description.chars().count() <= MAX_DESCRIPTION_CHARS {
        return description.to_owned();
    }
    let kept: String = description
        .chars()
        .take(MAX_DESCRIPTION_CHARS - 3)
        .collect();
    format!("{kept}...")
}
