//! One task per configured server: connect, publish the server's tools, follow
//! `tools/list_changed`, and when the session ends (a stdio server died, an HTTP server went
//! away) or an attempt fails, try again with exponential backoff (1 s doubling to 60 s),
//! for as long as the server stays configured. Nothing here blocks the daemon: other
//! servers, and chats, go on while one is down.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::net::Net;
use rmcp::RoleClient;
use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::Peer;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::call::{self, PeerSlot};
use super::connect::{Listener, connect};
use super::sampling::{ModelSlot, Sampler};
use super::status::{ServerState, ServerStatus, SharedStatus};
use super::utility;
use crate::config::McpServerConfig;
use crate::tools::ToolOverlay;

const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(60);
/// How long a stopping session may take to close (the child is killed after that).
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// What every server task shares.
#[derive(Debug, Clone)]
pub struct Shared {
    pub net: Net,
    pub env: BTreeMap<String, String>,
    pub overlay: ToolOverlay,
    /// The model servers' sampling requests go to.
    pub models: ModelSlot,
}

/// A running server task.
#[derive(Debug)]
pub struct ServerTask {
    pub config: McpServerConfig,
    pub status: SharedStatus,
    /// Its tools' group in the overlay.
    group: String,
    overlay: ToolOverlay,
    stop: CancellationToken,
    handle: Option<JoinHandle<()>>,
}

impl ServerTask {
    /// Starts the task for `name` (none for a disabled server: its status says so).
    pub fn spawn(name: &str, group: String, config: McpServerConfig, shared: Shared) -> Self {
        let status = SharedStatus::new(ServerStatus::new(&config));
        let stop = CancellationToken::new();
        let overlay = shared.overlay.clone();
        let handle = (status.get().state == ServerState::Connecting).then(|| {
            tokio::spawn(supervise(
                name.to_owned(),
                group.clone(),
                config.clone(),
                shared,
                status.clone(),
                stop.clone(),
            ))
        });
        Self {
            config,
            status,
            group,
            overlay,
            stop,
            handle,
        }
    }

    /// Withdraws the server's tools at once (the next model call no longer sees them) and
    /// asks the task to close its session and leave; returns what to await for it.
    pub fn stop(self) -> Option<JoinHandle<()>> {
        self.overlay.remove_group(&self.group);
        self.stop.cancel();
        self.handle
    }
}

fn retry_delay(failures: u32) -> Duration {
    let doubled = FIRST_RETRY.saturating_mul(1 << failures.saturating_sub(1).min(6));
    doubled.min(MAX_RETRY)
}

async fn supervise(
    name: String,
    group: String,
    config: McpServerConfig,
    shared: Shared,
    status: SharedStatus,
    stop: CancellationToken,
) {
    let slot = PeerSlot::default();
    let sampler = Sampler::new(&name, config.sampling.clone(), shared.models.clone());
    let mut failures = 0u32;
    loop {
        status.update(|s| s.state = ServerState::Connecting);
        let tools_changed = Arc::new(Notify::new());
        let listener = Listener {
            tools_changed: tools_changed.clone(),
            sampler: Some(sampler.clone()),
        };
        let attempt = tokio::select! {
            _ = stop.cancelled() => break,
            attempt = connect(&name, &config, &shared.net, &shared.env, listener) => attempt,
        };
        let reason = match attempt {
            Err(error) => error.to_string(),
            Ok(session) => {
                failures = 0;
                let peer = session.peer().clone();
                slot.set(Some(peer.clone()));
                publish(&name, &group, &config, &peer, &slot, &shared, &status).await;
                let listening = tokio::spawn(listen_for_tool_changes(
                    name.clone(),
                    peer.clone(),
                    tools_changed.clone(),
                ));
                let _stop_listening = AbortOnDrop(listening);
                let closer = session.cancellation_token();
                let waiting = session.waiting();
                tokio::pin!(waiting);
                let ended = loop {
                    tokio::select! {
                        _ = stop.cancelled() => {
                            closer.cancel();
                            let _ = tokio::time::timeout(CLOSE_GRACE, &mut waiting).await;
                            slot.set(None);
                            shared.overlay.remove_group(&group);
                            return;
                        }
                        _ = tools_changed.notified() => {
                            publish(&name, &group, &config, &peer, &slot, &shared, &status).await;
                        }
                        quit = &mut waiting => break quit,
                    }
                };
                slot.set(None);
                match ended {
                    Ok(reason) => format!("the session ended ({reason:?})"),
                    Err(e) => format!("the session task failed: {e}"),
                }
            }
        };
        failures += 1;
        let delay = retry_delay(failures);
        tracing::warn!(
            mcp_server = %name,
            error = %reason,
            retry_in_ms = delay.as_millis() as u64,
            "MCP server not connected; retrying"
        );
        status.update(|s| {
            s.state = ServerState::Failed;
            s.error = Some(reason);
            s.failures = failures;
        });
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(delay) => {}
        }
    }
    shared.overlay.remove_group(&group);
}

/// Aborts a helper task when its session ends.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Since protocol version 2026-07-28 a server sends `tools/list_changed` only on a
/// subscription the client opened (`subscriptions/listen`); older servers send it unasked
/// and rmcp hands it to [`super::connect::Listener`]. Either way `tools_changed` is told.
async fn listen_for_tool_changes(
    server: String,
    peer: Peer<RoleClient>,
    tools_changed: Arc<Notify>,
) {
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = match peer.listen(filter).await {
        Ok(subscription) => subscription,
        Err(error) => {
            tracing::debug!(mcp_server = %server, error = %error, "no tools/list_changed subscription");
            return;
        }
    };
    while let Ok(Some(notification)) = subscription.next().await {
        if matches!(
            notification,
            ServerNotification::ToolListChangedNotification(_)
        ) {
            tools_changed.notify_one();
        }
    }
}

/// Lists the server's tools and registers those its filters select.
async fn publish(
    name: &str,
    group: &str,
    config: &McpServerConfig,
    peer: &Peer<RoleClient>,
    slot: &PeerSlot,
    shared: &Shared,
    status: &SharedStatus,
) {
    match peer.list_all_tools().await {
        Ok(tools) => {
            let mut entries: Vec<_> = tools
                .iter()
                .filter(|tool| config.selects(&tool.name))
                .map(|tool| call::entry(name, tool, slot.clone(), config.timeout))
                .collect();
            entries.extend(utility::entries(
                name,
                slot,
                config.timeout,
                config.resources,
                config.prompts,
            ));
            let mut names: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
            names.sort();
            tracing::info!(
                mcp_server = %name,
                tools = names.len(),
                offered = tools.len(),
                "MCP server connected; tools registered"
            );
            shared.overlay.set_group(group, entries);
            status.update(|s| {
                s.state = ServerState::Connected;
                s.error = None;
                s.failures = 0;
                s.tools = names;
            });
        }
        Err(error) => {
            tracing::warn!(mcp_server = %name, error = %error, "cannot list the MCP server's tools");
            status.update(|s| {
                s.state = ServerState::Connected;
                s.error = Some(format!("tools/list failed: {error}"));
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_from_a_second_to_a_minute() {
        let delays: Vec<u64> = (1..=9).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }
}
