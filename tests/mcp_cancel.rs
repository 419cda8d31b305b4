//! An interrupted turn abandons its tool call: the agent loop drops the dispatch future (see
//! `agent/tool_round.rs`). For an MCP tool that must reach the server as
//! `notifications/cancelled`. Driven in process (the hub and the registry as the daemon
//! builds them) against the real Python SDK server over stdio.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use hermesd::home::HermesHome;
use hermesd::tools::mcp::{McpHub, ServerState};
use hermesd::tools::{ToolCtx, builtin_registry};
use support::mcp_servers;

const WAIT: Duration = Duration::from_secs(90);

async fn wait_until(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_running_call_cancels_it_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let home = HermesHome::at(dir.path().join("home"));
    home.ensure_exists().unwrap();
    std::fs::write(
        home.config_yaml(),
        format!(
            "mcp_servers:\n  local:\n    command: {}\n    args: [{}, stdio]\n",
            mcp_servers::python(),
            mcp_servers::script().display()
        ),
    )
    .unwrap();
    let env: BTreeMap<String, String> = [
        ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".to_owned(), dir.path().display().to_string()),
    ]
    .into();
    let loaded = hermesd::config::load(&home, &env).unwrap();
    let hub = McpHub::new();
    hub.apply(
        &loaded.config.mcp_servers,
        &hermes_adapter::net::Net::direct(),
        &loaded.env,
    );
    wait_until("local connected", || {
        hub.statuses()["local"].state == ServerState::Connected
    })
    .await;
    let registry = builtin_registry().with_overlay(hub.overlay());

    let marker = dir.path().join("hang.pid");
    let args = serde_json::json!({"marker": marker.display().to_string()}).to_string();
    let ctx = ToolCtx::for_tests(dir.path());
    let call = tokio::spawn(async move { registry.dispatch("mcp__local__hang", &args, ctx).await });
    wait_until("the call is running on the server", || {
        !read(&marker).is_empty()
    })
    .await;
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    let cancelled = marker.with_extension("pid.cancelled");
    wait_until("the server heard notifications/cancelled", || {
        read(&cancelled) == "cancelled"
    })
    .await;
    hub.shutdown(Duration::from_secs(10)).await;
}
