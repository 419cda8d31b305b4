//! `hermesd doctor` on the terminal backend (issue 30): it names the backend and where
//! commands start, starts a throwaway bubblewrap sandbox when per-chat sandboxes are
//! configured, and reports an unreachable container engine as an error with a fix.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// `<tmp>/.hermes` (mode 0700) with `config.yaml`.
fn home_with(dir: &Path, config_yaml: &str) -> PathBuf {
    let home = dir.join(".hermes");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(home.join("config.yaml"), config_yaml).unwrap();
    home
}

/// The JSON report's terminal check (its name starts with `terminal`).
fn terminal_check(home: &Path, env: &[(&str, &str)]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["doctor", "--json"])
        .env_clear()
        .env("HOME", home.parent().unwrap())
        .env("HERMES_HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .output()
        .expect("hermesd runs");
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&output.stdout)));
    let found: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("terminal"))
        })
        .collect();
    assert_eq!(found.len(), 1, "{report:#}");
    found[0].clone()
}

#[test]
fn the_host_backend_names_where_commands_start() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let home = home_with(
        dir.path(),
        &format!("terminal:\n  cwd: {}\n", project.display()),
    );
    let check = terminal_check(&home, &[]);
    assert_eq!(check["status"], "ok", "{check}");
    let message = check["message"].as_str().unwrap();
    assert!(
        message.contains("on this host") && message.contains(&project.display().to_string()),
        "{message}"
    );
}

#[test]
fn per_chat_sandboxes_are_started_once_to_check_them() {
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), "terminal:\n  sandbox_scope: chat\n");
    let check = terminal_check(&home, &[]);
    assert_eq!(check["name"], "terminal.local", "{check}");
    assert_eq!(check["status"], "ok", "{check}");
    let message = check["message"].as_str().unwrap();
    assert!(
        message.contains("bubblewrap") && message.contains("one per chat"),
        "{message}"
    );
    assert!(
        !home.join("sandboxes").exists(),
        "doctor writes nothing into the home"
    );
}

#[test]
fn an_unreachable_container_engine_is_an_error_with_a_fix() {
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), "terminal:\n  backend: docker\n");
    let socket = dir.path().join("no-engine.sock");
    let docker_host = format!("unix://{}", socket.display());
    let check = terminal_check(&home, &[("DOCKER_HOST", docker_host.as_str())]);
    assert_eq!(check["name"], "terminal.docker", "{check}");
    assert_eq!(check["status"], "error", "{check}");
    assert!(
        check["hint"]
            .as_str()
            .is_some_and(|h| h.contains("sandboxes.md")),
        "{check}"
    );
}
