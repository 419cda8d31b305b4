//! The bubblewrap sandbox per scope (issue 30), through the terminal and file tools with a
//! real `bwrap`: a scope's commands and files stay in its own directory, another scope cannot
//! see them, nothing of the host's home or `HERMES_HOME` is visible, commands run as an
//! unprivileged uid without network, a timeout kills the whole sandbox, and background
//! processes run inside it too. Needs bubblewrap installed (`.ci/test` installs it).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hermesd::tools::backend::{BackendFactory, BwrapFactory, SandboxRef, Sandboxes, Scope};
use hermesd::tools::context::ToolCtx;
use serde_json::{Value, json};

fn env() -> BTreeMap<String, String> {
    BTreeMap::from([(
        "PATH".to_owned(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_owned()),
    )])
}

fn sandboxes(base: &Path, network: bool) -> Arc<Sandboxes> {
    let factory = BwrapFactory::new(base.to_path_buf(), network, None, &env())
        .unwrap_or_else(|e| panic!("{e} (install bubblewrap: apt-get install bubblewrap)"));
    Arc::new(Sandboxes::new(Arc::new(factory), Duration::from_secs(300)))
}

fn chat(id: &str) -> Scope {
    Scope::Chat {
        platform: "telegram".to_owned(),
        chat_id: id.to_owned(),
    }
}

/// A tool context of session `session` acting in `scope`'s sandbox.
fn ctx_in(dir: &Path, sandboxes: &Arc<Sandboxes>, scope: Scope, session: &str) -> ToolCtx {
    let mut ctx = ToolCtx::for_tests(dir);
    ctx.session_id = session.to_owned();
    ctx.sandbox = Some(SandboxRef {
        sandboxes: Arc::clone(sandboxes),
        scope,
    });
    ctx
}

async fn run(ctx: &ToolCtx, args: Value) -> Value {
    let out = hermesd::tools::terminal::terminal(ctx.clone(), args)
        .await
        .expect("terminal runs");
    serde_json::from_str(&out).expect("json result")
}

