//! `hermesd run`: validates config before anything starts (exit 78), serves until SIGTERM,
//! then closes state.db cleanly (exit 0).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const HERMESD: &str = env!("CARGO_BIN_EXE_hermesd");

/// Also: a setting hermesd does not support yet is named in one start-up warning.
#[test]
fn runs_until_sigterm_and_exits_cleanly() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), "honcho: {enabled: true}\n").unwrap();
    let mut child = Command::new(HERMESD)
        .arg("run")
        .env_clear()
        .env("HOME", home.path().join("user"))
        .env("HERMES_HOME", home.path())
        .env("HERMES_TEST_ISOLATION", "1")
        .env("API_SERVER_PORT", "0")
        .env("HERMES__ADMIN__PORT", "0")
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let before_start: Vec<String> = lines
        .by_ref()
        .map_while(Result::ok)
        .take_while(|l| !l.contains("hermesd started"))
        .collect();
    let unsupported: Vec<&String> = before_start
        .iter()
        .filter(|l| l.contains("not supported by hermesd yet"))
        .collect();
    if unsupported.len() != 1 {
        let _ = child.kill();
        panic!("expected one warning: {before_start:#?}");
    }
    assert!(
        unsupported[0].contains("WARN") && unsupported[0].contains("without effect: honcho"),
        "{unsupported:?}"
    );
    assert!(home.path().join("state.db").exists());
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{rest:?}");
    assert!(rest.iter().any(|l| l.contains("SIGTERM")), "{rest:?}");
    assert!(
        rest.iter().any(|l| l.contains("state.db closed")),
        "{rest:?}"
    );
}

#[test]
fn invalid_config_exits_78_before_touching_anything() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "approvals:\n  mode: sometimes\nsession_reset:\n  at_hour: 99\n",
    )
    .unwrap();
    let out = run_once(
        home.path(),
        &[
            ("TELEGRAM_BOT_TOKEN", "123456:SECRET-TOKEN-VALUE"),
            ("API_SERVER_KEY", "short"),
        ],
    );
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    for key in ["approvals.mode", "session_reset.at_hour", "API_SERVER_KEY"] {
        assert!(err.contains(key), "missing {key}: {err}");
    }
    assert!(
        !err.contains("SECRET-TOKEN-VALUE") && !err.contains("short"),
        "{err}"
    );
    assert!(!home.path().join("state.db").exists());
}

/// Intervals that would panic in `Duration::from_secs_f64` (once mid-turn or at start) are
/// refused before anything starts, naming the key.
#[test]
fn intervals_too_long_for_a_duration_exit_78_naming_the_key() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "streaming:\n  enabled: true\n  edit_interval: 1e20\n",
    )
    .unwrap();
    let out = run_once(home.path(), &[("HERMESD_DRAIN_TIMEOUT_SECS", "1e30")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    for key in ["streaming.edit_interval", "HERMESD_DRAIN_TIMEOUT_SECS"] {
        assert!(err.contains(key), "missing {key}: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert!(!home.path().join("state.db").exists());
}

/// `hermesd run` on `home` with a clean environment plus `env`, to completion.
fn run_once(home: &std::path::Path, env: &[(&str, &str)]) -> std::process::Output {
    Command::new(HERMESD)
        .arg("run")
        .env_clear()
        .env("HOME", home.join("user"))
        .env("HERMES_HOME", home)
        .env("HERMES_TEST_ISOLATION", "1")
        .env("API_SERVER_PORT", "0")
        .env("HERMES__ADMIN__PORT", "0")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}
