//! An MCP server's tool as a registry entry: the handler sends `tools/call` on the server's
//! current session, bounded by the server's `timeout`.
//!
//! A call that is abandoned — the timeout passes, or the turn is interrupted and the agent
//! loop drops the call — makes rmcp send `notifications/cancelled` for it, so the server can
//! stop the work. A call whose server is down, or whose session ends under it (a stdio
//! server that died), fails at once with a tool error the model can read; the next call
//! uses the session the supervisor opened since.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::service::Peer;
use serde_json::{Map, Value, json};

use super::{result, schema};
use crate::tools::registry::{MCP_TOOLSET_PREFIX, ToolEntry, handler};
use crate::tools::{ToolCtx, ToolError};

/// The session a server's tools call through; `None` while it is not connected.
#[derive(Debug, Clone, Default)]
pub struct PeerSlot(Arc<RwLock<Option<Peer<RoleClient>>>>);

impl PeerSlot {
    pub fn set(&self, peer: Option<Peer<RoleClient>>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = peer;
    }

    pub fn get(&self) -> Option<Peer<RoleClient>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[derive(Debug, Clone)]
struct Target {
    server: String,
    tool: String,
    peer: PeerSlot,
    timeout: Duration,
}

/// The registry entry for `tool` of `server`.
pub fn entry(server: &str, tool: &Tool, peer: PeerSlot, timeout: Duration) -> ToolEntry {
    let description = tool
        .description
        .as_deref()
        .filter(|d| !d.trim().is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| format!("The '{}' tool of the MCP server '{server}'.", tool.name));
    let model_schema = json!({
        "description": description,
        "parameters": schema::normalize(&tool.input_schema),
    });
    let target = Target {
        server: server.to_owned(),
        tool: tool.name.to_string(),
        peer,
        timeout,
    };
    ToolEntry::new(
        &schema::tool_name(server, &tool.name),
        &format!("{MCP_TOOLSET_PREFIX}{server}"),
        model_schema,
        handler(move |ctx: ToolCtx, args: Value| call(target.clone(), ctx, args)),
    )
    .with_emoji("🔌")
}

async fn call(target: Target, ctx: ToolCtx, args: Value) -> Result<String, ToolError> {
    let Some(peer) = target.peer.get() else {
        return Err(ToolError::Failed(format!(
            "the MCP server '{}' is not connected; it is being retried",
            target.server
        )));
    };
    let arguments = match args {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let params = CallToolRequestParams::new(target.tool.clone()).with_arguments(arguments);
    let answer = tokio::time::timeout(target.timeout, peer.call_tool(params)).await;
    let result = match answer {
        Err(_) => {
            return Err(ToolError::Failed(format!(
                "the MCP tool '{}' of '{}' did not answer within {:.0?}",
                target.tool, target.server, target.timeout
            )));
        }
        Ok(Err(error)) => {
            return Err(ToolError::Failed(format!(
                "the MCP server '{}' failed the call: {error}",
                target.server
            )));
        }
        Ok(Ok(result)) => result,
    };
    let wire = serde_json::to_value(&result)
        .map_err(|e| ToolError::Failed(format!("unreadable MCP result: {e}")))?;
    let media_dir = ctx.home.path().join("cache").join("mcp");
    Ok(result::render(&target.server, &wire, &media_dir))
}
