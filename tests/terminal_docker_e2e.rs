//! The docker backend through the real binary and a Telegram chat, on a real engine (podman's
//! Docker API service, `tests/support/podman_engine.rs`): the file tools act on the
//! container's files, not the host's; a container that dies in the middle of a command gives
//! the model a clear tool error, and the next command runs in a fresh container.

#[path = "support/podman_engine.rs"]
#[allow(dead_code)]
mod podman_engine;
mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use podman_engine::{IMAGE, Podman};
use serde_json::{Value, json};
use support::fake_model::{Reply, Step};
use telegram_support::{Rig, start};

/// The tool results so far, parsed.
fn tool_results(rig: &Rig) -> Vec<Value> {
    rig.tool_results()
        .into_iter()
        .map(|c| serde_json::from_str(&c).unwrap_or(Value::String(c)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_the_containers_and_a_dead_container_is_replaced() {
    let podman = Podman::start().await;
    let docker_host = podman.host();
    let marker = format!("hermesd-e2e-{:08x}.txt", rand::random::<u32>());
    let tail = format!(
        "terminal:\n  backend: docker\n  docker_image: {IMAGE}\n  container_persistent: false\n  container_memory: 256\n"
    );
    let rig = start("", &tail, &[("DOCKER_HOST", docker_host.as_str())]).await;

    // A file the command made is read by read_file from the container, not the host.
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": format!("echo made-inside > /tmp/{marker}; cat /proc/1/cmdline")}),
    )));
    rig.model.push(Step::Reply(Reply::tool_call(
        "read_file",
        json!({"path": format!("/tmp/{marker}")}),
    )));
    rig.model.push(Step::text("read it"));
    rig.say_privately(7, "make a file", "read it").await;
    let results = tool_results(&rig);
    assert_eq!(results.len(), 2, "{results:#?} {:#?}", rig.sent_to(7));
    assert_eq!(results[0]["exit_code"], 0, "{}", results[0]);
    assert!(
        results[1].to_string().contains("made-inside"),
        "{}",
        results[1]
    );
    assert!(
        !std::path::Path::new("/tmp").join(&marker).exists(),
        "the file is the container's, not the host's"
    );

    // write_file, patch and search_files act in the container too.
    let notes = format!("/root/notes-{marker}");
    rig.model.push(Step::Reply(Reply::tool_call(
        "write_file",
        json!({"path": notes, "content": "ratio a:0\nplain line\n"}),
    )));
    rig.model.push(Step::Reply(Reply::tool_call(
        "patch",
        json!({"mode": "replace", "path": notes, "old_string": "plain", "new_string": "edited"}),
    )));
    rig.model.push(Step::Reply(Reply::tool_call(
        "search_files",
        json!({"pattern": "a:0|edited", "path": "/root"}),
    )));
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": format!("cat {notes}")}),
    )));
    rig.model.push(Step::text("edited it"));
    rig.say_privately(7, "edit a file", "edited it").await;
    let results = tool_results(&rig);
    let [write, patch, search, cat] = &results[results.len() - 4..] else {
        unreachable!()
    };
    assert!(write["bytes_written"].as_u64().is_some(), "{write}");
    assert_eq!(patch["success"], true, "{patch}");
    let matches = search["matches"].to_string();
    assert!(
        matches.contains("ratio a:0") && matches.contains("edited line"),
        "a line ending in :0 is a match like any other: {search}"
    );
    assert_eq!(cat["output"], "ratio a:0\nedited line", "{cat}");
    assert!(
        !std::path::Path::new(&notes).exists(),
        "not written on the host"
    );

    // The container dies mid-command (its first process ends): a clear error...
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": "echo before; kill -TERM 1; sleep 60; echo after"}),
    )));
    rig.model.push(Step::text("it broke"));
    rig.say_privately(7, "stop the box", "it broke").await;
    let died = tool_results(&rig).pop().unwrap();
    let error = died["error"].as_str().unwrap_or_else(|| panic!("{died}"));
    assert!(
        error.contains("went away") && error.contains("fresh"),
        "{died}"
    );

    // ...and the next command runs in a fresh container without the old files.
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": format!("echo again; ls /tmp/{marker} 2>&1")}),
    )));
    rig.model.push(Step::text("back"));
    rig.say_privately(7, "try again", "back").await;
    let again = tool_results(&rig).pop().unwrap();
    let output = again["output"]
        .as_str()
        .unwrap_or_else(|| panic!("{again}"));
    assert!(output.starts_with("again"), "{again}");
    assert!(output.contains("No such file"), "a new container: {again}");
    rig.stop().await;
    drop(podman);
}
