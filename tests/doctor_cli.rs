//! End-to-end: `hermesd doctor` against temporary homes and a fake of the platforms' and the
//! model's HTTP APIs (tests/support/fake_platforms.rs), with a cleared environment. Checks
//! the lines, the JSON report and the exit code, and that no token is ever printed.

#[path = "support/fake_platforms.rs"]
mod fake_platforms;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fake_platforms::{FakePlatforms, Verdict};
use serde_json::Value;

const TELEGRAM: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0";
const SLACK_BOT: &str = "xoxb-1111-2222-abcdefABCDEF0123";
const SLACK_APP: &str = "xapp-1-A1111-2222-abcdef0123456789";
const DISCORD: &str = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789";
const MODEL_KEY: &str = "sk-doctor-test-key-0123456789";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `<tmp>/.hermes` (mode 0700) with `config.yaml` and a 0600 `.env`.
fn home_with(dir: &Path, config_yaml: &str, dotenv: &str) -> PathBuf {
    let home = dir.join(".hermes");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(home.join("config.yaml"), config_yaml).unwrap();
    let env_file = home.join(".env");
    std::fs::write(&env_file, dotenv).unwrap();
    std::fs::set_permissions(&env_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    home
}

/// A config pointing every platform and the model at `base`.
fn config_for(base: &str) -> String {
    format!(
        "model:\n  provider: custom\n  base_url: {base}/v1\n  default: test-model\n  api_key: {MODEL_KEY}\n\
         platforms:\n  telegram:\n    extra: {{base_url: \"{base}/bot\"}}\n  \
         slack:\n    extra: {{api_base_url: \"{base}/api\"}}\n  \
         discord:\n    extra: {{api_base_url: \"{base}/api/v10\"}}\n"
    )
}

fn all_tokens_dotenv() -> String {
    format!(
        "TELEGRAM_BOT_TOKEN={TELEGRAM}\nSLACK_BOT_TOKEN={SLACK_BOT}\nSLACK_APP_TOKEN={SLACK_APP}\n\
         DISCORD_BOT_TOKEN={DISCORD}\n"
    )
}

fn doctor(home: &Path, args: &[&str]) -> Output {
    let user_home = home.parent().expect("the Hermes home has a parent");
    Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .arg("doctor")
        .args(args)
        .env_clear()
        .env("HOME", user_home)
        .env("HERMES_HOME", home)
        .output()
        .expect("hermesd runs")
}

fn assert_no_secret(output: &Output) {
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    for secret in [TELEGRAM, SLACK_BOT, SLACK_APP, DISCORD, MODEL_KEY] {
        assert!(!all.contains(secret), "a secret was printed:\n{all}");
    }
    // Not even the Telegram token's secret half on its own.
    assert!(
        !all.contains("AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"),
        "{all}"
    );
}

/// The JSON report's checks with this name.
fn checks_named<'a>(report: &'a Value, name: &str) -> Vec<&'a Value> {
    report["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .filter(|check| check["name"] == name)
        .collect()
}

fn status_of(report: &Value, name: &str) -> String {
    let found = checks_named(report, name);
    assert_eq!(found.len(), 1, "one '{name}' check in {report:#}");
    found[0]["status"].as_str().unwrap().to_owned()
}

fn json_report(output: &Output) -> Value {
    serde_json::from_str(&text(&output.stdout)).unwrap_or_else(|e| {
        panic!(
            "doctor --json printed no JSON ({e}):\n{}",
            text(&output.stdout)
        )
    })
}

