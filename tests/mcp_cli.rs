//! `hermesd config check`, `hermesd mcp list` and `hermesd doctor` with MCP servers: the
//! reference's own documented `mcp_servers:` example validates, and a real server (the
//! Python SDK one in `tests/mcp-server/`) is listed and checked.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use support::mcp_servers;

fn hermesd(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(args)
        .env_clear()
        .env("HOME", home.join("user"))
        .env("HERMES_HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("OPENAI_API_KEY", "sk-daemon-secret-must-not-leak")
        .output()
        .expect("hermesd runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `mcp_servers:` example in the reference's module documentation
/// (`tools/mcp_tool.py`, "Example config::"), read from the installed Hermes 0.19.
fn reference_example() -> String {
    let python = support::python::python();
    let output = Command::new(python)
        .args([
            "-c",
            "import importlib.util; print(importlib.util.find_spec('tools.mcp_tool').origin)",
        ])
        .output()
        .unwrap();
    let path = text(&output.stdout).trim().to_owned();
    let source = std::fs::read_to_string(&path).unwrap();
    let start = source.find("Example config::").expect("the example") + "Example config::".len();
    let block: Vec<&str> = source[start..]
        .lines()
        .skip(1)
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.trim().is_empty() || l.starts_with("    "))
        .collect();
    let yaml: String = block
        .iter()
        .map(|l| l.get(4..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(yaml.starts_with("mcp_servers:"), "{yaml}");
    yaml
}

#[test]
fn the_reference_documented_example_passes_config_check() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = reference_example();
    std::fs::write(dir.path().join("config.yaml"), &yaml).unwrap();
    let output = hermesd(dir.path(), &["config", "check"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{yaml}\n{stderr}");
    // What hermesd does not do is said, by key.
    for key in [
        "mcp_servers.filesystem.keepalive_interval",
        "mcp_servers.github.supports_parallel_tool_calls",
        "mcp_servers.searxng.sampling",
    ] {
        assert!(stderr.contains(key), "{key} not named in:\n{stderr}");
    }
    assert!(
        stderr.contains("mcp_servers.searxng: has both 'url' and 'command'"),
        "{stderr}"
    );
    let shown = hermesd(dir.path(), &["config", "show", "--json"]);
    let config: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let servers = &config["mcp_servers"];
    assert_eq!(servers["filesystem"]["transport"], "stdio");
    assert_eq!(servers["filesystem"]["timeout"], 120.0);
    assert_eq!(servers["remote_api"]["transport"], "http");
    assert_eq!(servers["searxng"]["transport"], "sse");
    assert_eq!(
        servers["github"]["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "***"
    );
    assert_eq!(servers["remote_api"]["headers"]["Authorization"], "***");
}

#[test]
fn an_invalid_server_entry_exits_78_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "mcp_servers:\n  broken:\n    args: [x]\n    timeout: -1\n",
    )
    .unwrap();
    let output = hermesd(dir.path(), &["config", "check"]);
    assert_eq!(output.status.code(), Some(78));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("mcp_servers.broken:"), "{stderr}");
    assert!(stderr.contains("mcp_servers.broken.timeout"), "{stderr}");
}

fn two_servers(dir: &Path) {
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "mcp_servers:\n  local:\n    command: {}\n    args: [{}, stdio]\n    tools: {{include: [echo, add]}}\n  missing:\n    command: no-such-mcp-server-binary\n  off:\n    command: whatever\n    enabled: false\n",
            mcp_servers::python(),
            mcp_servers::script().display()
        ),
    )
    .unwrap();
}

#[test]
fn mcp_list_connects_and_shows_state_and_tools() {
    let dir = tempfile::tempdir().unwrap();
    two_servers(dir.path());
    let output = hermesd(dir.path(), &["mcp", "list", "--json"]);
    assert_eq!(output.status.code(), Some(1), "a server is unreachable");
    let listed: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&output.stdout)));
    assert_eq!(listed["local"]["state"], "connected");
    assert_eq!(
        listed["local"]["tools"],
        serde_json::json!(["mcp__local__add", "mcp__local__echo"])
    );
    assert_eq!(listed["missing"]["state"], "failed");
    assert!(
        listed["missing"]["error"]
            .as_str()
            .unwrap()
            .contains("no-such-mcp-server-binary")
    );
    assert_eq!(listed["off"]["state"], "disabled");

    let table = hermesd(dir.path(), &["mcp", "list"]);
    let stdout = text(&table.stdout);
    assert!(stdout.contains("SERVER"), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("local")
            && l.contains("connected")
            && l.contains("mcp__local__echo")),
        "{stdout}"
    );
}

#[test]
fn doctor_checks_commands_and_initialize() {
    let dir = tempfile::tempdir().unwrap();
    two_servers(dir.path());
    let output = hermesd(dir.path(), &["doctor", "--json", "--timeout", "60"]);
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&output.stdout)));
    let checks = report["checks"].as_array().unwrap();
    let find = |name: &str| {
        checks
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {checks:#?}"))
            .clone()
    };
    let local = find("mcp_servers.local");
    assert_eq!(local["status"], "ok", "{local}");
    assert!(
        local["message"].as_str().unwrap().contains("2 tool"),
        "{local}"
    );
    let missing = find("mcp_servers.missing");
    assert_eq!(missing["status"], "error", "{missing}");
    assert!(missing["message"].as_str().unwrap().contains("not found"));
    assert_eq!(find("mcp_servers.off")["status"], "skip");
    let offline = hermesd(dir.path(), &["doctor", "--json", "--offline"]);
    let report: Value = serde_json::from_slice(&offline.stdout).unwrap();
    let local = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "mcp_servers.local")
        .cloned()
        .unwrap();
    assert_eq!(local["status"], "skip", "{local}");
}
