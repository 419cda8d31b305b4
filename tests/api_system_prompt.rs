//! The real `hermesd run` binary: an HTTP API request's `system` messages are layered onto
//! the session's stored prompt (SOUL.md from the home) for that request only, and the
//! stored prompt stays the same for the next request.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::daemon::{API_KEY, Daemon, api_env};
use support::fake_model::FakeModel;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_system_message_is_added_after_the_homes_prompt() {
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("SOUL.md"),
        "You are Ada, keeper of the lamp.",
    )
    .unwrap();
    let daemon = Daemon::start(home.path(), &api_env(home.path(), &model.base_url()));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let send = |messages: Value| {
        client
            .post(format!("{}/v1/chat/completions", daemon.api_url()))
            .bearer_auth(API_KEY)
            .header("X-Hermes-Session-Id", "lamp-session")
            .json(&json!({"model": "hermes-agent", "messages": messages}))
            .send()
    };
    let first = send(json!([
        {"role": "system", "content": "Answer in French."},
        {"role": "system", "content": "Keep it short."},
        {"role": "user", "content": "hello"}
    ]))
    .await
    .unwrap();
    assert_eq!(first.status(), 200);
    let second = send(json!([{"role": "user", "content": "again"}]))
        .await
        .unwrap();
    assert_eq!(second.status(), 200);
    let requests = model.requests();
    let system = |i: usize| {
        let message = &requests[i].body["messages"][0];
        assert_eq!(message["role"], "system");
        message["content"].as_str().unwrap().to_owned()
    };
    let (with, without) = (system(0), system(1));
    assert!(
        without.starts_with("You are Ada, keeper of the lamp."),
        "{without}"
    );
    assert_eq!(
        with,
        format!("{without}\n\nAnswer in French.\nKeep it short.")
    );
    daemon.terminate();
}

/// The guidance blocks follow config.yaml: `agent.tool_use_enforcement` listing a part of
/// the model's name adds the "act rather than announce" block (the model `fake-model` is in
/// no family Hermes enforces by default), `agent.parallel_tool_call_guidance: false` drops
/// that block, and `platform_hints.api_server.replace` swaps hermesd's note about the API.
/// The prompt stays byte-identical across the session's turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guidance_blocks_follow_the_model_and_config() {
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "agent:\n  tool_use_enforcement: [FAKE]\n  parallel_tool_call_guidance: false\n\
         platform_hints:\n  api_server:\n    replace: Reply in plain words for a script.\n",
    )
    .unwrap();
    let daemon = Daemon::start(home.path(), &api_env(home.path(), &model.base_url()));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    for text in ["hello", "again"] {
        let reply = client
            .post(format!("{}/v1/chat/completions", daemon.api_url()))
            .bearer_auth(API_KEY)
            .header("X-Hermes-Session-Id", "guided")
            .json(
                &json!({"model": "hermes-agent", "messages": [{"role": "user", "content": text}]}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200);
    }
    let requests = model.requests();
    let system: Vec<&str> = requests
        .iter()
        .map(|r| r.body["messages"][0]["content"].as_str().unwrap())
        .collect();
    assert_eq!(system.len(), 2);
    assert_eq!(system[0], system[1], "the prompt changed between turns");
    let prompt = system[0];
    assert!(prompt.contains("# Act rather than announce"), "{prompt}");
    assert!(prompt.contains("# Seeing work through"), "{prompt}");
    assert!(
        !prompt.contains("# Independent tool calls go together"),
        "{prompt}"
    );
    // Gemini/GPT notes are for those families only.
    assert!(!prompt.contains("# Working discipline"), "{prompt}");
    assert!(
        prompt.contains("Reply in plain words for a script."),
        "{prompt}"
    );
    assert!(!prompt.contains("through an HTTP API"), "{prompt}");
    daemon.terminate();
}
