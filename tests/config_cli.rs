//! End-to-end: `hermesd config check|show` against temporary homes, with a cleared
//! environment so nothing from the developer's machine leaks in.

use std::path::Path;
use std::process::{Command, Output};

const EXIT_CONFIG: i32 = 78;

/// Runs hermesd with only `HOME` and `HERMES_HOME` (plus `extra_env`) in its environment.
fn hermesd(home: &Path, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
    let user_home = home.parent().expect("the Hermes home has a parent");
    Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(args)
        .env_clear()
        .env("HOME", user_home)
        .env("HERMES_HOME", home)
        .envs(extra_env.iter().copied())
        .output()
        .expect("hermesd runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `<tmp>/.hermes`, created, with the given files.
fn hermes_home(dir: &Path, config_yaml: Option<&str>, dotenv: Option<&str>) -> std::path::PathBuf {
    let home = dir.join(".hermes");
    std::fs::create_dir_all(&home).unwrap();
    if let Some(yaml) = config_yaml {
        std::fs::write(home.join("config.yaml"), yaml).unwrap();
    }
    if let Some(dotenv) = dotenv {
        std::fs::write(home.join(".env"), dotenv).unwrap();
    }
    home
}

#[test]
fn check_passes_on_an_empty_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = hermes_home(dir.path(), None, None);
    let output = hermesd(&home, &["config", "check"], &[]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        text(&output.stderr)
    );
    assert_eq!(text(&output.stdout).trim(), "config ok");
}

#[test]
fn check_passes_on_the_shipped_default_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let default_yaml = include_str!("../config/default.yaml");
    let home = hermes_home(dir.path(), Some(default_yaml), None);
    let output = hermesd(&home, &["config", "check"], &[]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        text(&output.stderr)
    );
    let stderr = text(&output.stderr);
    assert!(
        !stderr.contains("warning") && !stderr.contains("error"),
        "{stderr}"
    );
}

#[test]
fn check_warns_about_unknown_keys_but_passes() {
    let dir = tempfile::tempdir().unwrap();
    let home = hermes_home(
        dir.path(),
        Some("telegram:\n  tokn: x\nterminal: {}\n"),
        None,
    );
    let output = hermesd(&home, &["config", "check"], &[]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        text(&output.stderr)
    );
    let stderr = text(&output.stderr);
    assert!(stderr.contains("unknown key 'telegram.tokn'"), "{stderr}");
    assert!(!stderr.contains("terminal"), "{stderr}");
}

#[test]
fn check_lists_every_error_and_exits_78() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "approvals:\n  mode: sometimes\n  timeout: soon\nadmin:\n  port: 70000\n";
    let home = hermes_home(
        dir.path(),
        Some(yaml),
        Some("API_SERVER_KEY=short-SECRET\n"),
    );
    let output = hermesd(
        &home,
        &["config", "check"],
        &[("DISCORD_ALLOWED_USERS", "1,2")],
    );
    assert_eq!(output.status.code(), Some(EXIT_CONFIG));
    let stderr = text(&output.stderr);
    for key in [
        "approvals.mode",
        "approvals.timeout",
        "admin.port",
        "API_SERVER_KEY",
    ] {
        assert!(
            stderr.contains(&format!("config error: {key}: ")),
            "{key} in {stderr}"
        );
    }
    assert!(!stderr.contains("short-SECRET"), "{stderr}");
    assert!(!text(&output.stdout).contains("config ok"));
}

#[test]
fn malformed_yaml_names_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let home = hermes_home(dir.path(), Some("model:\n  provider: [openai\n"), None);
    let output = hermesd(&home, &["config", "check"], &[]);
    assert_eq!(output.status.code(), Some(EXIT_CONFIG));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("config.yaml"), "{stderr}");
    assert!(stderr.contains("line "), "{stderr}");
}

#[test]
fn show_redacts_secrets_in_yaml_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let home = hermes_home(
        dir.path(),
        Some("model:\n  api_key: model-SECRET-1\n"),
        Some("API_SERVER_KEY=api-server-SECRET-2\nOPENAI_API_KEY=sk-SECRET-3\n"),
    );
    let env = [("TELEGRAM_BOT_TOKEN", "123456:SECRET-4")];

    let yaml = hermesd(&home, &["config", "show"], &env);
    assert_eq!(
        yaml.status.code(),
        Some(0),
        "stderr: {}",
        text(&yaml.stderr)
    );
    let stdout = text(&yaml.stdout);
    assert!(!stdout.contains("SECRET"), "{stdout}");
    assert!(stdout.contains("***"), "{stdout}");
    assert!(stdout.contains("busy_input_mode: interrupt"), "{stdout}");

    let json = hermesd(&home, &["config", "show", "--json"], &env);
    assert_eq!(
        json.status.code(),
        Some(0),
        "stderr: {}",
        text(&json.stderr)
    );
    let stdout = text(&json.stdout);
    assert!(!stdout.contains("SECRET"), "{stdout}");
    let parsed: serde_json::Value = serde_json::from_str(&stdout).expect("show --json is JSON");
    assert_eq!(parsed["platforms"]["telegram"]["enabled"], true);
    assert_eq!(parsed["platforms"]["telegram"]["token"], "***");
    assert_eq!(parsed["api_server"]["key"], "***");
    assert_eq!(parsed["approvals"]["timeout"], 60);
}

