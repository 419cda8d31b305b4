//! The terminal and process tools against real processes: exit codes, merged stderr, the
//! persistent working directory, timeouts that kill the whole process group, the output cap,
//! ANSI stripping, approval blocking, interrupts, and the background process lifecycle.

use std::path::Path;
use std::time::Duration;

use hermesd::tools::{ToolCtx, builtin_registry};
use serde_json::{Value, json};

async fn run(ctx: &ToolCtx, tool: &str, args: Value) -> Value {
    let registry = builtin_registry();
    let out = registry
        .dispatch(tool, &args.to_string(), ctx.clone())
        .await;
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn ctx(dir: &Path) -> ToolCtx {
    ToolCtx::for_tests(dir)
}

fn pid_alive(pid: i32) -> bool {
    // A zombie waiting to be reaped by init is dead for our purposes.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.split_whitespace().nth(2).map(|s| s != "Z"))
        .unwrap_or(false)
}

#[tokio::test]
async fn exit_codes_output_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let ok = run(
        &ctx,
        "terminal",
        json!({"command": "echo hello; echo oops >&2"}),
    )
    .await;
    assert_eq!(
        ok,
        json!({"output": "hello\noops", "exit_code": 0, "error": null})
    );
    let failed = run(&ctx, "terminal", json!({"command": "exit 3"})).await;
    assert_eq!(failed["exit_code"], 3);
    let grep = run(&ctx, "terminal", json!({"command": "echo abc | grep zzz"})).await;
    assert_eq!(grep["exit_code"], 1);
    assert_eq!(grep["exit_code_meaning"], "No matches found (not an error)");
    let colored = run(
        &ctx,
        "terminal",
        json!({"command": "printf '\\033[31mred\\033[0m\\n'"}),
    )
    .await;
    assert_eq!(colored["output"], "red");
    let invalid = run(&ctx, "terminal", json!({"command": 42})).await;
    assert_eq!(
        invalid["error"],
        "Invalid command: expected string, got int"
    );
    assert_eq!(invalid["status"], "error");
}

#[tokio::test]
async fn the_working_directory_persists_per_session() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let mut ctx = ctx(dir.path());
    let root = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        run(&ctx, "terminal", json!({"command": "pwd"})).await["output"],
        root.display().to_string()
    );
    run(&ctx, "terminal", json!({"command": "cd sub"})).await;
    let inside = run(&ctx, "terminal", json!({"command": "pwd"})).await;
    assert_eq!(inside["output"], root.join("sub").display().to_string());
    // Relative file-tool paths follow the shell.
    run(&ctx, "terminal", json!({"command": "echo data > f.txt"})).await;
    let read = run(&ctx, "read_file", json!({"path": "f.txt"})).await;
    assert_eq!(read["content"], "1|data");
    // workdir applies to one command; another session keeps its own directory.
    let once = run(
        &ctx,
        "terminal",
        json!({"command": "pwd", "workdir": root.display().to_string()}),
    )
    .await;
    assert_eq!(once["output"], root.display().to_string());
    ctx.session_id = "other".into();
    assert_eq!(
        run(&ctx, "terminal", json!({"command": "pwd"})).await["output"],
        root.display().to_string()
    );
    let bad = run(
        &ctx,
        "terminal",
        json!({"command": "ls", "workdir": "/tmp; rm -rf x"}),
    )
    .await;
    assert_eq!(bad["status"], "blocked");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let pidfile = dir.path().join("child.pid");
    // The foreground guard refuses a top-level `&` (glued or not); inside `bash -c` the
    // background child still belongs to the command's process group.
    let command = format!(
        "bash -c 'sleep 300 & echo $! > {}; echo started; wait'",
        pidfile.display()
    );
    let started = std::time::Instant::now();
    let result = run(&ctx, "terminal", json!({"command": command, "timeout": 1})).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(result["exit_code"], 124);
    assert_eq!(result["output"], "started\n\n[Command timed out after 1s]");
    let child: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !pid_alive(child),
        "the backgrounded grandchild {child} survived the timeout"
    );
    let silent = run(
        &ctx,
        "terminal",
        json!({"command": "sleep 30", "timeout": 1}),
    )
    .await;
    assert_eq!(silent["output"], "[Command timed out after 1s]");
}

#[tokio::test]
async fn long_output_is_capped_with_the_notice() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = ctx(dir.path());
    ctx.limits.max_output_chars = 2000;
    let result = run(&ctx, "terminal", json!({"command": "seq 1 20000"})).await;
    let output = result["output"].as_str().unwrap();
    assert!(
        output.chars().count() <= 2000,
        "{} chars",
        output.chars().count()
    );
    assert!(output.starts_with("1\n2\n3\n"));
    assert!(output.ends_with("19999\n20000"));
    assert!(output.contains("... [output cut: "), "{output}");
    // The total counts everything the shell printed (seq's 108,894 characters plus the
    // working-directory marker the wrapper appends).
    let total: usize = output
        .split(" characters dropped from the middle")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .map(|n| n.replace(',', "").parse().unwrap())
        .unwrap();
    assert!((108_894..109_100).contains(&total), "{total}");
    assert_eq!(result["exit_code"], 0);
}

