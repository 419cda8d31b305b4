//! What the MCP end-to-end tests share: a daemon serving the HTTP API with the fake model,
//! `mcp_servers:` entries for the Python SDK test server, waits on `/ready`, and views of
//! what the model was sent. Included with `#[path]` by each `tests/mcp_*.rs` file.
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::daemon::{API_KEY, Daemon, api_env};
use crate::support::fake_model::{FakeModel, Reply, Step};
use crate::support::mcp_servers;

/// Generous: a loaded 2-core machine starts Python servers slowly.
pub const WAIT: Duration = Duration::from_secs(90);

pub fn stdio_server(name: &str, extra: &str) -> String {
    format!(
        "  {name}:\n    command: {}\n    args: [{}, stdio]\n    env: {{MCP_TEST_VAR: configured-value, MCP_TEST_TOKEN: mcp-env-secret-4567}}\n{extra}",
        mcp_servers::python(),
        mcp_servers::script().display()
    )
}

pub fn write_config(home: &Path, servers: &str) {
    let config = if servers.is_empty() {
        String::new()
    } else {
        format!("mcp_servers:\n{servers}")
    };
    std::fs::write(home.join("config.yaml"), config).unwrap();
}

pub async fn start(home: &Path, model: &FakeModel) -> Daemon {
    start_with(home, model, &[]).await
}

/// [`start`] with more environment (`HERMES__MODEL__API_MODE`, ...).
pub async fn start_with(home: &Path, model: &FakeModel, extra: &[(&str, &str)]) -> Daemon {
    let dir = home.to_path_buf();
    let mut env = api_env(home, &model.base_url());
    for (key, value) in extra {
        env.retain(|(k, _)| k != key);
        env.push(((*key).to_owned(), (*value).to_owned()));
    }
    tokio::task::spawn_blocking(move || Daemon::start(&dir, &env))
        .await
        .unwrap()
}

pub async fn ready(daemon: &Daemon) -> Value {
    reqwest::get(format!("{}/ready", daemon.admin_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls `/ready` until `check` holds for its `mcp_servers`; returns them.
pub async fn wait_for_servers(
    daemon: &Daemon,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let servers = ready(daemon).await["mcp_servers"].clone();
        if check(&servers) {
            return servers;
        }
        assert!(
            Instant::now() < deadline,
            "/ready never showed {what}: {servers:#}\n{:#?}",
            daemon.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `<admin_url>/ready` until the server `name` is connected (for rigs that are not
/// started by [`start`]).
pub async fn wait_connected(admin_url: &str, name: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let body: Value = reqwest::get(format!("{admin_url}/ready"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if connected(&body["mcp_servers"], name) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never connected: {body:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn connected(servers: &Value, name: &str) -> bool {
    servers[name]["state"] == "connected"
}

pub async fn chat(daemon: &Daemon, text: &str) -> String {
    mcp_servers::api_chat(&daemon.api_url(), API_KEY, text).await
}

/// The tool results the model was sent in request `index`, in order.
pub fn tool_results(model: &FakeModel, index: usize) -> Vec<String> {
    let requests = model.requests();
    requests[index].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Queues a model reply calling `tool` (a `hang`) with `marker`, then `then` as the answer.
pub fn push_hang(model: &FakeModel, tool: &str, marker: &Path, then: &str) {
    model.push_all([
        Step::Reply(Reply::tool_call(
            tool,
            json!({"marker": marker.display().to_string()}),
        )),
        Step::text(then),
    ]);
}

/// Waits (bounded) until `path` exists; returns its content.
pub async fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.is_empty()
        {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
