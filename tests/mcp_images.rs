//! An MCP tool's image through the real `hermesd run` binary: the Python SDK test server's
//! `picture` tool returns a PNG; a vision model receives it as an image part of the tool
//! result in its API mode's shape (chat completions `image_url`, Anthropic `image` block
//! inside `tool_result`, Responses `input_image` in `function_call_output`), a model without
//! vision gets the `MEDIA:` line only, and no later turn carries the pixels again.

#[path = "mcp_support/mod.rs"]
mod mcp_support;
mod support;

use mcp_support::*;
use serde_json::{Value, json};
use support::fake_model::{FakeModel, Reply, Step};

/// The test server's one-pixel PNG, base64 (tests/mcp-server/server.py).
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// Every image part in a request body, whatever the format: (media type, base64).
fn images_in(body: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    walk(body, &mut found);
    found
}

fn walk(value: &Value, found: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            let url = match (
                map.get("type").and_then(Value::as_str),
                map.get("image_url"),
            ) {
                (Some("image_url"), Some(image)) => image["url"].as_str(),
                (Some("input_image"), Some(url)) => url.as_str(),
                _ => None,
            };
            if let Some((mime, data)) = url
                .and_then(|u| u.strip_prefix("data:"))
                .and_then(|u| u.split_once(";base64,"))
            {
                found.push((mime.to_owned(), data.to_owned()));
            }
            if map.get("type").and_then(Value::as_str) == Some("image") {
                let source = &map["source"];
                found.push((
                    source["media_type"].as_str().unwrap_or_default().to_owned(),
                    source["data"].as_str().unwrap_or_default().to_owned(),
                ));
            }
            map.values().for_each(|v| walk(v, found));
        }
        Value::Array(items) => items.iter().for_each(|v| walk(v, found)),
        _ => {}
    }
}

/// Where the tool's answer sits in each format's request, as the part holding the image.
fn tool_answer(mode: &str, body: &Value) -> Value {
    let pick = |list: &Value, pred: &dyn Fn(&Value) -> bool| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|item| pred(item))
            .cloned()
            .unwrap_or_else(|| panic!("no tool answer in {body:#}"))
    };
    match mode {
        "chat_completions" => pick(&body["messages"], &|m| m["role"] == "tool")["content"].clone(),
        "anthropic_messages" => {
            let user = pick(&body["messages"], &|m| {
                m["content"]
                    .as_array()
                    .is_some_and(|c| c[0]["type"] == "tool_result")
            });
            user["content"][0]["content"].clone()
        }
        _ => pick(&body["input"], &|i| i["type"] == "function_call_output")["output"].clone(),
    }
}

async fn picture_turn(mode: &str, vision: bool) -> (FakeModel, Value) {
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    write_config(
        home.path(),
        &stdio_server(
            "local",
            "    tools: {include: [picture], resources: false, prompts: false}\n",
        ),
    );
    let supports = if vision { "true" } else { "false" };
    let daemon = start_with(
        home.path(),
        &model,
        &[
            ("HERMES__MODEL__API_MODE", mode),
            ("HERMES__MODEL__SUPPORTS_VISION", supports),
        ],
    )
    .await;
    wait_for_servers(&daemon, "local connected", |s| connected(s, "local")).await;
    model.push_all([
        Step::Reply(Reply::tool_call("mcp__local__picture", json!({}))),
        Step::text("a single pixel"),
    ]);
    assert_eq!(chat(&daemon, "draw").await, "a single pixel");
    let answer = tool_answer(mode, &model.requests()[1].body);
    // The next turn resends the history without the pixels.
    assert_eq!(chat(&daemon, "again").await, "echo: again");
    let later = model.requests()[2].body.clone();
    assert!(images_in(&later).is_empty(), "{mode}: {later:#}");
    drop(daemon);
    (model, answer)
}

async fn vision_model_sees_the_image(mode: &str) {
    let (_model, answer) = picture_turn(mode, true).await;
    assert_eq!(
        images_in(&answer),
        [("image/png".to_owned(), PNG_B64.to_owned())],
        "{mode}: {answer:#}"
    );
    assert!(answer.to_string().contains("MEDIA:"), "{answer:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_image_reaches_chat_completions_as_an_image_url_part() {
    vision_model_sees_the_image("chat_completions").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_image_reaches_anthropic_inside_the_tool_result() {
    vision_model_sees_the_image("anthropic_messages").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_image_reaches_responses_in_the_function_call_output() {
    vision_model_sees_the_image("codex_responses").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_vision_gets_the_media_line_only() {
    let (_model, answer) = picture_turn("chat_completions", false).await;
    let text = answer.as_str().unwrap_or_else(|| panic!("{answer:#}"));
    assert!(text.contains("MEDIA:") && text.contains(".png"), "{text}");
    assert!(images_in(&answer).is_empty());
}