#[tokio::test]
async fn dangerous_commands_need_approval_and_foreground_servers_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    std::fs::create_dir(dir.path().join("build")).unwrap();
    let blocked = run(&ctx, "terminal", json!({"command": "rm -rf build"})).await;
    assert_eq!(blocked["status"], "blocked");
    assert_eq!(blocked["exit_code"], -1);
    assert_eq!(
        blocked["error"],
        "BLOCKED: the approval request could not reach the user. Do not try again."
    );
    assert!(
        dir.path().join("build").exists(),
        "the command must not have run"
    );
    let hardline = run(&ctx, "terminal", json!({"command": "rm -rf /"})).await;
    assert!(
        hardline["error"]
            .as_str()
            .unwrap()
            .starts_with("BLOCKED (hardline)")
    );
    let server = run(
        &ctx,
        "terminal",
        json!({"command": "python3 -m http.server 8000"}),
    )
    .await;
    assert_eq!(server["status"], "error");
    assert!(
        server["error"]
            .as_str()
            .unwrap()
            .contains("looks like a server or watcher")
    );
    let too_long = run(&ctx, "terminal", json!({"command": "make", "timeout": 601})).await;
    assert!(
        too_long["error"]
            .as_str()
            .unwrap()
            .starts_with("A foreground timeout of 601s is over the 600s limit")
    );
}

/// Waits (bounded) until `path` exists: an observable condition, not a guessed delay.
async fn wait_for_file(path: &Path) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_interrupt_stops_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let pidfile = dir.path().join("shell.pid");
    let command = format!(
        "echo begun; echo $$ > {}.tmp; mv {0}.tmp {0}; sleep 60",
        pidfile.display()
    );
    let task = tokio::spawn({
        let ctx = ctx.clone();
        async move { run(&ctx, "terminal", json!({"command": command})).await }
    });
    wait_for_file(&pidfile).await;
    ctx.cancel.cancel();
    let result = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result["exit_code"], 130);
    assert_eq!(result["output"], "begun\n\n[Command interrupted]");
    let shell: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !pid_alive(shell),
        "the interrupted shell {shell} is still alive"
    );
}

#[tokio::test]
async fn background_processes_can_be_polled_fed_waited_and_killed() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let started = run(
        &ctx,
        "terminal",
        json!({"command": "echo ready; read line; echo got $line", "background": true}),
    )
    .await;
    assert_eq!(started["output"], "Background process started");
    assert_eq!(started["exit_code"], 0);
    let id = started["session_id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("proc_") && id.len() == 17, "{id}");

    let listed = run(&ctx, "process", json!({"action": "list"})).await;
    assert_eq!(listed["processes"][0]["session_id"], id.as_str());
    let poll = run(&ctx, "process", json!({"action": "poll", "session_id": id})).await;
    assert_eq!(poll["status"], "running");

    let sent = run(
        &ctx,
        "process",
        json!({"action": "submit", "session_id": id, "data": "hello"}),
    )
    .await;
    assert_eq!(sent, json!({"status": "ok", "bytes_written": 6}));
    let waited = run(
        &ctx,
        "process",
        json!({"action": "wait", "session_id": id, "timeout": 20}),
    )
    .await;
    assert_eq!(waited["status"], "exited");
    assert_eq!(waited["exit_code"], 0);
    assert_eq!(waited["output"], "ready\ngot hello\n");
    let log = run(&ctx, "process", json!({"action": "log", "session_id": id})).await;
    assert_eq!(log["output"], "ready\ngot hello");
    assert_eq!(log["total_lines"], 2);

    // Another session cannot see or touch it.
    let mut stranger = ctx.clone();
    stranger.session_id = "someone-else".into();
    let hidden = run(
        &stranger,
        "process",
        json!({"action": "poll", "session_id": id}),
    )
    .await;
    assert_eq!(hidden["status"], "not_found");

    let long = run(
        &ctx,
        "terminal",
        json!({"command": "sleep 300", "background": true}),
    )
    .await;
    let long_id = long["session_id"].as_str().unwrap().to_owned();
    let pid = long["pid"].as_i64().unwrap() as i32;
    let timeout = run(
        &ctx,
        "process",
        json!({"action": "wait", "session_id": long_id, "timeout": 1}),
    )
    .await;
    assert_eq!(timeout["status"], "timeout");
    assert_eq!(timeout["timeout_note"], "Waited 1s, process still running");
    let killed = run(
        &ctx,
        "process",
        json!({"action": "kill", "session_id": long_id}),
    )
    .await;
    assert_eq!(killed["status"], "killed");
    assert_eq!(killed["termination_source"], "process.kill");
    assert!(!pid_alive(pid), "killed process {pid} is still alive");
    let again = run(
        &ctx,
        "process",
        json!({"action": "kill", "session_id": long_id}),
    )
    .await;
    assert_eq!(again["status"], "already_exited");
    assert_eq!(again["exit_code"], -15);

    let missing = run(&ctx, "process", json!({"action": "poll"})).await;
    assert_eq!(missing["error"], "session_id is required for poll");
    let unknown = run(
        &ctx,
        "process",
        json!({"action": "explode", "session_id": id}),
    )
    .await;
    assert!(
        unknown["error"]
            .as_str()
            .unwrap()
            .starts_with("'explode' is not something the process tool does")
    );
}

#[tokio::test]
async fn dropping_the_call_kills_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let pidfile = dir.path().join("shell.pid");
    let command = format!(
        "echo $$ > {}.tmp; mv {0}.tmp {0}; sleep 60",
        pidfile.display()
    );
    let task = tokio::spawn({
        let ctx = ctx.clone();
        async move { run(&ctx, "terminal", json!({"command": command})).await }
    });
    wait_for_file(&pidfile).await;
    task.abort();
    let _ = task.await;
    let shell: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SIGKILL is delivered asynchronously; wait (bounded) for the kernel to finish it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pid_alive(shell) {
        assert!(
            std::time::Instant::now() < deadline,
            "shell {shell} outlived its tool call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
