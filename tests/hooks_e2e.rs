//! The operator's hooks through the real binary and a Telegram chat (issue 31, part 3): a
//! `pre_tool_call` hook blocks a terminal command and the model is told why; a hook that
//! hangs is killed with its process group at its timeout and the turn still answers; a hook
//! the operator has not approved does not run and the daemon says so; a gateway hook
//! (`hooks/<name>/HOOK.yaml` + an executable handler) gets session:start, agent:start and
//! agent:end.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};
use support::daemon::cli;
use support::fake_model::{Reply, Step};
use telegram_support::{WAIT, start, start_prepared};

/// Writes an executable shell script.
fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The CLI validates the whole configuration: the Telegram token the daemon gets from its
/// environment is put in the home's `.env` for it.
fn cli_can_load_config(home: &Path) {
    std::fs::write(
        home.join(".env"),
        "TELEGRAM_BOT_TOKEN=123456:cli-sees-a-token\n",
    )
    .unwrap();
}

fn hooks_block(event: &str, command: &Path, extra: &str) -> String {
    format!(
        "hooks:\n  {event}:\n    - command: \"{}\"\n{extra}",
        command.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_pre_tool_call_hook_stops_the_terminal_and_the_model_reads_why() {
    let scripts = tempfile::tempdir().unwrap();
    let guard = scripts.path().join("guard.sh");
    let seen = scripts.path().join("payload.json");
    // The hook keeps what it was given, then refuses.
    script(
        &guard,
        &format!(
            "cat > '{}'\necho '{{\"decision\": \"block\", \"reason\": \"marker files are off limits\"}}'",
            seen.display()
        ),
    );
    let note = scripts.path().join("note.sh");
    script(
        &note,
        "cat > /dev/null\necho '{\"context\": \"Operator note ZQ91: the marker is sacred\"}'",
    );
    let marker = scripts.path().join("marker");
    let tail = format!(
        "{}  pre_llm_call:\n    - command: \"{}\"\n",
        hooks_block(
            "pre_tool_call",
            &guard,
            "      matcher: \"terminal\"\n      timeout: 30\n",
        ),
        note.display()
    ) + "hooks_auto_accept: true\n";
    let rig = start("", &tail, &[]).await;
    // A command that would ask the owner's approval: the hook decides first, so nobody is
    // asked (an unanswered prompt would hold the turn past the wait).
    let victim = scripts.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    let command = format!(
        "rm -rf '{}' && touch '{}'",
        victim.display(),
        marker.display()
    );
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": command}),
    )));
    rig.model.push(Step::text("understood, not touching it"));
    rig.say_privately(7, "make the marker", "not touching it")
        .await;

    assert!(!marker.exists(), "the blocked command ran");
    assert!(victim.exists(), "the blocked command ran");
    assert!(
        rig.sent_to(7).iter().all(|m| m.reply_markup.is_none()),
        "a blocked call asked for approval: {:?}",
        rig.sent_to(7)
    );
    // The pre_llm_call hook's context reached the turn's user message in the requests.
    let saw = rig.model_saw();
    assert!(
        saw.first()
            .is_some_and(|t| t.starts_with("make the marker") && t.contains("ZQ91")),
        "{saw:?}"
    );
    let results = rig.tool_results();
    let last = results.last().expect("a tool result");
    assert!(
        last.contains("blocked by the operator's hook: marker files are off limits"),
        "{last}"
    );
    let payload: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(payload["hook_event_name"], "pre_tool_call");
    assert_eq!(payload["tool_name"], "terminal");
    assert_eq!(payload["tool_input"]["command"], command);
    assert!(
        payload["session_id"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    // hooks_auto_accept recorded the approval in Hermes's allowlist.
    let allowlist = std::fs::read_to_string(rig.home.path().join("shell-hooks-allowlist.json"))
        .expect("the approval is recorded");
    assert!(
        allowlist.contains(&guard.display().to_string()),
        "{allowlist}"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_hook_is_killed_at_its_timeout_and_the_turn_goes_on() {
    let scripts = tempfile::tempdir().unwrap();
    let hang = scripts.path().join("hang.sh");
    let pid_file = scripts.path().join("hook.pid");
    // The script leads its own process group; its sleep is a member of it.
    script(
        &hang,
        &format!("echo $$ > '{}'\nsleep 600", pid_file.display()),
    );
    let tail = hooks_block(
        "pre_tool_call",
        &hang,
        "      timeout: 2\nhooks_auto_accept: true\n",
    );
    let rig = start("", &tail, &[]).await;
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": "echo stillworking"}),
    )));
    rig.model
        .push(Step::text("the command printed stillworking"));
    rig.say_privately(7, "run it", "printed stillworking").await;

    let results = rig.tool_results();
    assert!(
        results.last().is_some_and(|r| r.contains("stillworking")),
        "{results:?}"
    );
    let pgid: i32 = std::fs::read_to_string(&pid_file)
        .expect("the hook ran")
        .trim()
        .parse()
        .unwrap();
    let group = rustix::process::Pid::from_raw(pgid).unwrap();
    assert_eq!(
        rustix::process::test_kill_process_group(group),
        Err(rustix::io::Errno::SRCH),
        "the hook's process group {pgid} outlived its timeout"
    );
    assert!(
        rig.daemon()
            .logs()
            .iter()
            .any(|l| l.contains("shell hook killed at its timeout")),
        "the kill is logged"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_without_the_operators_consent_does_not_run() {
    let scripts = tempfile::tempdir().unwrap();
    let hook = scripts.path().join("audit.sh");
    let ran = scripts.path().join("ran");
    script(&hook, &format!("touch '{}'", ran.display()));
    let tail = hooks_block("pre_tool_call", &hook, "hooks_auto_accept: false\n");
    let rig = start("", &tail, &[]).await;
    rig.daemon()
        .wait_for_line("hook not run: the operator has not approved it", WAIT)
        .expect("the daemon reports the hook it skips");
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": "echo ranunhooked"}),
    )));
    rig.model.push(Step::text("done without hooks"));
    rig.say_privately(7, "go", "done without hooks").await;
    assert!(!ran.exists(), "an unapproved hook ran");

    cli_can_load_config(rig.home.path());
    let listed = cli(rig.home.path(), &["hooks", "list"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(text.contains("NO (does not run)"), "{text}");
    let doctor = cli(rig.home.path(), &["doctor", "--offline"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("is not approved by the operator: it does not run"),
        "{text}"
    );
    // The approval `hermesd hooks accept` records is what `list` and the daemon read.
    let accepted = cli(rig.home.path(), &["hooks", "accept"]);
    let text = String::from_utf8_lossy(&accepted.stdout);
    assert!(text.contains("approved: pre_tool_call"), "{text}");
    let listed = cli(rig.home.path(), &["hooks", "list"]);
    assert!(!String::from_utf8_lossy(&listed.stdout).contains("NO (does not run)"));
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_hook_handler_gets_agent_start_and_end_on_stdin() {
    let out = tempfile::tempdir().unwrap();
    let events = out.path().join("events.jsonl");
    let events_path = events.clone();
    let rig = start_prepared(
        move |home| {
            let dir = home.join("hooks").join("audit");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("HOOK.yaml"),
                "name: audit\ndescription: keeps what agents do\nevents: [\"session:*\", \"agent:*\"]\n",
            )
            .unwrap();
            script(
                &dir.join("handler"),
                &format!(
                    "printf '%s ' \"$1\" >> '{0}'\ncat >> '{0}'\necho >> '{0}'",
                    events_path.display()
                ),
            );
            cli_can_load_config(home);
            let accepted = cli(home, &["hooks", "accept", "audit"]);
            let text = String::from_utf8_lossy(&accepted.stdout);
            assert!(text.contains("approved: gateway_hook"), "{text}");
        },
        "",
        "",
        &[],
    )
    .await;
    rig.model.push(Step::text("hello from the agent"));
    rig.say_privately(7, "hi there", "hello from the agent")
        .await;
    rig.daemon()
        .wait_for_line_where(
            |l| l.contains("gateway hook ran") && l.contains("agent:end"),
            WAIT,
        )
        .expect("the agent:end handler finished");

    let text = std::fs::read_to_string(&events).unwrap();
    let lines: Vec<(&str, Value)> = text
        .lines()
        .map(|line| {
            let (arg, body) = line.split_once(' ').unwrap();
            (arg, serde_json::from_str(body).unwrap())
        })
        .collect();
    // session:start, agent:start, agent:step (one model call), agent:end.
    assert_eq!(lines.len(), 4, "{text}");
    let (arg, session) = &lines[0];
    assert_eq!(
        *arg, "session:start",
        "a new chat's first message opens a session"
    );
    let (arg, start) = &lines[1];
    assert_eq!(*arg, "agent:start");
    assert_eq!(start["event"], "agent:start");
    assert_eq!(start["context"]["platform"], "telegram");
    assert_eq!(start["context"]["user_id"], "7");
    assert_eq!(start["context"]["message"], "hi there");
    assert_eq!(
        session["context"]["session_id"],
        start["context"]["session_id"]
    );
    let (arg, step) = &lines[2];
    assert_eq!(*arg, "agent:step");
    assert_eq!(step["context"]["iteration"], 1);
    let (arg, end) = &lines[3];
    assert_eq!(*arg, "agent:end");
    assert_eq!(end["context"]["response"], "hello from the agent");
    assert_eq!(
        end["context"]["session_id"], start["context"]["session_id"],
        "{text}"
    );
    rig.stop().await;
}
