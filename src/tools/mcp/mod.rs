//! The agent's MCP client: the tools of the user's Model Context Protocol servers
//! (`mcp_servers:`), through rmcp, the protocol project's own Rust SDK.
//!
//! [`McpHub`] owns one supervised task per server ([`supervisor`]); each publishes its
//! server's tools into a [`ToolOverlay`] that every agent's registry reads, so a server that
//! connects late, reconnects or changes its tool list is seen by the next model call without
//! touching the agents. [`McpHub::apply`] takes a new `mcp_servers` map (start-up and
//! SIGHUP): servers that left are closed, new and changed ones started, unchanged ones keep
//! their session.

mod call;
mod connect;
mod env;
pub mod probe;
mod result;
mod sampling;
pub mod sampling_model;
pub mod schema;
mod sse;
mod status;
mod supervisor;
mod utility;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_adapter::net::Net;

pub use sampling_model::{
    SamplingFailure, SamplingImage, SamplingModel, SamplingReply, SamplingRequest, SamplingRole,
    SamplingTurn,
};
pub use status::{ServerState, ServerStatus};
use supervisor::{ServerTask, Shared};

use crate::config::McpServerConfig;
use crate::tools::ToolOverlay;

/// The MCP servers of this process; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct McpHub {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    overlay: ToolOverlay,
    /// The model servers' sampling requests go to (set at start and on reload).
    models: sampling::ModelSlot,
    servers: Mutex<BTreeMap<String, ServerTask>>,
    /// The environment servers were started with; a change restarts the stdio ones.
    env: Mutex<BTreeMap<String, String>>,
    /// Distinguishes a server's successive tasks (see `ToolOverlay`'s groups).
    generation: Mutex<u64>,
}

impl McpHub {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sampling requests go to `client` from now on (`None`: no provider, they are refused).
    /// The agent side supplies the model; tools only know it as a [`SamplingModel`].
    pub fn set_model_client<M: SamplingModel>(&self, client: Option<M>) {
        self.inner
            .models
            .set(client.map(|model| Arc::new(model) as Arc<dyn SamplingModel>));
    }

    /// The tools every agent's registry reads.
    pub fn overlay(&self) -> ToolOverlay {
        self.inner.overlay.clone()
    }

    /// Brings the running servers in line with `servers` (call inside the runtime). Returns
    /// at once: connections are made in the background, in parallel.
    pub fn apply(
        &self,
        servers: &BTreeMap<String, McpServerConfig>,
        net: &Net,
        env: &BTreeMap<String, String>,
    ) {
        let env_changed = {
            let mut current = self.inner.env.lock().unwrap_or_else(|e| e.into_inner());
            let changed = *current != *env;
            *current = env.clone();
            changed
        };
        let shared = Shared {
            net: net.clone(),
            env: env.clone(),
            overlay: self.inner.overlay.clone(),
            models: self.inner.models.clone(),
        };
        let mut running = self.inner.servers.lock().unwrap_or_else(|e| e.into_inner());
        let names: Vec<String> = running.keys().cloned().collect();
        for name in names {
            let keep = servers.get(&name).is_some_and(|config| {
                running[&name].config == *config
                    && !(env_changed
                        && matches!(config.transport, crate::config::McpTransport::Stdio { .. }))
            });
            if !keep && let Some(task) = running.remove(&name) {
                tracing::info!(mcp_server = %name, "MCP server stopped (removed or reconfigured)");
                task.stop();
            }
        }
        for (name, config) in servers {
            if running.contains_key(name) {
                continue;
            }
            let group = {
                let mut generation = self
                    .inner
                    .generation
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                *generation += 1;
                format!("{name}#{generation}")
            };
            running.insert(
                name.clone(),
                ServerTask::spawn(name, group, config.clone(), shared.clone()),
            );
        }
    }

    /// `/reload-mcp`: stops every server and starts `servers` afresh (new connections, new
    /// tool listings), whether or not their configuration changed.
    pub fn restart_all(
        &self,
        servers: &BTreeMap<String, McpServerConfig>,
        net: &Net,
        env: &BTreeMap<String, String>,
    ) {
        let stopped: Vec<ServerTask> = {
            let mut running = self.inner.servers.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *running).into_values().collect()
        };
        for task in stopped {
            task.stop();
        }
        self.apply(servers, net, env);
    }

    /// Every configured server's status, by name.
    pub fn statuses(&self) -> BTreeMap<String, ServerStatus> {
        self.inner
            .servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(name, task)| (name.clone(), task.status.get()))
            .collect()
    }

    /// Waits until no server is still making its first connection attempt, at most as long
    /// as the longest `connect_timeout` allows (`hermesd chat` offers the tools from its
    /// first message, as Hermes's CLI waits for discovery).
    pub async fn settled(&self) {
        let limit = {
            let running = self.inner.servers.lock().unwrap_or_else(|e| e.into_inner());
            running
                .values()
                .map(|task| task.config.connect_timeout)
                .max()
                .unwrap_or_default()
        };
        let deadline = tokio::time::Instant::now() + limit + Duration::from_secs(1);
        while self
            .statuses()
            .values()
            .any(|s| s.state == ServerState::Connecting && s.failures == 0)
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Closes every session (stdio servers are stopped), waiting at most `limit`.
    pub async fn shutdown(&self, limit: Duration) {
        let tasks: Vec<ServerTask> = {
            let mut running = self.inner.servers.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *running).into_values().collect()
        };
        let handles: Vec<_> = tasks.into_iter().filter_map(ServerTask::stop).collect();
        let _ = tokio::time::timeout(limit, futures_util::future::join_all(handles)).await;
    }
}
