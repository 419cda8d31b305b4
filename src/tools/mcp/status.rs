//! What each configured MCP server is doing, for `/ready`, `hermesd mcp list` and the logs.

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::config::{McpServerConfig, McpTransport};

/// A server's connection state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// Starting or answering `initialize` (first attempt or a retry).
    Connecting,
    /// Initialized; its tools are registered.
    Connected,
    /// The last attempt failed or the connection dropped; retried with backoff.
    Failed,
    /// `enabled: false`.
    Disabled,
}

/// A server's state with its details.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerStatus {
    pub state: ServerState,
    /// `stdio`, `http` or `sse`.
    pub transport: &'static str,
    /// The registry names of its tools (kept while a dropped server is reconnecting).
    pub tools: Vec<String>,
    /// Why it is not connected (redacted by the log layer like every message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Connection attempts that failed since the last success.
    pub failures: u32,
}

impl ServerStatus {
    pub fn new(config: &McpServerConfig) -> Self {
        let state = if config.enabled {
            ServerState::Connecting
        } else {
            ServerState::Disabled
        };
        Self {
            state,
            transport: transport_name(&config.transport),
            tools: Vec::new(),
            error: None,
            failures: 0,
        }
    }
}

pub fn transport_name(transport: &McpTransport) -> &'static str {
    match transport {
        McpTransport::Stdio { .. } => "stdio",
        McpTransport::Http { .. } => "http",
        McpTransport::Sse { .. } => "sse",
    }
}

/// A server's status, shared between its task and the readers.
#[derive(Debug, Clone)]
pub struct SharedStatus(Arc<Mutex<ServerStatus>>);

impl SharedStatus {
    pub fn new(status: ServerStatus) -> Self {
        Self(Arc::new(Mutex::new(status)))
    }

    pub fn get(&self) -> ServerStatus {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn update(&self, change: impl FnOnce(&mut ServerStatus)) {
        change(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()));
    }
}
