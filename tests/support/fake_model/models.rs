//! `GET /v1/models`, the models listing, in the two documented shapes: OpenAI's
//! (https://platform.openai.com/docs/api-reference/models/list: `{"object":"list","data":
//! [{"id","object":"model","created","owned_by"}]}`, one page) and Anthropic's
//! (https://docs.anthropic.com/en/api/models-list: `{"data":[{"type":"model","id",
//! "display_name","created_at"}],"has_more","first_id","last_id"}`, pages of `limit` —
//! default 20, 1 to 1000 — continued with `after_id`). A request carrying
//! `anthropic-version` (which Anthropic requires on every call,
//! https://docs.anthropic.com/en/api/versioning) gets Anthropic's shape. With no listing
//! set the server answers 404, as servers without a models endpoint do.

use std::collections::HashMap;

use serde_json::{Value, json};

/// The answer to a listing request: status and JSON body.
pub fn answer(
    models: Option<&[String]>,
    anthropic: bool,
    query: &HashMap<String, String>,
) -> (u16, Value) {
    let Some(models) = models else {
        let message = "fake model: no models listing here";
        let body = if anthropic {
            super::anthropic::error_body(404, message)
        } else {
            super::chat::error_body(404, message)
        };
        return (404, body);
    };
    if !anthropic {
        let data: Vec<Value> = models
            .iter()
            .map(|id| json!({"id": id, "object": "model", "created": 1_700_000_000, "owned_by": "fake"}))
            .collect();
        return (200, json!({"object": "list", "data": data}));
    }
    let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
        None => 20,
        Some(Ok(limit)) if (1..=1000).contains(&limit) => limit,
        Some(_) => {
            return (
                400,
                super::anthropic::error_body(400, "limit: must be 1 to 1000"),
            );
        }
    };
    let start = match query.get("after_id") {
        Some(after) => match models.iter().position(|m| m == after) {
            Some(index) => index + 1,
            None => {
                return (
                    400,
                    super::anthropic::error_body(400, "after_id: unknown id"),
                );
            }
        },
        None => 0,
    };
    let page: Vec<&String> = models.iter().skip(start).take(limit).collect();
    let data: Vec<Value> = page
        .iter()
        .map(|id| json!({"type": "model", "id": id, "display_name": id, "created_at": "2025-01-01T00:00:00Z"}))
        .collect();
    (
        200,
        json!({
            "data": data,
            "has_more": start + page.len() < models.len(),
            "first_id": page.first(),
            "last_id": page.last(),
        }),
    )
}