#[test]
fn show_on_an_invalid_config_exits_78() {
    let dir = tempfile::tempdir().unwrap();
    let home = hermes_home(dir.path(), Some("session_reset:\n  mode: weekly\n"), None);
    let output = hermesd(&home, &["config", "show", "--json"], &[]);
    assert_eq!(output.status.code(), Some(EXIT_CONFIG));
    assert!(text(&output.stderr).contains("config error: session_reset.mode: "));
    assert_eq!(text(&output.stdout), "");
}

#[test]
fn profile_and_home_flags_select_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let home = hermes_home(dir.path(), Some("approvals:\n  timeout: 11\n"), None);
    let profile = home.join("profiles").join("coder");
    std::fs::create_dir_all(&profile).unwrap();
    std::fs::write(profile.join("config.yaml"), "approvals:\n  timeout: 22\n").unwrap();
    let other = dir.path().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("config.yaml"), "approvals:\n  timeout: 33\n").unwrap();

    let timeout = |args: &[&str]| {
        let output = hermesd(&home, args, &[]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "stderr: {}",
            text(&output.stderr)
        );
        let parsed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        parsed["approvals"]["timeout"].as_u64().unwrap()
    };
    assert_eq!(timeout(&["config", "show", "--json"]), 11);
    assert_eq!(timeout(&["-p", "coder", "config", "show", "--json"]), 22);
    assert_eq!(
        timeout(&["--profile", "coder", "config", "show", "--json"]),
        22
    );
    let other = other.to_str().unwrap();
    assert_eq!(timeout(&["--home", other, "config", "show", "--json"]), 33);
}

/// A setting hermesd accepts but does not act on is named in one warning; `--strict` turns
/// that warning into a failure, and passes a configuration without one.
#[test]
fn settings_not_supported_yet_are_named_and_strict_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let home = hermes_home(
        dir.path(),
        Some(
            "mcp_servers: {github: {command: npx, elicitation: {enabled: true}}}\nhoncho: {enabled: true}\nagent: {max_turns: 9}\n",
        ),
        None,
    );
    let output = hermesd(&home, &["config", "check"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert_eq!(
        stderr.matches("not supported by hermesd yet").count(),
        1,
        "one warning: {stderr}"
    );
    assert!(
        stderr.contains("2 settings are set but not supported by hermesd yet, so without effect: honcho, mcp_servers.github.elicitation"),
        "{stderr}"
    );

    let strict = hermesd(&home, &["config", "check", "--strict"], &[]);
    assert_eq!(
        strict.status.code(),
        Some(EXIT_CONFIG),
        "{}",
        text(&strict.stderr)
    );
    let stderr = text(&strict.stderr);
    assert!(
        stderr.contains("honcho, mcp_servers.github.elicitation"),
        "{stderr}"
    );
    assert!(stderr.contains("--strict"), "{stderr}");
    assert!(
        text(&strict.stdout).is_empty(),
        "no 'config ok' under --strict"
    );

    let clean = hermes_home(
        &dir.path().join("clean"),
        Some("agent: {max_turns: 9}\n"),
        None,
    );
    let strict = hermesd(&clean, &["config", "check", "--strict"], &[]);
    assert_eq!(strict.status.code(), Some(0), "{}", text(&strict.stderr));
    assert_eq!(text(&strict.stdout).trim(), "config ok");
}

// `config check` and `doctor` run the validation `hermesd run` runs before serving, for
// every platform: a home `run` refuses with exit 78 fails `config check` with 78 and the
// same key named, and doctor reports it as an error.

/// Runs `run`, `config check` and `doctor --offline` on a fresh home with `env`; asserts
/// `run` and `config check` exit 78 naming `needle`, and doctor reports it as an error.
fn all_refuse(env: &[(&str, &str)], needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join(".hermes");
    std::fs::create_dir_all(&home).unwrap();
    let run = hermesd(&home, &["run"], env);
    assert_eq!(
        run.status.code(),
        Some(EXIT_CONFIG),
        "run: {}",
        text(&run.stderr)
    );
    assert!(
        text(&run.stderr).contains(needle),
        "run: {}",
        text(&run.stderr)
    );

    let check = hermesd(&home, &["config", "check"], env);
    let stderr = text(&check.stderr);
    assert_eq!(check.status.code(), Some(EXIT_CONFIG), "check: {stderr}");
    assert!(stderr.contains(needle), "check names {needle}: {stderr}");
    assert!(!text(&check.stdout).contains("config ok"));

    let doctor = hermesd(&home, &["doctor", "--offline", "--json"], env);
    let report: serde_json::Value =
        serde_json::from_slice(&doctor.stdout).expect("doctor --json prints JSON");
    let errors: Vec<String> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["status"] == "error")
        .map(|c| c["message"].to_string())
        .collect();
    assert!(
        errors.iter().any(|e| e.contains(needle)),
        "doctor reports {needle}: {report:#}"
    );
    assert_ne!(doctor.status.code(), Some(0));
}

