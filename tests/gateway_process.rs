//! The gateway's process plumbing against real processes and files: one daemon per home,
//! `--replace`, stale pid files, and credential locks shared across homes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Lines};
use std::path::Path;
use std::process::{Child, ChildStderr, Command, Stdio};

use hermesd::gateway::lock_record::{LockError, ProcessRecord, read_json};
use hermesd::gateway::process_info;
use hermesd::gateway::token_lock::{ScopedLock, ScopedLockRecord, identity_hash, lock_path};

const HERMESD: &str = env!("CARGO_BIN_EXE_hermesd");
const TOKEN: &str = "123456:SECRET-TOKEN-VALUE";

fn daemon(home: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(HERMESD);
    command
        .arg("run")
        .args(extra)
        .env_clear()
        .env("HOME", home.join("user"))
        .env("HERMES_HOME", home)
        .env("HERMES_TEST_ISOLATION", "1")
        .env("API_SERVER_PORT", "0")
        .env("HERMES__ADMIN__PORT", "0")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Starts `hermesd run` and returns once it has announced itself.
fn start(home: &Path, extra: &[&str]) -> (Child, Lines<BufReader<ChildStderr>>) {
    let mut child = daemon(home, extra).spawn().expect("spawn hermesd");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let started = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.contains("hermesd started"));
    assert!(started.is_some(), "daemon never reported start");
    (child, lines)
}

fn stop(mut child: Child, lines: Lines<BufReader<ChildStderr>>) -> Option<i32> {
    process_info::terminate(child.id()).expect("SIGTERM");
    let _rest: Vec<String> = lines.map_while(Result::ok).collect();
    child.wait().expect("wait").code()
}

#[test]
fn a_second_daemon_on_one_home_is_refused_by_name() {
    let home = tempfile::tempdir().expect("tempdir");
    let (first, lines) = start(home.path(), &[]);
    let out = daemon(home.path(), &[]).output().expect("second");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let expected = format!(
        "hermesd is already running for {} (pid {}); stop it or use --replace",
        home.path().display(),
        first.id()
    );
    assert!(err.contains(&expected), "{err}");
    let pid_file: ProcessRecord = read_json(&home.path().join("gateway.pid")).expect("pid file");
    assert_eq!(pid_file.pid, first.id());
    assert_eq!(pid_file.kind.as_deref(), Some("hermes-gateway"));
    assert_eq!(pid_file.start_time, process_info::start_time(first.id()));
    assert_eq!(stop(first, lines), Some(0));
    assert!(
        !home.path().join("gateway.pid").exists(),
        "pid file removed on exit"
    );
}

#[test]
fn replace_stops_the_running_daemon_and_takes_over() {
    let home = tempfile::tempdir().expect("tempdir");
    let (mut old, old_lines) = start(home.path(), &[]);
    let old_pid = old.id();
    let old_start = process_info::start_time(old_pid);
    let (new, new_lines) = start(home.path(), &["--replace"]);
    let old_rest: Vec<String> = old_lines.map_while(Result::ok).collect();
    assert_eq!(old.wait().expect("wait").code(), Some(0), "{old_rest:?}");
    assert!(
        old_rest.iter().any(|l| l.contains("SIGTERM")),
        "{old_rest:?}"
    );

    let marker: serde_json::Value =
        read_json(&home.path().join(".gateway-takeover.json")).expect("takeover marker");
    assert_eq!(marker["target_pid"], old_pid);
    assert_eq!(marker["target_start_time"].as_u64(), old_start);
    assert_eq!(marker["replacer_pid"], new.id());
    assert_eq!(
        marker["replacer_hermes_home"],
        home.path().to_string_lossy().as_ref()
    );
    assert!(
        marker["written_at"]
            .as_str()
            .is_some_and(|t| t.ends_with("+00:00"))
    );

    // The old daemon's exit must not have removed the new one's pid file.
    let pid_file: ProcessRecord = read_json(&home.path().join("gateway.pid")).expect("pid file");
    assert_eq!(pid_file.pid, new.id());
    assert_eq!(stop(new, new_lines), Some(0));
}

