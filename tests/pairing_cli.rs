//! `hermesd pairing …` as an owner runs it: the real binary, a temporary HERMES_HOME, the
//! Python CLI's texts, and a daemon-side store working on the same files at the same time.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use hermesd::gateway::pairing::{PairingRequest, PairingStore};
use hermesd::home::HermesHome;

const HERMESD: &str = env!("CARGO_BIN_EXE_hermesd");

fn command(home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(HERMESD);
    command
        .args(args)
        .env_clear()
        .env("HOME", home.join("user-home"))
        .env("HERMES_HOME", home)
        .env("HERMES_TEST_ISOLATION", "1");
    command
}

fn hermesd(home: &Path, args: &[&str]) -> Output {
    command(home, args).output().expect("run hermesd")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn issue(store: &PairingStore, platform: &str, user: &str, name: &str) -> String {
    match store.request_code(platform, user, name, now()).unwrap() {
        PairingRequest::Issued(code) => code.as_str().to_owned(),
        other => panic!("no code for {platform}/{user}: {other:?}"),
    }
}

#[test]
fn list_approve_revoke_report_what_happened() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let out = hermesd(home, &["pairing", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "Nobody has asked to pair yet: no pending requests, no approved users.\n"
    );

    let store = PairingStore::open(&HermesHome::at(home)).unwrap();
    let code = issue(&store, "telegram", "42", "bob");
    let out = hermesd(home, &["pairing", "list"]);
    let listed = stdout(&out);
    assert!(
        listed.starts_with("\n  Pending Pairing Requests (1):\n  Platform     Code "),
        "{listed}"
    );
    assert!(listed.contains("\n  telegram     "), "{listed}");
    assert!(
        listed.ends_with("0m ago\n\n  No approved users.\n\n"),
        "{listed}"
    );
    assert!(!listed.contains(&code), "the list must not reveal the code");

    let lower = code.to_lowercase();
    let out = hermesd(home, &["pairing", "approve", "Telegram", &lower]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "\n  Approved: bob (42) may now use the bot on telegram.\n  \
         Their next message is answered; they need do nothing else.\n\n"
    );
    assert!(store.is_approved("telegram", "42"));

    let out = hermesd(home, &["pairing", "list", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["pending"], serde_json::json!([]));
    assert_eq!(json["approved"][0]["user_id"], "42");
    assert_eq!(json["approved"][0]["user_name"], "bob");
    assert_eq!(json["approved"][0]["platform"], "telegram");

    let out = hermesd(home, &["pairing", "approve", "telegram", &lower]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        format!(
            "\n  No pending code '{code}' on 'telegram': it was never issued or has expired.\n  \
             'hermesd pairing list' shows the codes still waiting.\n\n"
        )
    );

    let out = hermesd(home, &["pairing", "revoke", "telegram", "42"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        "\n  Revoked access for user 42 on telegram.\n\n"
    );
    assert!(!store.is_approved("telegram", "42"));
    let out = hermesd(home, &["pairing", "revoke", "telegram", "42"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        "\n  Nothing to revoke: user 42 is not approved on telegram.\n\n"
    );
}

#[test]
fn the_fifth_wrong_code_locks_the_platform() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let store = PairingStore::open(&HermesHome::at(home)).unwrap();
    let code = issue(&store, "discord", "7", "");
    for _ in 0..4 {
        let out = hermesd(home, &["pairing", "approve", "discord", "WRONG234"]);
        assert!(
            stdout(&out).contains("never issued or has expired"),
            "{}",
            stdout(&out)
        );
    }
    let out = hermesd(home, &["pairing", "approve", "discord", "WRONG234"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "\n  Approvals on 'discord' are blocked: too many wrong codes were tried.\n  \
             Lockout clears in ~59 minute(s).\n  \
             To lift it now, remove the '_lockout:discord' key from "
        ),
        "{text}"
    );
    let rate_limits = home.join("platforms/pairing/_rate_limits.json");
    assert!(
        text.ends_with(&format!("{}\n\n", rate_limits.display())),
        "{text}"
    );
    // The right code is refused while locked.
    let out = hermesd(home, &["pairing", "approve", "discord", &code]);
    assert!(
        stdout(&out).contains("are blocked: too many wrong codes"),
        "{}",
        stdout(&out)
    );
    assert!(!store.is_approved("discord", "7"));
}

#[test]
fn failures_are_one_error_line_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = hermesd(dir.path(), &["pairing", "approve", "../etc", "ABCDEFGH"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: invalid platform name \"../etc\""),
        "{err}"
    );

    // A home that cannot hold the pairing directory.
    let file_home = dir.path().join("not-a-dir");
    std::fs::write(&file_home, "").unwrap();
    let out = hermesd(&file_home, &["pairing", "list"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: cannot open the pairing store: "),
        "{err}"
    );
}

#[test]
fn profile_and_home_flags_choose_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let profile_home = HermesHome::at(root.join("profiles/coder"));
    let store = PairingStore::open(&profile_home).unwrap();
    let code = issue(&store, "slack", "U1", "");
    // The root store does not know the code; the profile's does.
    let out = hermesd(&root, &["pairing", "approve", "slack", &code]);
    assert_eq!(out.status.code(), Some(1));
    let out = hermesd(
        &root,
        &["--profile", "coder", "pairing", "approve", "slack", &code],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(store.is_approved("slack", "U1"));
    assert!(
        root.join("profiles/coder/platforms/pairing/slack-approved.json")
            .exists()
    );

    let elsewhere = dir.path().join("elsewhere");
    let other = PairingStore::open(&HermesHome::at(&elsewhere)).unwrap();
    let code = issue(&other, "telegram", "5", "");
    let home_flag = elsewhere.to_str().unwrap();
    let out = hermesd(
        &root,
        &["--home", home_flag, "pairing", "approve", "telegram", &code],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(other.is_approved("telegram", "5"));
}

#[test]
fn approval_extends_a_configured_env_allowlist_and_keeps_the_file_mode() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let dotenv = home.join(".env");
    std::fs::write(
        &dotenv,
        "TELEGRAM_BOT_TOKEN=123:abc\nTELEGRAM_ALLOWED_USERS=1\n",
    )
    .unwrap();
    std::fs::set_permissions(&dotenv, std::fs::Permissions::from_mode(0o640)).unwrap();
    let store = PairingStore::open(&HermesHome::at(home)).unwrap();
    let code = issue(&store, "telegram", "42", "");
    let out = hermesd(home, &["pairing", "approve", "telegram", &code]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&dotenv).unwrap(),
        "TELEGRAM_BOT_TOKEN=123:abc\nTELEGRAM_ALLOWED_USERS=1,42\n"
    );
    let mode = std::fs::metadata(&dotenv).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    let out = hermesd(home, &["pairing", "revoke", "telegram", "42"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(&dotenv).unwrap(),
        "TELEGRAM_BOT_TOKEN=123:abc\nTELEGRAM_ALLOWED_USERS=1\n"
    );
}

fn spawn_approve(home: &Path, platform: &str, code: &str) -> Child {
    command(home, &["pairing", "approve", platform, code])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hermesd")
}

#[test]
fn cli_approvals_and_daemon_requests_at_once_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let store = PairingStore::open(&HermesHome::at(home)).unwrap();
    let platforms: Vec<String> = (0..6).map(|i| format!("p{i}")).collect();
    let codes: Vec<String> = platforms
        .iter()
        .map(|p| issue(&store, p, "owner-approved", ""))
        .collect();

    // Six approvals and four wrong codes, all running while this process keeps writing.
    let mut approvals: Vec<Child> = platforms
        .iter()
        .zip(&codes)
        .map(|(p, c)| spawn_approve(home, p, c))
        .collect();
    let mut failures: Vec<Child> = (0..4)
        .map(|_| spawn_approve(home, "shared", "WRONG234"))
        .collect();
    for i in 0..60 {
        issue(&store, &format!("q{i}"), "visitor", "");
    }

    for child in approvals.iter_mut() {
        let status = child.wait().unwrap();
        assert!(status.success(), "an approval failed");
    }
    for child in failures.iter_mut() {
        assert_eq!(child.wait().unwrap().code(), Some(1));
    }
    for platform in &platforms {
        assert!(store.is_approved(platform, "owner-approved"), "{platform}");
        assert!(
            store
                .list_pending(Some(platform), now())
                .unwrap()
                .is_empty()
        );
    }
    let limits: serde_json::Value = serde_json::from_slice(
        &std::fs::read(home.join("platforms/pairing/_rate_limits.json")).unwrap(),
    )
    .unwrap();
    for i in 0..60 {
        assert!(limits.get(format!("q{i}:visitor")).is_some(), "lost q{i}");
    }
    for platform in &platforms {
        assert!(limits.get(format!("{platform}:owner-approved")).is_some());
    }
    assert_eq!(limits["_failures:shared"], serde_json::json!(4));
    assert_eq!(store.list_pending(None, now()).unwrap().len(), 60);
}