const PLATFORM_TOKEN: &str = "123456:ABCdefGhIJKlmnOPqrstUVwxyz012345678";

#[test]
fn a_webhook_without_its_secret_fails_check_as_it_fails_run() {
    all_refuse(
        &[
            ("TELEGRAM_BOT_TOKEN", PLATFORM_TOKEN),
            ("TELEGRAM_WEBHOOK_URL", "https://bot.example.com/telegram"),
        ],
        "TELEGRAM_WEBHOOK_SECRET",
    );
}

#[test]
fn a_webhook_secret_telegram_would_refuse_fails_check() {
    all_refuse(
        &[
            ("TELEGRAM_BOT_TOKEN", PLATFORM_TOKEN),
            ("TELEGRAM_WEBHOOK_URL", "https://bot.example.com/telegram"),
            ("TELEGRAM_WEBHOOK_SECRET", "not allowed: spaces and colons"),
        ],
        "TELEGRAM_WEBHOOK_SECRET",
    );
}

#[test]
fn a_webhook_on_a_port_telegram_does_not_deliver_to_fails_check() {
    all_refuse(
        &[
            ("TELEGRAM_BOT_TOKEN", PLATFORM_TOKEN),
            (
                "TELEGRAM_WEBHOOK_URL",
                "https://bot.example.com:9000/telegram",
            ),
            ("TELEGRAM_WEBHOOK_SECRET", "fine_secret-1"),
        ],
        "TELEGRAM_WEBHOOK_URL",
    );
}

#[test]
fn an_http_api_without_its_key_fails_check_as_it_fails_run() {
    all_refuse(&[("API_SERVER_ENABLED", "true")], "API_SERVER_KEY");
}

#[test]
fn slack_without_its_app_token_fails_check() {
    all_refuse(&[("SLACK_BOT_TOKEN", "xoxb-1-2-abc")], "SLACK_APP_TOKEN");
}

/// Guard for the cases above: a home that passes `config check` is one `run` starts.
#[test]
fn a_valid_webhook_home_passes_check() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join(".hermes");
    std::fs::create_dir_all(&home).unwrap();
    let env = [
        ("TELEGRAM_BOT_TOKEN", PLATFORM_TOKEN),
        (
            "TELEGRAM_WEBHOOK_URL",
            "https://bot.example.com:8443/telegram",
        ),
        ("TELEGRAM_WEBHOOK_SECRET", "fine_secret-1"),
    ];
    let check = hermesd(&home, &["config", "check"], &env);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    assert_eq!(text(&check.stdout).trim(), "config ok");
}

/// Issue 22: the PostgreSQL backend runs; its settings are checked naming the key (exit 78),
/// and its URL, a secret, is never printed, not even when the database cannot be reached.
#[test]
fn the_postgres_backend_checks_its_keys_and_the_url_never_shows() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "pg-s3cret-password";
    // Port 1 on loopback: nothing listens, so the connection is refused at once; libpq's
    // `connect_timeout` bounds the retrying to the minimum (2 s) instead of the default 30 s.
    let url = format!("postgres://hermes:{secret}@127.0.0.1:1/hermes?connect_timeout=2");
    let env = [("HERMES_DATABASE_URL", url.as_str())];
    for (yaml, key) in [
        (
            "state:\n  backend: postgres\n  lease_seconds: 0\n",
            "state.lease_seconds",
        ),
        (
            "state:\n  backend: postgres\n  lease_seconds: soon\n",
            "state.lease_seconds",
        ),
    ] {
        let home = hermes_home(dir.path(), Some(yaml), None);
        for args in [&["run"][..], &["config", "check"]] {
            let out = hermesd(&home, args, &env);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(EXIT_CONFIG), "{args:?}: {stderr}");
            assert!(stderr.contains(key), "{args:?}: {stderr}");
            assert!(!stderr.contains(secret) && !text(&out.stdout).contains(secret));
        }
    }
    let home = hermes_home(dir.path(), Some("state:\n  backend: postgres\n"), None);
    let out = hermesd(&home, &["config", "check"], &[]);
    assert_eq!(
        out.status.code(),
        Some(EXIT_CONFIG),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stderr).contains("state.postgres_url"));
    // Valid, but the database is down: a start-up failure that names no secret.
    for args in [&["run"][..], &["sessions", "list"]] {
        let out = hermesd(&home, args, &env);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("PostgreSQL"), "{args:?}: {stderr}");
        assert!(!stderr.contains(secret) && !text(&out.stdout).contains(secret));
    }

    let other = tempfile::tempdir().unwrap();
    let home = hermes_home(other.path(), Some("state:\n  backend: sqlite\n"), None);
    let show = hermesd(&home, &["config", "show"], &env);
    let stdout = text(&show.stdout);
    assert_eq!(show.status.code(), Some(0), "{}", text(&show.stderr));
    assert!(stdout.contains("postgres_url"), "{stdout}");
    assert!(!stdout.contains(secret) && !text(&show.stderr).contains(secret));
}