#[test]
fn a_healthy_home_passes_and_every_credential_is_accepted() {
    let fake = FakePlatforms::start(Verdict::Accept);
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), &config_for(&fake.base), &all_tokens_dotenv());

    let output = doctor(&home, &[]);
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        text(&output.stderr)
    );
    for expected in [
        "ok    config: ",
        "ok    home: ",
        "ok    permissions: 1 secret files",
        "ok    state.db: not created yet",
        "ok    telegram.token: getMe accepted the token (bot @doctor_bot)",
        "ok    slack.token: auth.test accepted the token (team Doctors, user doctor_bot)",
        "ok    slack.app_token: well-formed",
        "ok    discord.token: /users/@me accepted the token (bot doctor_bot)",
        "ok    model.custom: ",
        "0 error(s)",
    ] {
        assert!(
            stdout.contains(expected),
            "missing '{expected}' in:\n{stdout}"
        );
    }
    assert_no_secret(&output);

    // Each credential went to its own endpoint, the way the platform expects it.
    let calls = fake.calls();
    let find = |path: &str| {
        calls
            .iter()
            .find(|call| call.path == path)
            .unwrap_or_else(|| panic!("no call to {path}: {calls:?}"))
            .clone()
    };
    assert_eq!(find(&format!("/bot{TELEGRAM}/getMe")).method, "GET");
    let slack = find("/api/auth.test");
    assert_eq!(slack.method, "POST");
    assert_eq!(
        slack.authorization.as_deref(),
        Some(&*format!("Bearer {SLACK_BOT}"))
    );
    let discord = find("/api/v10/users/@me");
    assert_eq!(
        discord.authorization.as_deref(),
        Some(&*format!("Bot {DISCORD}"))
    );
    let models = find("/v1/models");
    assert_eq!(
        models.authorization.as_deref(),
        Some(&*format!("Bearer {MODEL_KEY}"))
    );

    let json = doctor(&home, &["--json"]);
    assert_eq!(json.status.code(), Some(0));
    let report = json_report(&json);
    assert_eq!(report["ok"], true);
    for name in [
        "telegram.token",
        "slack.token",
        "discord.token",
        "model.custom",
        "state.db",
    ] {
        assert_eq!(status_of(&report, name), "ok", "{name}: {report:#}");
    }
    assert_no_secret(&json);
}

#[test]
fn rejected_credentials_are_errors_with_a_fix() {
    let fake = FakePlatforms::start(Verdict::Reject);
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), &config_for(&fake.base), &all_tokens_dotenv());

    let output = doctor(&home, &["--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stdout));
    let report = json_report(&output);
    assert_eq!(report["ok"], false);
    assert_eq!(report["status"], "error");
    for (name, says) in [
        ("telegram.token", "getMe answered 401"),
        ("slack.token", "auth.test answered invalid_auth"),
        ("discord.token", "/users/@me answered 401"),
        ("model.custom", "answered 401"),
    ] {
        let check = checks_named(&report, name)[0];
        assert_eq!(check["status"], "error", "{check}");
        let message = check["message"].as_str().unwrap();
        assert!(
            message.starts_with("rejected: ") && message.contains(says),
            "{check}"
        );
        assert!(
            check["hint"].as_str().is_some_and(|h| !h.is_empty()),
            "{check}"
        );
    }
    assert_no_secret(&output);

    let lines = doctor(&home, &[]);
    assert_eq!(lines.status.code(), Some(1));
    let stdout = text(&lines.stdout);
    assert!(
        stdout.contains("error telegram.token: rejected: getMe answered 401 Unauthorized (fix: "),
        "{stdout}"
    );
    assert!(stdout.contains("4 error(s)"), "{stdout}");
    assert_no_secret(&lines);
}

#[test]
fn unreachable_endpoints_are_warnings_not_errors() {
    // A port that was free a moment ago: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), &config_for(&base), &all_tokens_dotenv());

    let output = doctor(&home, &["--json", "--timeout", "10"]);
    let report = json_report(&output);
    for name in [
        "telegram.token",
        "slack.token",
        "discord.token",
        "model.custom",
    ] {
        let check = checks_named(&report, name)[0];
        assert_eq!(check["status"], "warn", "{check}");
        assert!(
            check["message"]
                .as_str()
                .unwrap()
                .starts_with("unreachable: "),
            "{check}"
        );
    }
    assert_eq!(output.status.code(), Some(0), "{report:#}");
    assert_no_secret(&output);
}

#[test]
fn offline_skips_the_network_and_calls_nothing() {
    let fake = FakePlatforms::start(Verdict::Reject);
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), &config_for(&fake.base), &all_tokens_dotenv());
    let output = doctor(&home, &["--json", "--offline"]);
    let report = json_report(&output);
    assert_eq!(status_of(&report, "model.custom"), "skip");
    assert_eq!(status_of(&report, "telegram.token"), "ok");
    let telegram = checks_named(&report, "telegram.token")[0]["message"].clone();
    assert_eq!(
        telegram,
        "well-formed; not sent to the platform (--offline)"
    );
    assert_eq!(output.status.code(), Some(0), "{report:#}");
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
}

