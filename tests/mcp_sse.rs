//! The legacy HTTP+SSE transport (`transport: sse`) through the real `hermesd run` binary,
//! against the Python SDK's own SSE server (`server.sse_app()` in tests/mcp-server): the
//! server connects and lists its tools, the model's calls reach it and their results come
//! back on the event stream, and a call past its timeout is cancelled on the server.

#[path = "mcp_support/mod.rs"]
mod mcp_support;
mod support;

use mcp_support::*;
use serde_json::{Value, json};
use support::fake_model::{FakeModel, Reply, Step};
use support::mcp_servers::HttpServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_server_serves_tool_calls_and_cancellations() {
    let sse = HttpServer::start_sse();
    assert!(sse.url.ends_with("/sse"), "{}", sse.url);
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    write_config(
        home.path(),
        &format!(
            "  old:\n    url: {}\n    transport: sse\n    timeout: 3\n    headers: {{X-Test: sse-header-value}}\n    tools: {{include: [echo, add, hang], resources: false, prompts: false}}\n",
            sse.url
        ),
    );
    let daemon = start(home.path(), &model).await;
    let servers = wait_for_servers(&daemon, "old connected", |s| connected(s, "old")).await;
    assert_eq!(servers["old"]["transport"], "sse");
    assert_eq!(
        servers["old"]["tools"],
        json!(["mcp__old__add", "mcp__old__echo", "mcp__old__hang"]),
        "{servers:#}"
    );

    model.push_all([
        Step::Reply(
            Reply::tool_call("mcp__old__echo", json!({"text": "over sse"}))
                .with_tool_call("mcp__old__add", json!({"a": 40, "b": 2})),
        ),
        Step::text("done"),
    ]);
    assert_eq!(chat(&daemon, "use the old server").await, "done");
    let results = tool_results(&model, 1);
    let echoed: Value = serde_json::from_str(&results[0]).unwrap();
    assert_eq!(echoed["result"], "echo:over sse", "{results:?}");
    let sum: Value = serde_json::from_str(&results[1]).unwrap();
    assert!(sum["result"] == "42" || sum["result"] == 42, "{sum}");

    // Past its timeout the call is a tool error, and the server hears the cancellation
    // (posted to the endpoint the stream named).
    let marker = home.path().join("sse-hang.pid");
    push_hang(&model, "mcp__old__hang", &marker, "gave up");
    assert_eq!(chat(&daemon, "hang").await, "gave up");
    let results = tool_results(&model, 3);
    assert!(results[0].contains("did not answer within"), "{results:?}");
    assert_eq!(
        wait_for_file(&marker.with_extension("pid.cancelled")).await,
        "cancelled"
    );
    // The session survives: the next call still works.
    model.push_all([
        Step::Reply(Reply::tool_call("mcp__old__echo", json!({"text": "still"}))),
        Step::text("still there"),
    ]);
    assert_eq!(chat(&daemon, "again").await, "still there");
    assert!(tool_results(&model, 5)[0].contains("echo:still"));
}
