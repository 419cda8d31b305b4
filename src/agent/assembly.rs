//! The one place an agent is put together with the MCP servers, for `hermesd chat` and the
//! daemon alike: the servers are started from the configuration, the agent's tool registry
//! reads their tools beside the built-ins, and their sampling requests go to the agent's
//! model (or are refused while no model is configured).

use std::sync::Arc;

use hermes_adapter::net::Net;

use super::deps::{AgentDeps, UserPrompts};
use super::provider::{ModelClient, ProviderError};
use crate::config::{Config, LoadedConfig};
use crate::home::HermesHome;
use crate::state::Store;
use crate::tools::mcp::McpHub;

/// The network MCP servers are reached through: the configured proxies, or direct
/// connections when those cannot be set up (said once in the log).
pub fn mcp_net(config: &Config) -> Net {
    Net::new(&config.network).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "MCP servers use direct connections");
        Net::direct()
    })
}

/// A hub for the configured MCP servers; they connect in the background.
pub fn start_mcp(loaded: &LoadedConfig) -> McpHub {
    let mcp = McpHub::new();
    mcp.apply(
        &loaded.config.mcp_servers,
        &mcp_net(&loaded.config),
        &loaded.env,
    );
    mcp
}

/// The agent's dependencies with `mcp`'s tools, and `mcp`'s sampling pointed at the agent's
/// model. `client` is an explicit model client (tests, benchmarks); `None` builds one from
/// the configuration, which fails with one clear line when no provider is configured (then
/// sampling is refused until a reload brings one).
pub fn assemble(
    home: &HermesHome,
    loaded: &LoadedConfig,
    store: Store,
    prompts: UserPrompts,
    client: Option<ModelClient>,
    mcp: &McpHub,
) -> Result<Arc<AgentDeps>, ProviderError> {
    let deps = match client {
        Some(client) => Ok(AgentDeps::with_client(home, loaded, store, prompts, client)),
        None => AgentDeps::build(home, loaded, store, prompts),
    }
    .map(|deps| Arc::new(deps.with_tool_overlay(mcp.overlay())));
    connect_sampling(mcp, deps.as_deref().ok());
    deps
}

/// Sampling requests go to `agent`'s model from now on; none are answered without one.
pub fn connect_sampling(mcp: &McpHub, agent: Option<&AgentDeps>) {
    mcp.set_model_client(agent.map(|deps| deps.client.clone()));
}