#[test]
fn malformed_tokens_are_errors_never_sent_and_never_printed() {
    let fake = FakePlatforms::start(Verdict::Accept);
    let dir = tempfile::tempdir().unwrap();
    let bad_telegram = "123456789-not-a-telegram-token-at-all";
    let bad_slack = "xoxp-1111-2222-userTokenNotBot";
    let bad_app = "app-token-without-prefix-123";
    let bad_discord = "only.two-parts-here";
    let dotenv = format!(
        "TELEGRAM_BOT_TOKEN={bad_telegram}\nSLACK_BOT_TOKEN={bad_slack}\n\
         SLACK_APP_TOKEN={bad_app}\nDISCORD_BOT_TOKEN={bad_discord}\n"
    );
    let home = home_with(dir.path(), &config_for(&fake.base), &dotenv);

    let output = doctor(&home, &["--json"]);
    assert_eq!(output.status.code(), Some(1));
    let report = json_report(&output);
    for name in [
        "telegram.token",
        "slack.token",
        "slack.app_token",
        "discord.token",
    ] {
        let check = checks_named(&report, name)[0];
        assert_eq!(check["status"], "error", "{check}");
        assert!(
            check["message"]
                .as_str()
                .unwrap()
                .starts_with("malformed: "),
            "{check}"
        );
    }
    let slack = checks_named(&report, "slack.token")[0]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(slack.contains("'xoxp-'"), "{slack}");
    // Only the model endpoint was called: malformed tokens never leave the machine.
    let paths: Vec<String> = fake.calls().into_iter().map(|call| call.path).collect();
    assert_eq!(paths, ["/v1/models"]);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    for secret in [bad_telegram, bad_slack, bad_app, bad_discord] {
        assert!(!all.contains(secret), "{secret} printed:\n{all}");
    }
}

#[test]
fn a_broken_home_reports_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join(".hermes");
    std::fs::create_dir_all(home.join("platforms").join("pairing")).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(
        home.join("config.yaml"),
        "approvals:\n  mode: maybe\n  timeout: soon\nadmin:\n  host: 0.0.0.0\n",
    )
    .unwrap();
    std::fs::write(
        home.join(".env"),
        "OPENAI_API_KEY=sk-broken-home-key-0123456789\n",
    )
    .unwrap();
    std::fs::set_permissions(home.join(".env"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let pairing = home
        .join("platforms")
        .join("pairing")
        .join("telegram-approved.json");
    std::fs::write(&pairing, "{}").unwrap();
    std::fs::set_permissions(&pairing, std::fs::Permissions::from_mode(0o640)).unwrap();
    // A database whose header is fine but whose pages are garbage.
    let mut corrupt = b"SQLite format 3\0".to_vec();
    corrupt.extend(std::iter::repeat_n(0xA5u8, 8192 - corrupt.len()));
    std::fs::write(home.join("state.db"), &corrupt).unwrap();

    let output = doctor(&home, &["--json"]);
    assert_eq!(output.status.code(), Some(1));
    let report = json_report(&output);
    let config_errors: Vec<String> = checks_named(&report, "config")
        .iter()
        .map(|check| {
            assert_eq!(check["status"], "error", "{check}");
            check["message"].as_str().unwrap().to_owned()
        })
        .collect();
    for key in ["approvals.mode", "approvals.timeout", "admin.host"] {
        assert!(
            config_errors.iter().any(|m| m.starts_with(key)),
            "no error for {key}: {config_errors:?}"
        );
    }
    let permissions: Vec<&Value> = checks_named(&report, "permissions");
    assert_eq!(permissions.len(), 2, "{report:#}");
    let env_line = permissions
        .iter()
        .find(|c| c["message"].as_str().unwrap().contains(".env is mode 0644"))
        .expect("the .env line");
    assert_eq!(
        env_line["hint"],
        format!("chmod 600 {}", home.join(".env").display())
    );
    assert!(permissions.iter().any(|c| {
        c["message"]
            .as_str()
            .unwrap()
            .contains("telegram-approved.json is mode 0640")
    }));
    let database = checks_named(&report, "state.db")[0];
    assert_eq!(database["status"], "error", "{database}");
    assert!(
        database["hint"].as_str().unwrap().contains(".recover"),
        "{database}"
    );
    assert_eq!(status_of(&report, "platforms"), "skip");

    let lines = doctor(&home, &[]);
    let stdout = text(&lines.stdout);
    assert!(
        stdout.contains("error config: approvals.mode: "),
        "{stdout}"
    );
    assert!(stdout.contains("error state.db: "), "{stdout}");
    assert!(!stdout.contains("sk-broken-home-key"), "{stdout}");
    assert_eq!(lines.status.code(), Some(1));
}

/// Opens (creating or bringing up to date) the state.db at `path` as hermesd does at start.
fn create_state_db(path: &Path) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = hermesd::state::Store::open(path).unwrap();
    runtime.block_on(store.close());
}

#[test]
fn a_sound_state_db_is_reported_with_its_schema_version() {
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), "", "");
    create_state_db(&home.join("state.db"));
    let output = doctor(&home, &["--json", "--offline"]);
    let report = json_report(&output);
    let database = checks_named(&report, "state.db")[0];
    assert_eq!(database["status"], "ok");
    assert_eq!(
        database["message"],
        format!(
            "intact, schema v{}; search indexes: messages_fts live, messages_fts_trigram live; \
             a test write succeeded (rolled back)",
            hermesd::state::SCHEMA_VERSION
        )
    );
}

