//! The web tools through the real binary (`hermesd chat -q`): the fake model calls
//! `web_search` and its next request carries the SearXNG fake's results inside the untrusted
//! fence; `web_extract` of a loopback URL is refused, allowed once the operator sets
//! `security.allow_private_urls: true`, and the metadata address stays refused even then.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use support::fake_model::{FakeCall, FakeModel, Reply, Step};
use support::fake_web::FakeWeb;

const HERMESD: &str = env!("CARGO_BIN_EXE_hermesd");

fn home(model: &FakeModel, extra_config: &str, dotenv: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "model:\n  provider: custom\n  base_url: {}\n  default: fake-model\n  api_key: sk-web-test-key-0001\n{extra_config}",
        model.base_url()
    );
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    std::fs::write(home.path().join(".env"), dotenv).unwrap();
    home
}

fn chat(home: &Path, query: &str) -> Output {
    Command::new(HERMESD)
        .args(["chat", "-q", query])
        .current_dir(home)
        .env_clear()
        .env("HOME", home.join("user-home"))
        .env("HERMES_HOME", home)
        .env("HERMES_TEST_ISOLATION", "1")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn call(name: &str, arguments: Value) -> Step {
    Step::Reply(Reply {
        tool_calls: vec![FakeCall {
            id: "call_1".into(),
            name: name.into(),
            arguments: arguments.to_string(),
        }],
        ..Reply::default()
    })
}

fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// The tool result the model was sent in its last request.
fn tool_result(model: &FakeModel) -> String {
    let request = model.requests().pop().expect("a second model request");
    let messages = request.body["messages"].as_array().unwrap().clone();
    let tool = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .expect("a tool message");
    tool["content"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_search_result_reaches_the_model_inside_the_untrusted_fence() {
    let model = FakeModel::start_in_background();
    let web = FakeWeb::start_in_background();
    let home = home(&model, "", &format!("SEARXNG_URL={}\n", web.base_url()));
    model.push_all([
        call("web_search", json!({"query": "rust", "limit": 2})),
        Step::text("Found it."),
    ]);
    let out = chat(home.path(), "search the web for rust");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(offered_tools(&model.requests()[0].body).contains(&"web_search".to_owned()));
    let result: Value = serde_json::from_str(&tool_result(&model)).unwrap();
    assert_eq!(result["success"], true, "{result}");
    let web_hits = result["data"]["web"].as_array().unwrap();
    assert_eq!(web_hits.len(), 2);
    assert_eq!(web_hits[0]["title"], "Rust book");
    let description = web_hits[0]["description"].as_str().unwrap();
    assert!(
        description.starts_with("<untrusted-web-content>\n"),
        "{description}"
    );
    assert!(
        description.ends_with("\n</untrusted-web-content>"),
        "{description}"
    );
    assert_eq!(description.matches("</untrusted-web-content>").count(), 1);
    assert_eq!(web_hits[0]["threat_findings"], json!(["prompt_injection"]));
    assert!(result["notice"].as_str().unwrap().contains("untrusted"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Found it."));
}

#[test]
fn without_a_backend_the_web_tools_are_not_offered() {
    let model = FakeModel::start_in_background();
    let home = home(&model, "", "");
    model.push(Step::text("Hello."));
    let out = chat(home.path(), "hi");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tools = offered_tools(&model.requests()[0].body);
    assert!(!tools.is_empty());
    assert!(!tools.iter().any(|t| t.starts_with("web_")), "{tools:?}");
}

fn extract_through_the_binary(allow_private: bool, url: &str) -> Value {
    let model = FakeModel::start_in_background();
    let config = format!(
        "web:\n  extract_backend: native\nsecurity:\n  allow_private_urls: {allow_private}\n"
    );
    let home = home(&model, &config, "");
    model.push_all([
        call("web_extract", json!({"urls": [url]})),
        Step::text("Done."),
    ]);
    let out = chat(home.path(), "read that page");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_str(&tool_result(&model)).unwrap();
    result["results"][0].clone()
}

#[test]
fn loopback_is_refused_unless_allowed_and_metadata_always() {
    let web = FakeWeb::start_in_background();
    let local = format!("http://127.0.0.1:{}/page/article", web.port());

    let refused = extract_through_the_binary(false, &local);
    assert!(
        refused["error"].as_str().unwrap().starts_with("Blocked:"),
        "{refused}"
    );
    assert!(
        web.seen().is_empty(),
        "the refused page was never requested"
    );

    let allowed = extract_through_the_binary(true, &local);
    assert_eq!(allowed["error"], Value::Null, "{allowed}");
    assert_eq!(allowed["title"], "Sourdough basics");
    let content = allowed["content"].as_str().unwrap();
    assert!(content.starts_with("<untrusted-web-content>") && content.contains("wild yeast"));
    assert_eq!(web.seen().len(), 1);

    let metadata = extract_through_the_binary(true, "http://169.254.169.254/latest/meta-data/");
    assert!(
        metadata["error"]
            .as_str()
            .unwrap()
            .contains("cloud metadata"),
        "{metadata}"
    );
}