async fn sh(ctx: &ToolCtx, command: &str) -> Value {
    run(ctx, json!({"command": command})).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_scope_sees_only_its_own_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let host_home = tmp.path().join("home");
    std::fs::create_dir_all(&host_home).unwrap();
    std::fs::write(host_home.join("secret.txt"), "host secret").unwrap();
    let boxes = sandboxes(&tmp.path().join("sandboxes"), false);
    let a = ctx_in(tmp.path(), &boxes, chat("1"), "sa");
    let b = ctx_in(tmp.path(), &boxes, chat("2"), "sb");

    let wrote = sh(&a, "echo note-of-a > note.txt && pwd && id -u").await;
    assert_eq!(wrote["exit_code"], 0, "{wrote}");
    let out = wrote["output"].as_str().unwrap();
    let a_dir = out.lines().next().unwrap().to_owned();
    assert!(
        a_dir.starts_with(&tmp.path().join("sandboxes").display().to_string()),
        "{out}"
    );
    assert!(
        out.ends_with("1000"),
        "commands run as the sandbox uid: {out}"
    );

    // B cannot see A's file, the host's files around it, or the sandboxes' parent.
    let probe = sh(
        &b,
        &format!(
            "cat {a_dir}/note.txt; cat {}/secret.txt; ls {}; ls /etc; pwd",
            host_home.display(),
            tmp.path().join("sandboxes").display()
        ),
    )
    .await;
    assert!(probe["error"].is_null(), "{probe}");
    let text = probe["output"].as_str().unwrap();
    assert!(!text.contains("note-of-a"), "{text}");
    assert!(!text.contains("host secret"), "{text}");
    assert!(text.contains("No such file"), "{text}");
    assert!(
        !text.contains("shadow"),
        "only chosen parts of /etc are visible: {text}"
    );
    assert!(
        !text
            .lines()
            .any(|l| l == &a_dir[a_dir.rfind('/').unwrap() + 1..]),
        "A's directory listed: {text}"
    );

    // The file tools see the sandbox's files, and refuse another's.
    let read = hermesd::tools::files::read_file(a.clone(), json!({"path": "note.txt"}))
        .await
        .unwrap();
    assert!(read.contains("note-of-a"), "{read}");
    let refused =
        hermesd::tools::files::read_file(b.clone(), json!({"path": format!("{a_dir}/note.txt")}))
            .await
            .unwrap();
    assert!(!refused.contains("note-of-a"), "{refused}");
    assert!(refused.contains("error"), "{refused}");
    let written = hermesd::tools::files::write_file(
        b.clone(),
        json!({"path": "mine.txt", "content": "of b\n"}),
    )
    .await
    .unwrap();
    assert!(written.contains("bytes_written"), "{written}");
    let cat = sh(&b, "cat mine.txt").await;
    assert_eq!(
        cat["output"], "of b",
        "the command sees what the file tool wrote"
    );
    assert_eq!(boxes.open_count().await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_is_off_unless_configured() {
    let tmp = tempfile::tempdir().unwrap();
    let offline = ctx_in(
        tmp.path(),
        &sandboxes(&tmp.path().join("off"), false),
        chat("1"),
        "s1",
    );
    let out = sh(&offline, "cat /proc/net/dev").await;
    let text = out["output"].as_str().unwrap();
    let interfaces: Vec<&str> = text
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(interfaces, ["lo"], "{text}");

    let online = ctx_in(
        tmp.path(),
        &sandboxes(&tmp.path().join("on"), true),
        chat("1"),
        "s2",
    );
    let out = sh(&online, "cat /proc/net/dev").await;
    let text = out["output"].as_str().unwrap();
    let count = text.lines().skip(2).count();
    let host = std::fs::read_to_string("/proc/net/dev")
        .unwrap()
        .lines()
        .skip(2)
        .count();
    assert_eq!(
        count, host,
        "sandbox_network shares the host's interfaces: {text}"
    );
}

/// Whether any process on the host runs `sleep <seconds>`.
fn sleeping(seconds: u64) -> bool {
    let wanted = format!("sleep\0{seconds}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|cmdline| cmdline == wanted.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_kills_everything_the_command_started() {
    let seed: u64 = rand::random::<u64>() % 10_000;
    let seconds = 50_000 + seed;
    println!("seed {seed}: sleeping {seconds} s");
    let tmp = tempfile::tempdir().unwrap();
    let ctx = ctx_in(
        tmp.path(),
        &sandboxes(&tmp.path().join("s"), false),
        chat("1"),
        "s",
    );
    let out = run(
        &ctx,
        json!({"command": format!("bash -c 'sleep {seconds} & sleep {seconds}'; echo never"), "timeout": 2}),
    )
    .await;
    assert_eq!(out["exit_code"], 124, "{out}");
    let text = out["output"].as_str().unwrap();
    assert!(text.contains("timed out after 2s"), "{text}");
    assert!(!text.contains("never"), "{text}");
    // The pid namespace dies with the sandbox: the backgrounded sleep too.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while sleeping(seconds) {
        assert!(
            std::time::Instant::now() < deadline,
            "sleep {seconds} still runs"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_processes_run_inside_the_sandbox() {
    let tmp = tempfile::tempdir().unwrap();
    let boxes = sandboxes(&tmp.path().join("s"), false);
    let ctx = ctx_in(tmp.path(), &boxes, chat("1"), "s");
    let started = run(
        &ctx,
        json!({"command": "id -u; ls /; echo $HOME", "background": true}),
    )
    .await;
    let id = started["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();
    let waited = hermesd::tools::process_tool::process(
        ctx.clone(),
        json!({"action": "wait", "session_id": id, "timeout": 60}),
    )
    .await
    .unwrap();
    let waited: Value = serde_json::from_str(&waited).unwrap();
    let output = waited["output"]
        .as_str()
        .unwrap_or_else(|| panic!("{waited}"));
    assert!(output.starts_with("1000"), "{output}");
    assert!(
        !output.contains("root\n"),
        "no /root in the sandbox: {output}"
    );
    let dir = boxes.get(&chat("1")).await.unwrap().default_cwd();
    assert!(output.trim_end().ends_with(&dir), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_sandbox_directory_is_replaced_on_the_next_command() {
    let tmp = tempfile::tempdir().unwrap();
    let boxes = sandboxes(&tmp.path().join("s"), false);
    let ctx = ctx_in(tmp.path(), &boxes, chat("1"), "s");
    assert_eq!(sh(&ctx, "touch a").await["exit_code"], 0);
    let dir = boxes.get(&chat("1")).await.unwrap().default_cwd();
    std::fs::remove_dir_all(&dir).unwrap();
    let gone = sh(&ctx, "ls").await;
    let error = gone["error"].as_str().unwrap_or_else(|| panic!("{gone}"));
    assert!(
        error.contains("went away") && error.contains("fresh"),
        "{error}"
    );
    let again = sh(&ctx, "ls -a; pwd").await;
    assert_eq!(again["exit_code"], 0, "{again}");
    assert!(again["output"].as_str().unwrap().ends_with(&dir), "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_reports_a_working_sandbox() {
    let tmp = tempfile::tempdir().unwrap();
    let factory = BwrapFactory::new(tmp.path().join("s"), false, None, &env()).unwrap();
    let line = factory.probe().await.unwrap();
    assert!(
        line.contains("bubblewrap") && line.contains("no network"),
        "{line}"
    );
    assert!(
        !tmp.path().join("s").exists(),
        "the probe writes nothing under the base"
    );
}