/// An optional index whose tokenizer this build cannot load (Hermes's CJK index) makes every
/// message write fail until hermesd has opened the file once; doctor's test write finds it.
#[test]
fn a_write_that_an_unloadable_index_would_fail_is_reported_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(dir.path(), "", "");
    let path = home.join("state.db");
    create_state_db(&path);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE VIRTUAL TABLE messages_fts_cjk USING fts5(content, tokenize='unicode61');
         CREATE TRIGGER messages_fts_cjk_insert AFTER INSERT ON messages BEGIN
             INSERT INTO messages_fts_cjk(rowid, content) VALUES (new.id, new.content);
         END;
         PRAGMA writable_schema = ON;
         UPDATE sqlite_master SET sql = replace(sql, 'unicode61', 'cjk_unicode61')
         WHERE name = 'messages_fts_cjk';",
    )
    .unwrap();
    drop(conn);
    let output = doctor(&home, &["--json", "--offline"]);
    let report = json_report(&output);
    let database = checks_named(&report, "state.db")[0];
    assert_eq!(database["status"], "error", "{report:#}");
    let message = database["message"].as_str().unwrap();
    assert!(
        message.contains("messages_fts_cjk not usable here"),
        "{message}"
    );
    assert!(
        message.contains("a test write failed: no such tokenizer: cjk_unicode61"),
        "{message}"
    );
    assert!(
        database["hint"]
            .as_str()
            .unwrap()
            .contains("start hermesd once"),
        "{report:#}"
    );

    // After one start the index is stale, its triggers gone, and writes work.
    create_state_db(&path);
    let report = json_report(&doctor(&home, &["--json", "--offline"]));
    let database = checks_named(&report, "state.db")[0];
    assert_eq!(database["status"], "ok", "{report:#}");
}

/// Settings hermesd accepts without acting on them are named in one doctor warning.
#[test]
fn settings_not_supported_yet_are_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    let home = home_with(
        dir.path(),
        "mcp_servers: {github: {command: npx, keepalive_interval: 30}}\nagent: {gateway_notify_interval: 60}\n",
        "",
    );
    let output = doctor(&home, &["--json", "--offline"]);
    let report = json_report(&output);
    let warnings: Vec<&Value> = checks_named(&report, "config")
        .into_iter()
        .filter(|check| check["status"] == "warn")
        .collect();
    assert_eq!(warnings.len(), 1, "{report:#}");
    assert_eq!(
        warnings[0]["message"],
        "2 settings are set but not supported by hermesd yet, so without effect: \
         agent.gateway_notify_interval, mcp_servers.github.keepalive_interval"
    );
}

#[test]
fn whatsapp_cloud_settings_are_checked_without_showing_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let token = "EAAG-doctor-whatsapp-token-0123456789";
    // No app secret, no verify token: the adapter would refuse every delivery.
    let home = home_with(
        dir.path(),
        "model:\n  provider: custom\n  base_url: http://127.0.0.1:9/v1\n  default: m\n",
        &format!(
            "WHATSAPP_CLOUD_PHONE_NUMBER_ID=106540352242922\nWHATSAPP_CLOUD_ACCESS_TOKEN={token}\n"
        ),
    );
    let output = doctor(&home, &["--json", "--offline"]);
    let report = json_report(&output);
    let warned: Vec<String> = checks_named(&report, "whatsapp_cloud")
        .iter()
        .map(|c| format!("{} {}", c["status"], c["message"]))
        .collect();
    assert!(
        warned
            .iter()
            .any(|w| w.contains("warn") && w.contains("APP_SECRET")),
        "{warned:?}"
    );
    assert!(
        warned.iter().any(|w| w.contains("VERIFY_TOKEN")),
        "{warned:?}"
    );
    // A phone number where Meta's numeric id belongs is an error `run` would stop on.
    std::fs::write(
        home.join(".env"),
        format!("WHATSAPP_CLOUD_PHONE_NUMBER_ID=\"+49 151 1\"\nWHATSAPP_CLOUD_ACCESS_TOKEN={token}\nWHATSAPP_CLOUD_APP_SECRET=s\nWHATSAPP_CLOUD_VERIFY_TOKEN=v\n"),
    )
    .unwrap();
    let output = doctor(&home, &["--json", "--offline"]);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(all.contains("numeric id"), "{all}");
    assert!(!all.contains(token), "the access token was printed:\n{all}");
    assert!(!output.status.success());
}
