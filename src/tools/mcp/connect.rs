//! Opening one MCP session with rmcp (the protocol project's Rust SDK): a child process on
//! stdio or a Streamable HTTP endpoint, then the `initialize` handshake, all within the
//! server's `connect_timeout`.
//!
//! HTTP goes through rmcp's reqwest client built on the operator's TLS roots and proxy rule
//! (`hermes_adapter::net::Net`): rustls with ring, no OpenSSL. rmcp uses reqwest 0.13 where
//! the rest of hermesd still uses 0.12, so the client is built here from the same parts.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::net::Net;
use rmcp::ErrorData;
#[allow(deprecated)] // sampling: see `sampling.rs`
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    Implementation, SamplingCapability,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Notify;

use super::env::server_env;
use super::sampling::Sampler;
use crate::config::{McpServerConfig, McpTransport};

/// A live session with one server.
pub type Session = RunningService<RoleClient, Listener>;

/// Our side of a session: it names the client, hears `tools/list_changed` and answers
/// `sampling/createMessage` (when the server's `sampling:` allows).
#[derive(Debug, Clone)]
pub struct Listener {
    pub tools_changed: Arc<Notify>,
    pub sampler: Option<Arc<Sampler>>,
}

#[allow(deprecated)] // sampling: see `sampling.rs`
impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        match &self.sampler {
            Some(sampler) => sampler.create_message(params).await,
            None => Err(ErrorData::invalid_request(
                "this client does not answer sampling requests here",
                None,
            )),
        }
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.sampler.as_ref().is_some_and(|s| s.enabled()) {
            capabilities.sampling = Some(SamplingCapability::default());
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("hermesd", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot start '{command}': {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no answer to initialize within {0:.0?}")]
    Timeout(Duration),
    #[error("initialize failed: {0}")]
    Initialize(String),
    #[error("{0}")]
    Config(String),
}

/// Opens a session with `server` as `config` describes it.
pub async fn connect(
    server: &str,
    config: &McpServerConfig,
    net: &Net,
    daemon_env: &BTreeMap<String, String>,
    listener: Listener,
) -> Result<Session, ConnectError> {
    let opening = async {
        match &config.transport {
            McpTransport::Stdio { command, args, env } => {
                let mut child = tokio::process::Command::new(command);
                child
                    .args(args)
                    .env_clear()
                    .envs(server_env(daemon_env, env))
                    .kill_on_drop(true);
                let (transport, stderr) = TokioChildProcess::builder(child)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|source| ConnectError::Spawn {
                        command: command.clone(),
                        source,
                    })?;
                if let Some(stderr) = stderr {
                    tokio::spawn(forward_stderr(server.to_owned(), stderr));
                }
                listener
                    .serve(transport)
                    .await
                    .map_err(|e| ConnectError::Initialize(e.to_string()))
            }
            McpTransport::Http { url, headers } => {
                let mut transport_config =
                    StreamableHttpClientTransportConfig::with_uri(url.as_str());
                transport_config.custom_headers = header_map(headers)?
                    .into_iter()
                    .filter_map(|(name, value)| Some((name?, value)))
                    .collect();
                let transport =
                    StreamableHttpClientTransport::with_client(http_client(net)?, transport_config);
                listener
                    .serve(transport)
                    .await
                    .map_err(|e| ConnectError::Initialize(e.to_string()))
            }
            McpTransport::Sse { url, headers } => {
                let transport =
                    super::sse::SseTransport::connect(http_client(net)?, url, header_map(headers)?)
                        .await
                        .map_err(|e| ConnectError::Initialize(e.to_string()))?;
                listener
                    .serve(transport)
                    .await
                    .map_err(|e| ConnectError::Initialize(e.to_string()))
            }
        }
    };
    match tokio::time::timeout(config.connect_timeout, opening).await {
        Ok(result) => result,
        Err(_) => Err(ConnectError::Timeout(config.connect_timeout)),
    }
}

/// The configured `headers:` as request headers.
fn header_map(
    headers: &BTreeMap<String, crate::config::Secret>,
) -> Result<reqwest13::header::HeaderMap, ConnectError> {
    let mut map = reqwest13::header::HeaderMap::new();
    for (name, value) in headers {
        let name = reqwest13::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| ConnectError::Config(format!("header '{name}': {e}")))?;
        let value = reqwest13::header::HeaderValue::from_str(value.expose())
            .map_err(|_| ConnectError::Config(format!("header '{name}': not a valid value")))?;
        map.insert(name, value);
    }
    Ok(map)
}

/// rmcp's HTTP client on the operator's TLS roots and proxies.
fn http_client(net: &Net) -> Result<reqwest13::Client, ConnectError> {
    let mut builder = reqwest13::Client::builder()
        .use_preconfigured_tls((*net.tls_config()).clone())
        .no_proxy();
    if !net.proxies().is_empty() {
        let proxies = net.proxies().clone();
        builder = builder.proxy(reqwest13::Proxy::custom(move |url| {
            proxies.for_url(url).map(|proxy| proxy.url.clone())
        }));
    }
    builder
        .build()
        .map_err(|e| ConnectError::Config(format!("HTTP client: {e}")))
}

/// A server's stderr goes to our log, one line per event, tagged with the server.
async fn forward_stderr(server: String, stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(mcp_server = %server, "stderr: {line}");
    }
}
