//! MCP tools through the real `hermesd run` binary, against a real MCP server written with
//! the protocol project's Python SDK (`tests/mcp-server/server.py`), over stdio and over
//! Streamable HTTP. The fake model asks for MCP tools; the results must reach it.

#[path = "mcp_support/mod.rs"]
mod mcp_support;
mod support;

use std::time::{Duration, Instant};

use mcp_support::*;
use serde_json::{Value, json};
use support::daemon::API_KEY;
use support::fake_model::{FakeModel, Reply, Step};
use support::mcp_servers::{HttpServer, offered_tools};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_calls_stdio_and_http_tools_and_reads_their_results() {
    let http = HttpServer::start();
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let servers = format!(
        "{}  remote:\n    url: {}\n    headers: {{Authorization: Bearer mcp-header-secret-0123}}\n    tools: {{exclude: [hang], prompts: false}}\n",
        stdio_server(
            "local",
            "    tools: {include: [echo, env_names, picture, grow, extra]}\n"
        ),
        http.url
    );
    write_config(home.path(), &servers);
    let daemon = start(home.path(), &model).await;
    let servers = wait_for_servers(&daemon, "both servers connected", |s| {
        connected(s, "local") && connected(s, "remote")
    })
    .await;
    let local: Vec<&str> = servers["local"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        local,
        [
            "mcp__local__echo",
            "mcp__local__env_names",
            "mcp__local__get_prompt",
            "mcp__local__grow",
            "mcp__local__list_prompts",
            "mcp__local__list_resources",
            "mcp__local__picture",
            "mcp__local__read_resource",
        ]
    );
    assert_eq!(servers["remote"]["transport"], "http");

    model.push_all([
        Step::Reply(
            Reply::tool_call("mcp__local__echo", json!({"text": "over stdio"}))
                .with_tool_call("mcp__remote__add", json!({"a": 2, "b": 40}))
                .with_tool_call("mcp__local__env_names", json!({}))
                .with_tool_call("mcp__local__picture", json!({}))
                .with_tool_call(
                    "mcp__local__read_resource",
                    json!({"uri": "memo://greeting"}),
                )
                .with_tool_call(
                    "mcp__local__get_prompt",
                    json!({"name": "review", "arguments": {"topic": "the patch"}}),
                ),
        ),
        Step::text("done"),
    ]);
    assert_eq!(chat(&daemon, "use the tools").await, "done");
    let offered = offered_tools(&model, 0);
    for (name, offered_to_model) in [
        ("mcp__local__echo", true),
        ("mcp__remote__add", true),
        ("mcp__remote__hang", false),
        ("mcp__remote__list_resources", true),
        ("mcp__remote__list_prompts", false),
        ("mcp__local__list_prompts", true),
    ] {
        assert_eq!(
            offered.contains(&name.to_owned()),
            offered_to_model,
            "{name} in {offered:?}"
        );
    }
    let results = tool_results(&model, 1);
    assert_eq!(results.len(), 6, "{results:#?}");
    assert_eq!(results[4], r#"{"result":"hello from a resource"}"#);
    let prompt: Value = serde_json::from_str(&results[5]).unwrap();
    assert_eq!(prompt["messages"][0]["role"], "user", "{prompt}");
    assert_eq!(prompt["messages"][0]["content"], "Please review the patch.");
    let echoed: Value = serde_json::from_str(&results[0]).unwrap();
    assert_eq!(echoed["result"], "echo:over stdio", "{echoed}");
    let sum: Value = serde_json::from_str(&results[1]).unwrap();
    assert!(sum["result"] == "42" || sum["result"] == 42, "{sum}");
    let env: Value = serde_json::from_str(&results[2]).unwrap();
    let names: Vec<&str> = env["result"].as_str().unwrap().split(',').collect();
    assert!(
        names.contains(&"MCP_TEST_VAR") && names.contains(&"PATH"),
        "{names:?}"
    );
    for secret in ["OPENAI_API_KEY", "API_SERVER_KEY", "HERMES_HOME"] {
        assert!(
            !names.contains(&secret),
            "{secret} leaked to the server: {names:?}"
        );
    }
    let picture: Value = serde_json::from_str(&results[3]).unwrap();
    let path = picture["result"]
        .as_str()
        .and_then(|r| r.strip_prefix("MEDIA:"))
        .unwrap_or_else(|| panic!("{picture}"));
    assert!(std::fs::read(path).unwrap().starts_with(b"\x89PNG"));

    // tools/list_changed: the server adds a tool; the next model call is offered it.
    model.push_all([
        Step::Reply(Reply::tool_call("mcp__local__grow", json!({}))),
        Step::text("grown"),
    ]);
    assert_eq!(chat(&daemon, "grow").await, "grown");
    wait_for_servers(&daemon, "the new tool", |s| {
        s["local"]["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t == "mcp__local__extra"))
    })
    .await;
    assert_eq!(chat(&daemon, "after growing").await, "echo: after growing");
    let last = model.requests().len() - 1;
    assert!(offered_tools(&model, last).contains(&"mcp__local__extra".to_owned()));

    let (status, logs) = tokio::task::spawn_blocking(move || daemon.terminate())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let logs = logs.join("\n");
    assert!(logs.contains("starting with token ***"), "{logs}");
    for secret in ["mcp-header-secret-0123", "mcp-env-secret-4567"] {
        assert!(!logs.contains(secret), "{secret} in the logs: {logs}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_fails_that_call_and_is_restarted_for_the_next() {
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &stdio_server("local", ""));
    let daemon = start(home.path(), &model).await;
    wait_for_servers(&daemon, "local connected", |s| connected(s, "local")).await;

    let marker = home.path().join("hang.pid");
    push_hang(&model, "mcp__local__hang", &marker, "the tool failed");
    let turn = tokio::spawn({
        let api = daemon.api_url();
        async move {
            reqwest::Client::new()
                .post(format!("{api}/v1/chat/completions"))
                .bearer_auth(API_KEY)
                .json(&json!({"model": "hermes-agent",
                               "messages": [{"role": "user", "content": "hang"}]}))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    });
    let pid = wait_for_file(&marker).await;
    let killed = std::process::Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let body = tokio::time::timeout(WAIT, turn).await.unwrap().unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "the tool failed");
    let results = tool_results(&model, 1);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].contains("\"error\"") && results[0].contains("local"),
        "{results:?}"
    );

    // The supervisor starts a new process; the next call goes to it.
    let servers = wait_for_servers(&daemon, "local reconnected", |s| {
        connected(s, "local") && s["local"]["failures"] == 0
    })
    .await;
    assert_eq!(servers["local"]["state"], "connected");
    model.push_all([
        Step::Reply(Reply::tool_call("mcp__local__pid", json!({}))),
        Step::text("after restart"),
    ]);
    assert_eq!(chat(&daemon, "again").await, "after restart");
    let results = tool_results(&model, 3);
    let new_pid: Value = serde_json::from_str(&results[0]).unwrap();
    let new_pid = new_pid["result"].as_str().unwrap().to_owned();
    assert_ne!(new_pid, pid.trim(), "a new server process answers");

    // Stopping the daemon stops its servers: no orphaned child is left behind.
    let (status, _) = tokio::task::spawn_blocking(move || daemon.terminate())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let proc_dir = std::path::PathBuf::from(format!("/proc/{new_pid}"));
    let deadline = Instant::now() + WAIT;
    while proc_dir.exists()
        && !std::fs::read_to_string(proc_dir.join("stat")).is_ok_and(|s| s.contains(") Z "))
    {
        assert!(
            Instant::now() < deadline,
            "server {new_pid} outlived the daemon"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_initialize_is_reported_while_chats_go_on() {
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    // `sleep` reads nothing and writes nothing: an initialize that is never answered.
    write_config(
        home.path(),
        "  silent:\n    command: sleep\n    args: ['600']\n    connect_timeout: 2\n",
    );
    let daemon = start(home.path(), &model).await;
    assert_eq!(chat(&daemon, "hello").await, "echo: hello");
    let servers = wait_for_servers(&daemon, "silent failed", |s| {
        s["silent"]["state"] == "failed"
    })
    .await;
    // Given up on by its connect_timeout, not by anything else.
    let error = servers["silent"]["error"].as_str().unwrap();
    assert_eq!(error, "no answer to initialize within 2s");
    assert_eq!(ready(&daemon).await["status"], "ready");
    assert_eq!(chat(&daemon, "still here").await, "echo: still here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_adds_reconfigures_and_removes_servers() {
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "");
    let daemon = start(home.path(), &model).await;
    assert_eq!(ready(&daemon).await["mcp_servers"], json!({}));
    let sighup = |n: u32| {
        let status = std::process::Command::new("kill")
            .args(["-HUP", &daemon.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        daemon
            .wait_for_line(&format!("reload #{n} applied"), WAIT)
            .unwrap_or_else(|| panic!("reload #{n}: {:#?}", daemon.logs()));
    };

    write_config(home.path(), &stdio_server("added", ""));
    sighup(1);
    wait_for_servers(&daemon, "added connected", |s| connected(s, "added")).await;
    model.push_all([
        Step::Reply(Reply::tool_call("mcp__added__echo", json!({"text": "new"}))),
        Step::text("used the new server"),
    ]);
    assert_eq!(chat(&daemon, "use it").await, "used the new server");
    assert!(tool_results(&model, 1)[0].contains("echo:new"));

    write_config(
        home.path(),
        &stdio_server(
            "added",
            "    tools: {include: [add], resources: false, prompts: false}\n",
        ),
    );
    sighup(2);
    wait_for_servers(&daemon, "the filter applied", |s| {
        s["added"]["tools"] == json!(["mcp__added__add"])
    })
    .await;

    write_config(home.path(), "");
    sighup(3);
    wait_for_servers(&daemon, "added removed", |s| s == &json!({})).await;
    assert_eq!(chat(&daemon, "plain").await, "echo: plain");
    let last = model.requests().len() - 1;
    assert!(
        !offered_tools(&model, last)
            .iter()
            .any(|t| t.starts_with("mcp__")),
        "{:?}",
        offered_tools(&model, last)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_its_timeout_is_a_tool_error_and_cancelled_on_the_server() {
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &stdio_server("quick", "    timeout: 2\n"));
    let daemon = start(home.path(), &model).await;
    wait_for_servers(&daemon, "connected", |s| connected(s, "quick")).await;

    // The per-call timeout: the model gets a tool error, the server a cancellation.
    let timed_out = home.path().join("timeout.pid");
    push_hang(&model, "mcp__quick__hang", &timed_out, "gave up");
    assert_eq!(chat(&daemon, "hang briefly").await, "gave up");
    let results = tool_results(&model, 1);
    assert!(results[0].contains("did not answer within"), "{results:?}");
    let cancelled = timed_out.with_extension("pid.cancelled");
    assert_eq!(wait_for_file(&cancelled).await, "cancelled");
}
