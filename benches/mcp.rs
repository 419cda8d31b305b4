//! MCP benchmark: the wall time of an agent turn whose model calls one MCP tool (the Python
//! SDK test server's `echo`, over stdio, Streamable HTTP and the legacy SSE transport) against
//! the same turn
//! calling a built-in tool (`read_file` on a small file), with a fake model that answers
//! instantly; and the memory each connected server costs: our side (the daemon's RSS growth
//! per stdio session) and the server process's own RSS. Prints one JSON report (also written
//! to `target/bench-mcp.json`). `-- --quick` is the CI size.

#[path = "../tests/support/fake_model.rs"]
mod fake_model;
#[path = "../tests/support/mcp_servers.rs"]
mod mcp_servers;
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_model::{FakeModel, Reply, Step};
use hermesd::agent::provider::{Endpoint, HttpSettings, ModelClient};
use hermesd::agent::{Agent, AgentDeps, UserPrompts, new_session_id};
use hermesd::config::McpServerConfig;
use hermesd::home::HermesHome;
use hermesd::state::Store;
use hermesd::tools::mcp::{McpHub, ServerState};
use serde_json::{Value, json};
use support::{percentiles as summary, rss_kib};
use tokio_util::sync::CancellationToken;

/// The validated `mcp_servers` for a YAML block, through the real config loader.
fn servers(home: &HermesHome, yaml: &str) -> BTreeMap<String, McpServerConfig> {
    std::fs::write(home.config_yaml(), yaml).unwrap();
    let env: BTreeMap<String, String> = [("HOME", home.path().display().to_string())]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    hermesd::config::load(home, &env)
        .expect("config")
        .config
        .mcp_servers
}

fn stdio_yaml(names: &[String]) -> String {
    let mut yaml = String::from("mcp_servers:\n");
    for name in names {
        yaml.push_str(&format!(
            "  {name}:\n    command: {}\n    args: [{}, stdio]\n",
            mcp_servers::python(),
            mcp_servers::script().display()
        ));
    }
    yaml
}

