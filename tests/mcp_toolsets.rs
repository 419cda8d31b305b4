//! `platform_toolsets` and `agent.disabled_toolsets` through the real `hermesd run` binary:
//! one daemon serving Telegram (the wire-level fake Bot API) and the HTTP API, with a real
//! MCP server (the Python SDK's, over stdio). The fake model records which tools each
//! platform's request offered; a SIGHUP reload changes them for the next turn.

#[path = "mcp_support/mod.rs"]
mod mcp_support;
mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::time::Duration;

use fake_telegram::{Chat, User};
use mcp_support::wait_connected;
use support::daemon::API_KEY;
use support::fake_model::FakeModel;
use support::mcp_servers::{self, offered_tools};
use telegram_support::{Rig, start};

const WAIT: Duration = Duration::from_secs(90);
const CHAT: i64 = 7;

fn servers_yaml() -> String {
    format!(
        "mcp_servers:\n  local:\n    command: {}\n    args: [{}, stdio]\n",
        mcp_servers::python(),
        mcp_servers::script().display()
    )
}

async fn api_chat(rig: &Rig, text: &str) -> String {
    mcp_servers::api_chat(&rig.daemon().api_url(), API_KEY, text).await
}

/// The index of the last model request whose messages mention `text`.
fn request_with(model: &FakeModel, text: &str) -> usize {
    model
        .requests()
        .iter()
        .rposition(|r| r.body["messages"].to_string().contains(text))
        .unwrap_or_else(|| panic!("no request mentions {text}"))
}

fn has(tools: &[String], name: &str) -> bool {
    tools.iter().any(|t| t == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_platform_gets_its_toolsets_and_a_reload_changes_them() {
    let tail = format!(
        "{}platform_toolsets:\n  telegram: [hermes-telegram, no_mcp]\n  slack: [file, nonesuch]\nagent:\n  disabled_toolsets: [memory]\n",
        servers_yaml()
    );
    let rig = start(
        "",
        &tail,
        &[("API_SERVER_ENABLED", "true"), ("API_SERVER_KEY", API_KEY)],
    )
    .await;
    wait_connected(&rig.daemon().admin_url(), "local").await;
    // An unknown name is reported at start, naming its key.
    rig.daemon()
        .wait_for_line("platform_toolsets.slack[1]: 'nonesuch'", WAIT)
        .unwrap_or_else(|| panic!("{:#?}", rig.daemon().logs()));

    rig.telegram.push_text(
        Chat::private(CHAT),
        User::new(CHAT, "Ann"),
        "first on telegram",
    );
    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert!(sent[0].text.contains("first on telegram"), "{sent:?}");
    let telegram = offered_tools(&rig.model, request_with(&rig.model, "first on telegram"));
    assert!(
        has(&telegram, "terminal") && has(&telegram, "clarify"),
        "{telegram:?}"
    );
    assert!(
        !has(&telegram, "memory"),
        "disabled everywhere: {telegram:?}"
    );
    assert!(
        !telegram.iter().any(|t| t.starts_with("mcp__")),
        "no_mcp on telegram: {telegram:?}"
    );

    // The HTTP API has no list: its preset (no clarify) and every MCP server.
    assert_eq!(
        api_chat(&rig, "first on the api").await,
        "echo: first on the api"
    );
    let api = offered_tools(&rig.model, request_with(&rig.model, "first on the api"));
    assert!(has(&api, "mcp__local__echo"), "{api:?}");
    assert!(has(&api, "terminal") && !has(&api, "clarify"), "{api:?}");
    assert!(!has(&api, "memory"), "{api:?}");

    // Reload: Telegram now picks two built-in toolsets and the server by name; the API
    // gets a list without MCP; nothing is disabled any more.
    let config = rig.home.path().join("config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text
        .replace(
            "telegram: [hermes-telegram, no_mcp]",
            "telegram: [file, todo, local]\n  api_server: [hermes-api-server, no_mcp]",
        )
        .replace("disabled_toolsets: [memory]", "disabled_toolsets: []");
    std::fs::write(&config, text).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &rig.daemon().pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    rig.daemon()
        .wait_for_line("reload #1 applied", WAIT)
        .unwrap_or_else(|| panic!("{:#?}", rig.daemon().logs()));

    rig.telegram.push_text(
        Chat::private(CHAT),
        User::new(CHAT, "Ann"),
        "after the reload",
    );
    rig.wait_sent_to(CHAT, 2).await;
    let telegram = offered_tools(&rig.model, request_with(&rig.model, "after the reload"));
    let mut builtin: Vec<&String> = telegram
        .iter()
        .filter(|t| !t.starts_with("mcp__"))
        .collect();
    builtin.sort();
    assert_eq!(
        builtin,
        ["patch", "read_file", "search_files", "todo", "write_file"],
        "{telegram:?}"
    );
    assert!(has(&telegram, "mcp__local__echo"), "{telegram:?}");
    assert_eq!(
        api_chat(&rig, "api after reload").await,
        "echo: api after reload"
    );
    let api = offered_tools(&rig.model, request_with(&rig.model, "api after reload"));
    assert!(!api.iter().any(|t| t.starts_with("mcp__")), "{api:?}");
    assert!(has(&api, "memory"), "memory is back: {api:?}");
}

#[test]
fn config_check_names_unknown_toolsets_by_key() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "platform_toolsets:\n  telegram: [hermes, file]\n  discord: [mcp-nowhere]\nagent:\n  disabled_toolsets: [bogus]\n",
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["config", "check"])
        .env_clear()
        .envs(support::daemon::base_env(home.path()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    for expected in [
        "platform_toolsets.telegram[0]: 'hermes'",
        "did you mean 'hermes-telegram'",
        "platform_toolsets.discord[0]: 'mcp-nowhere'",
        "agent.disabled_toolsets[0]: 'bogus'",
    ] {
        assert!(stderr.contains(expected), "{expected} missing: {stderr}");
    }
    // Both keys now take effect: neither is in the "without effect" list.
    let ignored = stderr
        .lines()
        .find(|l| l.contains("without effect"))
        .unwrap_or_default();
    assert!(
        !ignored.contains("platform_toolsets") && !ignored.contains("disabled_toolsets"),
        "{stderr}"
    );
}