#[test]
fn a_stale_pid_file_from_a_dead_gateway_is_taken_over() {
    let home = tempfile::tempdir().expect("tempdir");
    let mut dead = Command::new("true").spawn().expect("spawn true");
    let dead_pid = dead.id();
    dead.wait().expect("reap");
    std::fs::write(
        home.path().join("gateway.pid"),
        format!(r#"{{"pid": {dead_pid}, "kind": "hermes-gateway", "argv": ["hermes", "gateway", "run"], "start_time": 12345}}"#),
    )
    .expect("write stale pid file");
    let (child, lines) = start(home.path(), &[]);
    let pid_file: ProcessRecord = read_json(&home.path().join("gateway.pid")).expect("pid file");
    assert_eq!(pid_file.pid, child.id());
    assert_eq!(stop(child, lines), Some(0));
}

fn lock_env(dir: &Path) -> BTreeMap<String, String> {
    BTreeMap::from([(
        "HERMES_GATEWAY_LOCK_DIR".to_owned(),
        dir.to_string_lossy().into_owned(),
    )])
}

fn assert_token_free(text: &str) {
    assert!(
        !text.contains(TOKEN) && !text.contains("SECRET"),
        "token leaked: {text}"
    );
}

#[test]
fn one_token_cannot_serve_two_homes_in_one_process() {
    let root = tempfile::tempdir().expect("tempdir");
    let env = lock_env(&root.path().join("locks"));
    let (home_a, home_b) = (root.path().join("a"), root.path().join("b"));
    let held = ScopedLock::acquire("telegram-bot-token", TOKEN, &home_a, &env).expect("first");
    let path = lock_path("telegram-bot-token", TOKEN, &env).expect("path");
    assert_eq!(held.path(), path);
    assert!(path.ends_with(format!("telegram-bot-token-{}.lock", identity_hash(TOKEN))));
    let file = std::fs::read_to_string(&path).expect("lock file");
    assert_token_free(&file);
    let record: ScopedLockRecord = serde_json::from_str(&file).expect("record");
    assert_eq!(record.scope, "telegram-bot-token");
    assert_eq!(record.identity_hash, identity_hash(TOKEN));
    assert_eq!(record.process.pid, process_info::current_pid());
    assert_eq!(record.process.kind.as_deref(), Some("hermes-gateway"));

    let err = ScopedLock::acquire("telegram-bot-token", TOKEN, &home_b, &env).expect_err("second");
    let message = err.to_string();
    assert_token_free(&message);
    assert!(matches!(err, LockError::CredentialInUse { .. }), "{err:?}");
    assert!(
        message.contains(&home_a.to_string_lossy().into_owned()),
        "{message}"
    );
    assert!(
        message.contains(&format!("pid {}", process_info::current_pid())),
        "{message}"
    );

    drop(held);
    assert!(!path.exists(), "released on drop");
    ScopedLock::acquire("telegram-bot-token", TOKEN, &home_b, &env).expect("free after release");
}

#[test]
fn a_python_style_lock_is_honoured_while_its_gateway_lives_and_stale_after() {
    let root = tempfile::tempdir().expect("tempdir");
    let lock_dir = root.path().join("locks");
    let env = lock_env(&lock_dir);
    let home_a = root.path().join("a");
    std::fs::create_dir_all(&home_a).expect("home a");
    // A live gateway (the real daemon) that, like Python, holds the record but no OS lock.
    let (mut other, other_lines) = start(&home_a, &[]);
    let record = serde_json::json!({
        "pid": other.id(),
        "kind": "hermes-gateway",
        "argv": ["hermesd", "run"],
        "start_time": process_info::start_time(other.id()),
        "scope": "telegram-bot-token",
        "identity_hash": identity_hash(TOKEN),
        "metadata": {"platform": "telegram", "hermes_home": home_a.to_string_lossy()},
        "updated_at": "2025-01-01T00:00:00.000000+00:00",
    });
    std::fs::create_dir_all(&lock_dir).expect("lock dir");
    let path = lock_path("telegram-bot-token", TOKEN, &env).expect("path");
    std::fs::write(&path, record.to_string()).expect("write lock");

    let home_b = root.path().join("b");
    let err = ScopedLock::acquire("telegram-bot-token", TOKEN, &home_b, &env).expect_err("held");
    let message = err.to_string();
    assert!(
        message.contains(&format!("pid {}", other.id())),
        "{message}"
    );
    assert_token_free(&message);

    process_info::terminate(other.id()).expect("SIGTERM");
    let _rest: Vec<String> = other_lines.map_while(Result::ok).collect();
    other.wait().expect("wait");
    let lock = ScopedLock::acquire("telegram-bot-token", TOKEN, &home_b, &env).expect("stale");
    let file = std::fs::read_to_string(lock.path()).expect("lock file");
    assert_token_free(&file);
    assert!(
        file.contains(&home_b.to_string_lossy().into_owned()),
        "{file}"
    );
}

#[test]
fn the_daemon_reports_its_lifecycle_to_systemd_and_gateway_state_json() {
    use std::os::unix::net::UnixDatagram;
    use std::time::Duration;

    let home = tempfile::tempdir().expect("tempdir");
    let socket_path = home.path().join("notify.sock");
    let listener = UnixDatagram::bind(&socket_path).expect("bind");
    listener
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut command = daemon(home.path(), &[]);
    command
        .env("NOTIFY_SOCKET", &socket_path)
        .env("WATCHDOG_USEC", "200000");
    let mut child = command.spawn().expect("spawn");
    let lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut receive = || {
        let mut buf = [0u8; 128];
        let n = listener.recv(&mut buf).expect("notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    assert_eq!(receive(), "READY=1");
    let state: serde_json::Value =
        read_json(&home.path().join("gateway_state.json")).expect("state file");
    assert_eq!(state["gateway_state"], "running");
    assert_eq!(state["pid"], child.id());
    assert_eq!(state["kind"], "hermes-gateway");
    assert_eq!(receive(), "WATCHDOG=1");

    process_info::terminate(child.id()).expect("SIGTERM");
    let stopping = std::iter::repeat_with(&mut receive)
        .take(20)
        .find(|m| m != "WATCHDOG=1");
    assert_eq!(stopping.as_deref(), Some("STOPPING=1"));
    let _rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert_eq!(child.wait().expect("wait").code(), Some(0));
    let state: serde_json::Value =
        read_json(&home.path().join("gateway_state.json")).expect("state file");
    assert_eq!(state["gateway_state"], "stopped");
    assert_eq!(state["exit_reason"], "SIGTERM");
}
