//! The terminal a Hermes home configures, through the real binary and a Telegram chat
//! (issue 30): commands start in `terminal.cwd` and the project's `AGENTS.md` reaches the
//! prompt; without `terminal.cwd` the gateway starts in the home directory as Hermes's does;
//! with `terminal.sandbox_scope: user` two people's commands and file tools cannot reach each
//! other's files, and a command past its timeout is killed and the model is told so.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use serde_json::{Value, json};
use support::fake_model::{Reply, Step};
use telegram_support::{Rig, start};

/// The system prompt of the first model request.
fn first_system_prompt(rig: &Rig) -> String {
    let request = rig
        .model
        .requests()
        .into_iter()
        .next()
        .expect("a model request");
    request.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The newest tool result, parsed.
fn last_result(rig: &Rig) -> Value {
    let last = rig.tool_results().pop().expect("a tool result");
    serde_json::from_str(&last).unwrap_or(Value::String(last))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_works_in_terminal_cwd_and_reads_its_agents_md() {
    let project = tempfile::tempdir().unwrap();
    let project_dir = std::fs::canonicalize(project.path()).unwrap();
    std::fs::write(
        project_dir.join("AGENTS.md"),
        "Sign every answer as Captain ZX-417.\n",
    )
    .unwrap();
    let tail = format!("terminal:\n  cwd: {}\n", project_dir.display());
    let rig = start("", &tail, &[]).await;
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": "pwd; ls"}),
    )));
    rig.model.push(Step::text("listed it"));
    rig.say_privately(7, "where are you working?", "listed it")
        .await;

    assert!(
        first_system_prompt(&rig).contains("Captain ZX-417"),
        "AGENTS.md of terminal.cwd is in the prompt"
    );
    let result = last_result(&rig);
    let output = result["output"].as_str().unwrap_or_default();
    assert!(
        output.starts_with(&project_dir.display().to_string()) && output.contains("AGENTS.md"),
        "{result}"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_terminal_cwd_the_gateway_starts_in_the_home_directory() {
    let user_home = tempfile::tempdir().unwrap();
    let user_dir = std::fs::canonicalize(user_home.path()).unwrap();
    std::fs::write(
        user_dir.join("AGENTS.md"),
        "Call the user Commander Q-88.\n",
    )
    .unwrap();
    let home_var = user_dir.display().to_string();
    let rig = start("", "", &[("HOME", home_var.as_str())]).await;
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": "pwd"}),
    )));
    rig.model.push(Step::text("found it"));
    rig.say_privately(7, "where?", "found it").await;
    assert!(first_system_prompt(&rig).contains("Commander Q-88"));
    assert_eq!(last_result(&rig)["output"], json!(home_var));
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_person_sandboxes_keep_two_people_apart_and_a_timeout_kills() {
    let rig = start("", "terminal:\n  sandbox_scope: user\n", &[]).await;

    // Person 7 leaves a note in their sandbox.
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": "echo note-of-seven > note.txt && pwd"}),
    )));
    rig.model.push(Step::text("noted"));
    rig.say_privately(7, "remember this", "noted").await;
    let seven_dir = last_result(&rig)["output"]
        .as_str()
        .expect("pwd output")
        .to_owned();
    let sandboxes = rig.home.path().join("sandboxes");
    assert!(
        seven_dir.starts_with(
            &std::fs::canonicalize(&sandboxes)
                .unwrap()
                .display()
                .to_string()
        ),
        "{seven_dir}"
    );
    assert!(
        seven_dir.contains("/user-"),
        "a per-person sandbox: {seven_dir}"
    );

    // Person 8 cannot read it, by command or by file tool, nor see the home.
    rig.model.push(Step::Reply(
        Reply::default()
            .with_tool_call(
                "terminal",
                json!({"command": format!("cat {seven_dir}/note.txt; ls {}; id -u", rig.home.path().display())}),
            )
            .with_tool_call("read_file", json!({"path": format!("{seven_dir}/note.txt")})),
    ));
    rig.model.push(Step::text("looked"));
    rig.say_privately(8, "read their note", "looked").await;
    let results = rig.tool_results();
    let (shell, file) = (&results[results.len() - 2], &results[results.len() - 1]);
    assert!(
        !shell.contains("note-of-seven") && !file.contains("note-of-seven"),
        "{shell} {file}"
    );
    assert!(shell.contains("No such file"), "{shell}");
    assert!(shell.contains("1000"), "{shell}");
    assert!(file.contains("error"), "{file}");

    // Person 7 still reads their own note through the file tool.
    rig.model.push(Step::Reply(Reply::tool_call(
        "read_file",
        json!({"path": "note.txt"}),
    )));
    rig.model.push(Step::text("read back"));
    rig.say_privately(7, "what did I say?", "read back").await;
    assert!(
        last_result(&rig).to_string().contains("note-of-seven"),
        "{}",
        last_result(&rig)
    );

    // A command past its timeout is killed, and the model reads that it was.
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": "sleep 600; echo never", "timeout": 2}),
    )));
    rig.model.push(Step::text("gave up"));
    rig.say_privately(7, "wait a long time", "gave up").await;
    let result = last_result(&rig);
    assert_eq!(result["exit_code"], 124, "{result}");
    let output = result["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("timed out after 2s") && !output.contains("never"),
        "{result}"
    );
    rig.stop().await;
}
