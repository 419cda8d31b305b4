//! MCP sampling through the real `hermesd run` binary: the Python SDK test server's
//! `ask_model` tool sends `sampling/createMessage` back to us mid-call; the request goes to
//! the fake model with the server's system prompt and `maxTokens` capped by
//! `sampling.max_tokens_cap`, and the answer reaches the server. `max_rpm` refuses the next
//! request in the same minute and `enabled: false` refuses them all, each with an error the
//! server sees, without asking the model.

#[path = "mcp_support/mod.rs"]
mod mcp_support;
mod support;

use mcp_support::*;
use serde_json::json;
use support::fake_model::{Reply, Step};

const ONLY_ASK: &str = "    tools: {include: [ask_model], resources: false, prompts: false}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_samples_our_model_within_its_limits() {
    let model = support::fake_model::FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let servers = format!(
        "{}{}",
        stdio_server(
            "open",
            &format!("{ONLY_ASK}    sampling: {{max_tokens_cap: 256, max_rpm: 1}}\n")
        ),
        stdio_server(
            "closed",
            &format!("{ONLY_ASK}    sampling: {{enabled: false}}\n")
        ),
    );
    write_config(home.path(), &servers);
    let daemon = start(home.path(), &model).await;
    wait_for_servers(&daemon, "both connected", |s| {
        connected(s, "open") && connected(s, "closed")
    })
    .await;

    // The tool call, then the server's sampling request, then the final answer.
    model.push_all([
        Step::Reply(Reply::tool_call(
            "mcp__open__ask_model",
            json!({"question": "six times seven?"}),
        )),
        Step::text("42"),
        Step::text("done"),
    ]);
    assert_eq!(chat(&daemon, "ask the server").await, "done");
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    let sampling = &requests[1].body;
    assert_eq!(sampling["max_tokens"], 256, "capped: {sampling:#}");
    assert!(sampling.get("tools").is_none(), "{sampling:#}");
    let text = sampling["messages"].to_string();
    assert!(
        text.contains("Answer briefly.") && text.contains("six times seven?"),
        "{sampling:#}"
    );
    let results = tool_results(&model, 2);
    assert!(results[0].contains("|42"), "{results:?}");

    // A second request within the minute is over max_rpm: refused, the model not asked.
    model.push_all([
        Step::Reply(Reply::tool_call(
            "mcp__open__ask_model",
            json!({"question": "again?"}),
        )),
        Step::text("limited"),
    ]);
    assert_eq!(chat(&daemon, "ask again").await, "limited");
    assert_eq!(model.requests().len(), 5);
    let results = tool_results(&model, 4);
    assert!(
        results[0].contains("sampling failed") && results[0].contains("max_rpm"),
        "{results:?}"
    );

    // Sampling off for this server: refused with the key named.
    model.push_all([
        Step::Reply(Reply::tool_call(
            "mcp__closed__ask_model",
            json!({"question": "anyone?"}),
        )),
        Step::text("refused"),
    ]);
    assert_eq!(chat(&daemon, "ask the closed one").await, "refused");
    assert_eq!(model.requests().len(), 7);
    let results = tool_results(&model, 6);
    assert!(
        results[0].contains("sampling failed")
            && results[0].contains("mcp_servers.closed.sampling.enabled"),
        "{results:?}"
    );
}
