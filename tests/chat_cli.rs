//! `hermesd chat` with the real binary against a wire-level fake model: one-shot queries,
//! resuming a stored session, interactive input with an approval prompt, and clear failures.

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::json;
use support::fake_model::{FakeCall, FakeModel, Reply, Step};

const HERMESD: &str = env!("CARGO_BIN_EXE_hermesd");

fn home_for(fake: Option<&FakeModel>) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    if let Some(fake) = fake {
        let config = format!(
            "model:\n  provider: custom\n  base_url: {}\n  default: fake-model\n  api_key: sk-chat-test-key-0001\n",
            fake.base_url()
        );
        std::fs::write(home.path().join("config.yaml"), config).unwrap();
    }
    home
}

fn hermesd(home: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(HERMESD)
        .args(args)
        .current_dir(home)
        .env_clear()
        .env("HOME", home.join("user-home"))
        .env("HERMES_HOME", home)
        .env("HERMES_TEST_ISOLATION", "1")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn one_shot_query_then_resume() {
    let fake = FakeModel::start_in_background();
    let home = home_for(Some(&fake));
    fake.push(Step::text("Hi! How can I help?"));
    let out = hermesd(home.path(), &["chat", "-q", "hello"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "Hi! How can I help?");

    let list = hermesd(home.path(), &["sessions", "list", "--json"], None);
    let sessions: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(sessions[0]["source"], "cli");
    assert_eq!(sessions[0]["message_count"], 2);
    let id = sessions[0]["id"].as_str().unwrap().to_owned();

    fake.push(Step::text("You said hello before."));
    let out = hermesd(
        home.path(),
        &["chat", "--resume", &id[..15], "-q", "what did I say?"],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "You said hello before.");
    let request = fake.requests().pop().unwrap();
    let contents: Vec<String> = request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| m["content"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        contents,
        ["hello", "Hi! How can I help?", "what did I say?"]
    );
}

#[test]
fn interactive_chat_asks_before_a_dangerous_command() {
    let fake = FakeModel::start_in_background();
    let home = home_for(Some(&fake));
    let victim = home.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    fake.push_all([
        Step::Reply(Reply {
            tool_calls: vec![FakeCall {
                id: "c1".into(),
                name: "terminal".into(),
                arguments: json!({"command": format!("rm -rf {}", victim.display())}).to_string(),
            }],
            ..Reply::default()
        }),
        Step::text("Understood, I left it alone."),
    ]);
    let out = hermesd(
        home.path(),
        &["chat"],
        Some("please delete victim\nd\n/exit\n"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("Dangerous command"), "{err}");
    assert!(text(&out.stdout).contains("Understood, I left it alone."));
    assert!(victim.exists(), "denied command did not run");
    assert!(err.contains("resume with: hermesd chat --resume"), "{err}");
}

#[test]
fn without_a_model_provider_chat_says_what_to_set() {
    let home = home_for(None);
    let out = hermesd(home.path(), &["chat", "-q", "hello"], None);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no model provider configured"), "{err}");
}

#[test]
fn a_failing_model_is_one_clear_line_and_exit_1() {
    let fake = FakeModel::start_in_background();
    let home = home_for(Some(&fake));
    for _ in 0..3 {
        fake.push(Step::error(401));
    }
    let out = hermesd(home.path(), &["chat", "-q", "hello"], None);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!err.contains("sk-chat-test-key-0001"), "{err}");
}

/// The terminal chat connects the configured MCP servers before the first message, so a
/// one-shot query can already use their tools (a real server: the Python SDK one).
#[test]
fn one_shot_query_uses_an_mcp_tool() {
    let fake = FakeModel::start_in_background();
    let home = home_for(Some(&fake));
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "{config}mcp_servers:\n  local:\n    command: {}\n    args: [{}, stdio]\n",
            support::mcp_servers::python(),
            support::mcp_servers::script().display()
        ),
    )
    .unwrap();
    fake.push_all([
        Step::Reply(Reply::tool_call(
            "mcp__local__add",
            json!({"a": 20, "b": 22}),
        )),
        Step::text("the sum is in"),
    ]);
    let out = hermesd(home.path(), &["chat", "-q", "add"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "the sum is in");
    let requests = fake.requests();
    let tool = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    assert!(tool["content"].as_str().unwrap().contains("42"), "{tool}");
}
