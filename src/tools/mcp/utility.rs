//! The helper tools Hermes adds for a server's resources and prompts:
//! `mcp__<server>__list_resources`, `…__read_resource`, `…__list_prompts` and
//! `…__get_prompt`, registered only when the server's `initialize` answer advertises that
//! capability and `tools.resources` / `tools.prompts` do not turn them off.
//!
//! Their answers keep Hermes's shapes (`{"resources": [...]}`, `{"result": text}`,
//! `{"prompts": [...]}`, `{"messages": [...]}`), built from the wire JSON of each result.

use std::time::Duration;

use rmcp::model::{GetPromptRequestParams, GetPromptResponse, ReadResourceRequestParams};
use serde_json::{Map, Value, json};

use super::call::PeerSlot;
use super::schema::tool_name;
use crate::tools::registry::{MCP_TOOLSET_PREFIX, ToolEntry, handler};
use crate::tools::{ToolCtx, ToolError};

#[derive(Debug, Clone, Copy)]
enum Kind {
    ListResources,
    ReadResource,
    ListPrompts,
    GetPrompt,
}

/// The helper tools for `server`, given what it advertises and what the config allows.
pub fn entries(
    server: &str,
    peer: &PeerSlot,
    timeout: Duration,
    resources: bool,
    prompts: bool,
) -> Vec<ToolEntry> {
    let Some(info) = peer.get().and_then(|p| p.peer_info()) else {
        return Vec::new();
    };
    let mut kinds = Vec::new();
    if resources && info.capabilities.resources.is_some() {
        kinds.extend([Kind::ListResources, Kind::ReadResource]);
    }
    if prompts && info.capabilities.prompts.is_some() {
        kinds.extend([Kind::ListPrompts, Kind::GetPrompt]);
    }
    kinds
        .into_iter()
        .map(|kind| entry(server, kind, peer.clone(), timeout))
        .collect()
}

fn entry(server: &str, kind: Kind, peer: PeerSlot, timeout: Duration) -> ToolEntry {
    let (suffix, description, parameters) = match kind {
        Kind::ListResources => (
            "list_resources",
            format!("Lists the resources the MCP server '{server}' offers."),
            json!({"type": "object", "properties": {}}),
        ),
        Kind::ReadResource => (
            "read_resource",
            format!("Reads one resource of the MCP server '{server}' by its URI."),
            json!({"type": "object", "properties": {
                "uri": {"type": "string", "description": "The resource's URI"}},
                "required": ["uri"]}),
        ),
        Kind::ListPrompts => (
            "list_prompts",
            format!("Lists the prompt templates the MCP server '{server}' offers."),
            json!({"type": "object", "properties": {}}),
        ),
        Kind::GetPrompt => (
            "get_prompt",
            format!("Fetches one prompt template of the MCP server '{server}', filled in."),
            json!({"type": "object", "properties": {
                "name": {"type": "string", "description": "The prompt's name"},
                "arguments": {"type": "object", "description": "Values for its arguments",
                              "properties": {}, "additionalProperties": true}},
                "required": ["name"]}),
        ),
    };
    let server_name = server.to_owned();
    ToolEntry::new(
        &tool_name(server, suffix),
        &format!("{MCP_TOOLSET_PREFIX}{server}"),
        json!({"description": description, "parameters": parameters}),
        handler(move |_ctx: ToolCtx, args: Value| {
            let (server, peer) = (server_name.clone(), peer.clone());
            async move {
                match tokio::time::timeout(timeout, run(kind, &server, &peer, args)).await {
                    Ok(result) => result,
                    Err(_) => Err(ToolError::Failed(format!(
                        "the MCP server '{server}' did not answer within {timeout:.0?}"
                    ))),
                }
            }
        }),
    )
    .with_emoji("🔌")
}

async fn run(kind: Kind, server: &str, peer: &PeerSlot, args: Value) -> Result<String, ToolError> {
    let Some(peer) = peer.get() else {
        return Err(ToolError::Failed(format!(
            "the MCP server '{server}' is not connected; it is being retried"
        )));
    };
    let failed =
        |e: rmcp::ServiceError| ToolError::Failed(format!("the MCP server '{server}': {e}"));
    let text_arg = |name: &str| {
        args.get(name)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| ToolError::InvalidArguments(format!("'{name}' is required")))
    };
    let answer = match kind {
        Kind::ListResources => {
            let listed = wire(&peer.list_all_resources().await.map_err(failed)?);
            let keep = ["uri", "name", "description", "mimeType"];
            json!({"resources": pick(&listed, &keep)})
        }
        Kind::ReadResource => {
            let params = ReadResourceRequestParams::new(text_arg("uri")?);
            let read = wire(&peer.read_resource(params).await.map_err(failed)?);
            let parts: Vec<String> = read["contents"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|item| match item.get("text").and_then(Value::as_str) {
                    Some(text) => text.to_owned(),
                    None => format!(
                        "[binary content of {} ({})]",
                        item["uri"].as_str().unwrap_or("?"),
                        item["mimeType"].as_str().unwrap_or("unknown type")
                    ),
                })
                .collect();
            json!({"result": parts.join("\n")})
        }
        Kind::ListPrompts => {
            let listed = wire(&peer.list_all_prompts().await.map_err(failed)?);
            json!({"prompts": pick(&listed, &["name", "description", "arguments"])})
        }
        Kind::GetPrompt => {
            let mut params = GetPromptRequestParams::new(text_arg("name")?);
            if let Some(Value::Object(values)) = args.get("arguments") {
                let values: Map<String, Value> = values
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str().map_or_else(|| v.to_string().into(), Value::from),
                        )
                    })
                    .collect();
                params.arguments = Some(values);
            }
            let prompt = match peer.get_prompt_once(params).await.map_err(failed)? {
                GetPromptResponse::Complete(prompt) => wire(&prompt),
                _ => {
                    return Err(ToolError::Failed(format!(
                        "the prompt of '{server}' asks for input hermesd cannot give"
                    )));
                }
            };
            let messages: Vec<Value> = prompt["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|m| {
                    let content = &m["content"];
                    let text = content
                        .get("text")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .unwrap_or_else(|| content.to_string());
                    json!({"role": m["role"], "content": text})
                })
                .collect();
            let mut answer = json!({"messages": messages});
            if let Some(description) = prompt.get("description").filter(|d| !d.is_null()) {
                answer["description"] = description.clone();
            }
            answer
        }
    };
    Ok(answer.to_string())
}

fn wire(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Each item of a JSON list with only the `keep` fields it has.
fn pick(list: &Value, keep: &[&str]) -> Vec<Value> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|item| {
            let kept: Map<String, Value> = keep
                .iter()
                .filter_map(|k| {
                    item.get(*k)
                        .filter(|v| !v.is_null())
                        .map(|v| ((*k).to_owned(), v.clone()))
                })
                .collect();
            Value::Object(kept)
        })
        .collect()
}
