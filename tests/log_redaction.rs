//! Secrets never reach the logs, whoever logs them: the real daemon runs with tokens in the
//! environment, in `.env` and in config.yaml, in a home whose *path* contains them (the
//! daemon logs its home at start), and its stderr is searched for every one of them — in
//! JSON and in text format. Also checks `--log-format auto` end to end.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const TELEGRAM: &str = "987654321:AAEredactionTestTokenValue_0123456789";
const SLACK_BOT: &str = "xoxb-2222-3333-redactionSlackBot";
const MODEL_KEY: &str = "sk-redaction-model-key-424242";
const PASSWORD: &str = "hunter2-but-longer";
const SECRETS: [&str; 4] = [TELEGRAM, SLACK_BOT, MODEL_KEY, PASSWORD];

/// A home whose directory name contains every secret, with `.env` and config.yaml holding
/// some of them. Platforms stay disabled so nothing reaches for the network.
fn leaky_home(dir: &Path) -> PathBuf {
    let home = dir.join(format!("h-{TELEGRAM}-{SLACK_BOT}-{MODEL_KEY}-{PASSWORD}"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.yaml"),
        format!(
            "model:\n  api_key: {MODEL_KEY}\nadmin:\n  port: 0\nplatforms:\n  \
             telegram: {{enabled: false}}\n  slack: {{enabled: false}}\n  discord: {{enabled: false}}\n"
        ),
    )
    .unwrap();
    std::fs::write(home.join(".env"), format!("SLACK_BOT_TOKEN={SLACK_BOT}\n")).unwrap();
    home
}

fn start(dir: &Path, home: &Path, args: &[&str], extra_env: &[(&str, &str)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(args)
        .arg("run")
        .env_clear()
        .env("HOME", dir.join("user"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("HERMES_HOME", home)
        .env("HERMES_TEST_ISOLATION", "1")
        .env("API_SERVER_PORT", "0")
        .env("RUST_LOG", "debug")
        .env("TELEGRAM_BOT_TOKEN", TELEGRAM)
        .env("MY_SERVICE_PASSWORD", PASSWORD)
        .envs(extra_env.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hermesd starts")
}

/// Runs the daemon until it logs that it started, stops it with SIGTERM and returns all of
/// its stderr. Every wait is bounded.
fn run_and_stop(args: &[&str], extra_env: &[(&str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let home = leaky_home(dir.path());
    let mut child = start(dir.path(), &home, args, extra_env);
    let (lines_tx, lines) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let mut seen = Vec::new();
    loop {
        match lines.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => {
                let started = line.contains("hermesd started");
                seen.push(line);
                if started {
                    break;
                }
            }
            Err(e) => {
                let _ = child.kill();
                panic!("no 'hermesd started' line ({e}); stderr so far: {seen:#?}");
            }
        }
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    reader.join().unwrap();
    seen.extend(lines.try_iter());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{seen:#?}");
    seen
}

fn assert_redacted(lines: &[String]) {
    let all = lines.join("\n");
    for secret in SECRETS {
        assert!(!all.contains(secret), "'{secret}' reached the logs:\n{all}");
    }
    // The Telegram token's secret half alone is not in there either.
    assert!(!all.contains("AAEredactionTestTokenValue"), "{all}");
}

#[test]
fn json_logs_never_contain_a_configured_secret() {
    let lines = run_and_stop(&["--log-format", "json"], &[]);
    assert_redacted(&lines);
    let started: serde_json::Value = lines
        .iter()
        .find(|line| line.contains("hermesd started"))
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .unwrap();
    // The home path was logged, with every secret in it masked.
    let home = started["home"].as_str().expect("home field");
    assert!(home.ends_with("h-***-***-***-***"), "{home}");
    for line in &lines {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
    }
}

#[test]
fn text_logs_never_contain_a_configured_secret() {
    let lines = run_and_stop(&["--log-format", "text"], &[]);
    assert_redacted(&lines);
    let started = lines
        .iter()
        .find(|line| line.contains("hermesd started"))
        .unwrap();
    assert!(started.contains("h-***-***-***-***"), "{started}");
    assert!(!started.starts_with('{'), "{started}");
}

#[test]
fn auto_format_is_json_under_systemd_and_redacted() {
    let lines = run_and_stop(&[], &[("JOURNAL_STREAM", "8:4242")]);
    assert_redacted(&lines);
    let started = lines
        .iter()
        .find(|line| line.contains("hermesd started"))
        .unwrap();
    let parsed: serde_json::Value = serde_json::from_str(started).expect("JSON under systemd");
    assert_eq!(parsed["level"], "INFO");
}

/// A secret from `.env` put in the wrong config key makes the configuration invalid, and the
/// validation error quotes the value: every command that prints configuration errors masks it.
#[test]
fn commands_printing_configuration_errors_mask_a_quoted_secret() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hermes");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".env"), format!("MY_PROBE_TOKEN={PASSWORD}\n")).unwrap();
    std::fs::write(
        home.join("config.yaml"),
        "approvals:\n  mode: ${MY_PROBE_TOKEN}\n",
    )
    .unwrap();
    for args in [
        &["config", "check"][..],
        &["doctor"],
        &["doctor", "--json"],
        &["health"],
        &["run"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_hermesd"))
            .args(args)
            .env_clear()
            .env("HOME", dir.path())
            .env("HERMES_HOME", &home)
            .env("HERMES_TEST_ISOLATION", "1")
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!output.status.success(), "{args:?} accepted it: {all}");
        assert!(all.contains("approvals.mode"), "{args:?}: {all}");
        assert!(!all.contains(PASSWORD), "{args:?} leaked the secret: {all}");
    }
}
