//! Private by default on disk, through the real binary: under umask 022 a daemon that
//! creates its home, serves a turn that writes memory and stops leaves nothing in
//! HERMES_HOME that group or others may open (directories 0700, files 0600); and
//! `hermesd doctor` names an existing looser home or file with the `chmod` that fixes it,
//! while the daemon itself leaves an operator's looser modes alone and says so in its log.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use support::daemon::{API_KEY, Daemon, api_env, daemon_binary};
use support::fake_model::{FakeModel, Reply, Step};

/// Every path under `root` (itself included) whose mode gives group or others any access,
/// with its mode. Symlinks are skipped: their own mode means nothing.
fn loose_entries(root: &Path) -> Vec<(PathBuf, u32)> {
    let mut loose = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            loose.push((path.clone(), mode));
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap().flatten() {
                pending.push(entry.path());
            }
        }
    }
    loose.sort();
    loose
}

fn all_entries(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        if path.is_dir() && !path.is_symlink() {
            for entry in std::fs::read_dir(&path).unwrap().flatten() {
                pending.push(entry.path());
            }
        }
        found.push(path);
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_umask_022_everything_the_daemon_creates_in_its_home_is_private() {
    let model = FakeModel::start().await;
    model.push(Step::Reply(Reply::tool_call(
        "memory",
        json!({"action": "add", "target": "memory", "content": "The user likes tea."}),
    )));
    model.push(Step::text("Noted."));
    let scratch = tempfile::tempdir().unwrap();
    // A home that does not exist yet: the daemon creates it.
    let home = scratch.path().join("hermes");
    let env = api_env(&home, &model.base_url());
    let start_home = home.clone();
    let daemon =
        tokio::task::spawn_blocking(move || Daemon::start_under_umask(&start_home, &env, "022"))
            .await
            .unwrap();
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", daemon.api_url()))
        .bearer_auth(API_KEY)
        .json(&json!({"messages": [{"role": "user", "content": "remember that I like tea"}]}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    model.wait_for_requests(2, Duration::from_secs(60)).await;

    // While it runs (state.db's WAL and shared-memory files exist now) and after it stopped.
    let running = loose_entries(&home);
    let (_, logs) = tokio::task::block_in_place(|| daemon.terminate());
    let stopped = loose_entries(&home);
    let entries = all_entries(&home);
    let names: Vec<String> = entries
        .iter()
        .map(|p| p.strip_prefix(&home).unwrap().display().to_string())
        .collect();
    assert!(
        names.iter().any(|n| n == "state.db"),
        "the turn left no state.db: {names:?}"
    );
    assert!(
        names.iter().any(|n| n.starts_with("memories/")),
        "the turn wrote no memory: {names:?}"
    );
    assert!(
        running.is_empty() && stopped.is_empty(),
        "readable by others while running: {running:#?}\nafter stopping: {stopped:#?}\n\
         everything: {names:#?}\nlog: {logs:#?}"
    );
}

fn doctor(home: &Path) -> String {
    let output = Command::new(daemon_binary())
        .arg("doctor")
        .env_clear()
        .env("HERMES_HOME", home)
        .env("HOME", home.join("user"))
        .env("HERMES_TEST_ISOLATION", "1")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .expect("run hermesd doctor");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looser_existing_home_is_reported_with_the_chmod_and_left_as_the_operator_set_it() {
    let model = FakeModel::start().await;
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("shared-home");
    let memories = home.join("memories");
    std::fs::create_dir_all(&memories).unwrap();
    std::fs::write(memories.join("MEMORY.md"), "The user likes tea.\n").unwrap();
    let chmod = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    chmod(&home, 0o750);
    chmod(&memories, 0o755);
    chmod(&memories.join("MEMORY.md"), 0o644);

    let report = doctor(&home);
    for (path, fix) in [
        (&home, format!("chmod 700 {}", home.display())),
        (&memories, format!("chmod 700 {}", memories.display())),
        (
            &memories.join("MEMORY.md"),
            format!("chmod 600 {}", memories.join("MEMORY.md").display()),
        ),
    ] {
        assert!(
            report.contains(&fix),
            "doctor did not say how to fix {}:\n{report}",
            path.display()
        );
    }

    // The daemon warns and leaves the operator's choice alone.
    let env = api_env(&home, &model.base_url());
    let start_home = home.clone();
    let daemon =
        tokio::task::spawn_blocking(move || Daemon::start_under_umask(&start_home, &env, "022"))
            .await
            .unwrap();
    let warning = tokio::task::block_in_place(|| {
        daemon.wait_for_line("group or other users", Duration::from_secs(60))
    })
    .expect("the daemon warned about the loose home");
    assert!(warning.contains("hermesd doctor"), "{warning}");
    tokio::task::block_in_place(|| daemon.terminate());
    let mode = std::fs::metadata(&home).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750, "the daemon changed the operator's mode");
    // What it created itself is private all the same.
    let db_mode = std::fs::metadata(home.join("state.db"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(db_mode, 0o600);
}