async fn wait_connected(hub: &McpHub, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let statuses = hub.statuses();
        let connected = statuses
            .values()
            .filter(|s| s.state == ServerState::Connected)
            .count();
        if connected >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "servers not connected: {statuses:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn timed_turns(
    agent: &mut Agent,
    fake: &FakeModel,
    turns: usize,
    tool: &str,
    args: Value,
) -> Vec<f64> {
    let (events, _rx) = hermesd::agent::event_channel();
    let mut times = Vec::with_capacity(turns);
    for i in 0..turns {
        fake.push_all([
            Step::Reply(Reply::tool_call(tool, args.clone())),
            Step::text("ok"),
        ]);
        let started = Instant::now();
        agent
            .run_turn(&format!("message {i}"), &events, &CancellationToken::new())
            .await
            .expect("turn");
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (turns, servers_for_rss) = if quick { (100, 4) } else { (1000, 8) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(async {
        let dir = tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .unwrap();
        let home = HermesHome::at(dir.path());
        home.ensure_exists().unwrap();
        let fake = FakeModel::start_in_background();
        let http = mcp_servers::HttpServer::start();
        let sse = mcp_servers::HttpServer::start_sse();
        let env: BTreeMap<String, String> = [
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("HOME", dir.path().display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let mut configured = servers(&home, &stdio_yaml(&["local".to_owned()]));
        configured.extend(servers(
            &home,
            &format!(
                "mcp_servers:\n  remote:\n    url: {}\n  old:\n    url: {}\n    transport: sse\n",
                http.url, sse.url
            ),
        ));
        let hub = McpHub::new();
        let net = hermes_adapter::net::Net::direct();
        hub.apply(&configured, &net, &env);
        wait_connected(&hub, 3).await;

        std::fs::write(home.config_yaml(), "").unwrap();
        let loaded = hermesd::config::load(&home, &env).expect("config");
        let store = Store::open(&home.state_db()).expect("store");
        let endpoint = Endpoint::new("fake", fake.base_url(), None, "fake-model");
        let client = ModelClient::with_endpoints(endpoint, Vec::new(), HttpSettings::default())
            .expect("client");
        let deps = Arc::new(
            AgentDeps::with_client(&home, &loaded, store, UserPrompts::default(), client)
                .with_tool_overlay(hub.overlay()),
        );
        let small = deps.settings.cwd.join("bench-mcp-small.txt");
        let small = if std::fs::write(&small, "one line\n").is_ok() {
            small
        } else {
            std::env::temp_dir().join("bench-mcp-small.txt")
        };
        std::fs::write(&small, "one line\n").unwrap();
        let mut agent = Agent::create(Arc::clone(&deps), new_session_id(), "bench", None)
            .await
            .unwrap();
        let read = json!({"path": small.display().to_string()});
        let echo = json!({"text": "hello"});
        // Warm up connections and caches.
        timed_turns(&mut agent, &fake, 10, "read_file", read.clone()).await;
        timed_turns(&mut agent, &fake, 10, "mcp__local__echo", echo.clone()).await;
        timed_turns(&mut agent, &fake, 10, "mcp__remote__echo", echo.clone()).await;
        timed_turns(&mut agent, &fake, 10, "mcp__old__echo", echo.clone()).await;
        let builtin = timed_turns(&mut agent, &fake, turns, "read_file", read).await;
        let stdio = timed_turns(&mut agent, &fake, turns, "mcp__local__echo", echo.clone()).await;
        let remote = timed_turns(&mut agent, &fake, turns, "mcp__remote__echo", echo.clone()).await;
        let legacy = timed_turns(&mut agent, &fake, turns, "mcp__old__echo", echo).await;
        let _ = std::fs::remove_file(&small);

        // Memory: our RSS growth for `servers_for_rss` more stdio sessions, and theirs.
        let me = std::process::id();
        let before = rss_kib(me);
        let names: Vec<String> = (0..servers_for_rss).map(|i| format!("extra{i}")).collect();
        let mut many = configured.clone();
        many.extend(servers(&home, &stdio_yaml(&names)));
        hub.apply(&many, &net, &env);
        wait_connected(&hub, 3 + servers_for_rss).await;
        let after = rss_kib(me);
        let per_server_kib = after.saturating_sub(before) as f64 / servers_for_rss as f64;
        let server_rss = {
            let (events, _rx) = hermesd::agent::event_channel();
            fake.push_all([
                Step::Reply(Reply::tool_call("mcp__extra0__pid", json!({}))),
                Step::text("ok"),
            ]);
            agent
                .run_turn("pid", &events, &CancellationToken::new())
                .await
                .unwrap();
            let last = fake.requests().last().cloned().unwrap();
            let pid = last.body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .rev()
                .find(|m| m["role"] == "tool")
                .and_then(|m| serde_json::from_str::<Value>(m["content"].as_str()?).ok())
                .and_then(|v| v["result"].as_str().and_then(|p| p.parse::<u32>().ok()))
                .unwrap_or_default();
            rss_kib(pid)
        };
        hub.shutdown(Duration::from_secs(10)).await;
        deps.store.close().await;
        json!({
            "turns_per_case": turns,
            "turn_with_builtin_read_file": summary(builtin),
            "turn_with_mcp_stdio_echo": summary(stdio),
            "turn_with_mcp_http_echo": summary(remote),
            "turn_with_mcp_sse_echo": summary(legacy),
            "stdio_servers_added_for_rss": servers_for_rss,
            "daemon_rss_kib_before": before,
            "daemon_rss_kib_after": after,
            "daemon_kib_per_connected_stdio_server": (per_server_kib * 10.0).round() / 10.0,
            "python_sdk_server_process_rss_kib": server_rss,
        })
    });
    let text = serde_json::to_string_pretty(&report).unwrap();
    println!("{text}");
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let _ = std::fs::write(target.join("bench-mcp.json"), &text);
}
