//! One-off connections for the command line (`hermesd mcp list`, `hermesd doctor`): open a
//! session with each configured server (in parallel, each within its `connect_timeout`),
//! list its tools, close it.

use std::collections::BTreeMap;
use std::sync::Arc;

use hermes_adapter::net::Net;
use serde::Serialize;
use tokio::sync::Notify;

use super::connect::{Listener, connect};
use super::schema::tool_name;
use super::status::{ServerState, ServerStatus};
use crate::config::McpServerConfig;

/// What a probe found.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeResult {
    #[serde(flatten)]
    pub status: ServerStatus,
    /// The server's own name for each tool the filters select (registry names are in
    /// `status.tools`).
    pub server_tools: Vec<String>,
}

/// Connects to `config` once and lists its tools.
pub async fn probe(
    name: &str,
    config: &McpServerConfig,
    net: &Net,
    env: &BTreeMap<String, String>,
) -> ProbeResult {
    let mut status = ServerStatus::new(config);
    if status.state != ServerState::Connecting {
        return ProbeResult {
            status,
            server_tools: Vec::new(),
        };
    }
    // A probe only lists tools: it offers no sampling.
    let listener = Listener {
        tools_changed: Arc::new(Notify::new()),
        sampler: None,
    };
    let mut server_tools = Vec::new();
    match connect(name, config, net, env, listener).await {
        Err(error) => {
            status.state = ServerState::Failed;
            status.error = Some(error.to_string());
            status.failures = 1;
        }
        Ok(session) => {
            match session.peer().list_all_tools().await {
                Ok(tools) => {
                    status.state = ServerState::Connected;
                    for tool in tools.iter().filter(|t| config.selects(&t.name)) {
                        server_tools.push(tool.name.to_string());
                        status.tools.push(tool_name(name, &tool.name));
                    }
                    status.tools.sort();
                }
                Err(error) => {
                    status.state = ServerState::Failed;
                    status.error = Some(format!("tools/list failed: {error}"));
                }
            }
            let _ = session.cancel().await;
        }
    }
    ProbeResult {
        status,
        server_tools,
    }
}

/// Probes every server at once.
pub async fn probe_all(
    servers: &BTreeMap<String, McpServerConfig>,
    net: &Net,
    env: &BTreeMap<String, String>,
) -> BTreeMap<String, ProbeResult> {
    let probes = servers
        .iter()
        .map(|(name, config)| async move { (name.clone(), probe(name, config, net, env).await) });
    futures_util::future::join_all(probes)
        .await
        .into_iter()
        .collect()
}
