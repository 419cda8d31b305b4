//! `/background` (`/bg`) and background-process notices through the real binary, the fake
//! Telegram Bot API and the fake model. A task's model call is held by a gate, so "still
//! running" is a fact, never a guess: `/bg` is acknowledged at once, a message sent
//! meanwhile is answered first, the task's answer arrives later exactly once — also when
//! the daemon is killed with SIGKILL mid-task and restarted — and the chat's own history
//! never holds the task. A guest's task is offered only a guest's tools. A background
//! process that exits 3 is told to its chat once in `error` mode and not at all in `off`.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::sync::Arc;

use fake_telegram::{Chat, MessageSpec, User};
use serde_json::{Value, json};
use support::fake_model::{Reply, Step};
use telegram_support::{Rig, WAIT, last_user_text, start};
use tokio::sync::Semaphore;

const OWNER: i64 = 7;
const GROUP: i64 = -1002;
const GUEST: i64 = 333;
const DONE: &str = "✅ Background task";

/// Answers the model's requests: a prompt containing `SLOWTASK` waits for `gate`, one
/// containing `RUNPROC<n>` starts `exit <n>` in the background, anything else is echoed.
fn responder(gate: Arc<Semaphore>) -> support::fake_model::Responder {
    Arc::new(move |body: &Value| {
        let last = last_user_text(body);
        let after_tool = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["role"] == "tool");
        if let Some(code) = last.split("RUNPROC").nth(1).and_then(|r| r.get(..1)) {
            return match after_tool {
                false => Step::Reply(Reply::tool_call(
                    "terminal",
                    json!({"command": format!("echo out{code}; exit {code}"), "background": true}),
                )),
                true => Step::text(format!("started {code}")),
            };
        }
        if last.contains("SLOWTASK") {
            return Step::Gated {
                reply: Reply::text("the long answer"),
                gate: gate.clone(),
            };
        }
        Step::text(format!("echo: {last}"))
    })
}

fn texts(rig: &Rig, chat: i64) -> Vec<String> {
    rig.sent_to(chat).into_iter().map(|m| m.text).collect()
}

/// Waits for a message to `chat` after the first `before` that contains `needle`.
async fn wait_text(rig: &Rig, chat: i64, before: usize, needle: &str) -> String {
    rig.wait_for(&format!("{needle:?} in chat {chat}"), |rig| {
        texts(rig, chat)
            .into_iter()
            .skip(before)
            .find(|t| t.contains(needle))
    })
    .await
}

async fn say(rig: &Rig, chat: Chat, user: User, text: &str) {
    rig.telegram
        .push_message(MessageSpec::text(chat, user, text));
}

/// The names of the tools offered in the first model request whose last user text
/// contains `needle`.
fn tools_for(rig: &Rig, needle: &str) -> Vec<String> {
    let request = rig
        .model
        .requests()
        .into_iter()
        .find(|r| last_user_text(&r.body).contains(needle))
        .unwrap_or_else(|| panic!("no model request for {needle:?}"));
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// Blocks (bounded) until the daemon logged a line containing `needle`.
fn wait_log(rig: &Rig, needle: &str) -> String {
    tokio::task::block_in_place(|| rig.daemon().wait_for_line(needle, WAIT))
        .unwrap_or_else(|| panic!("no log line {needle:?}: {:#?}", rig.daemon().logs()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_task_answers_later_once_across_kill_9_and_leaves_the_chat_alone() {
    let gate = Arc::new(Semaphore::new(0));
    let mut rig = start("", "", &[]).await;
    rig.model.set_responder(responder(gate.clone()));
    let (chat, user) = (Chat::private(OWNER), User::new(OWNER, "Owner"));

    say(
        &rig,
        chat.clone(),
        user.clone(),
        "/bg SLOWTASK summarise the logs",
    )
    .await;
    let ack = wait_text(&rig, OWNER, 0, "Background task `bg_").await;
    assert!(
        ack.contains("started") && ack.contains("SLOWTASK summarise the logs"),
        "{ack}"
    );
    // The task is running: its model call is held at the gate.
    rig.model.wait_for_requests(1, WAIT).await;
    assert!(tools_for(&rig, "SLOWTASK").iter().any(|t| t == "terminal"));

    // The chat is free: a message sent meanwhile is answered first.
    say(&rig, chat.clone(), user.clone(), "hello meanwhile").await;
    wait_text(&rig, OWNER, 1, "echo: hello meanwhile").await;
    assert!(!texts(&rig, OWNER).iter().any(|t| t.contains(DONE)));

    // Killed mid-task (the gate is still shut), then restarted: the task resumes.
    let before_kill = rig.model.requests().len();
    rig.crash_and_restart().await;
    let picked_up = wait_log(&rig, "unfinished turns picked up");
    assert!(picked_up.contains("\"resumed\":1"), "{picked_up}");
    rig.model.wait_for_requests(before_kill + 1, WAIT).await;
    gate.add_permits(16);
    let done = wait_text(&rig, OWNER, 2, DONE).await;
    assert!(done.contains("the long answer"), "{done}");
    assert!(done.contains("SLOWTASK summarise the logs"), "{done}");

    // The chat's own conversation goes on without the task in it.
    say(&rig, chat, user, "and now?").await;
    wait_text(&rig, OWNER, 3, "echo: and now?").await;
    let follow_up = rig
        .model
        .requests()
        .into_iter()
        .rfind(|r| last_user_text(&r.body).contains("and now?"))
        .expect("the follow-up's request");
    let history = follow_up.body["messages"].to_string();
    assert!(history.contains("hello meanwhile"), "{history}");
    assert!(!history.contains("SLOWTASK"), "{history}");
    assert!(!history.contains("the long answer"), "{history}");

    let sent = texts(&rig, OWNER);
    assert_eq!(
        sent.iter().filter(|t| t.contains(DONE)).count(),
        1,
        "{sent:#?}"
    );
    assert_eq!(
        sent.iter().filter(|t| t.contains("started")).count(),
        1,
        "{sent:#?}"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guests_background_task_gets_a_guests_tools() {
    let group = GROUP.to_string();
    let rig = start(
        "",
        "",
        &[
            ("TELEGRAM_ALLOWED_USERS", "111"),
            ("TELEGRAM_GROUP_ALLOWED_CHATS", group.as_str()),
        ],
    )
    .await;
    rig.model
        .set_responder(responder(Arc::new(Semaphore::new(0))));
    say(
        &rig,
        Chat::group(GROUP),
        User::new(GUEST, "Guest"),
        "/bg GUESTTASK look around",
    )
    .await;
    let done = wait_text(&rig, GROUP, 0, DONE).await;
    assert!(done.contains("echo: GUESTTASK look around"), "{done}");
    let tools = tools_for(&rig, "GUESTTASK");
    for withheld in ["terminal", "process", "write_file", "cronjob"] {
        assert!(
            !tools.iter().any(|t| t == withheld),
            "{withheld} offered: {tools:?}"
        );
    }
    // An empty `/bg` only explains itself.
    say(&rig, Chat::group(GROUP), User::new(GUEST, "Guest"), "/bg").await;
    wait_text(&rig, GROUP, 0, "Usage:").await;
    rig.stop().await;
}

const NOTICE: &str = "Background process `proc_";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_background_process_is_told_once_in_error_mode() {
    let rig = start(
        "",
        "display:\n  background_process_notifications: error\n",
        &[],
    )
    .await;
    rig.model
        .set_responder(responder(Arc::new(Semaphore::new(0))));
    let (chat, user) = (Chat::private(OWNER), User::new(OWNER, "Owner"));
    // Exit 0 is not told in `error` mode (the log says the decision was made) ...
    say(&rig, chat.clone(), user.clone(), "RUNPROC0 please").await;
    wait_text(&rig, OWNER, 0, "started 0").await;
    let skipped = wait_log(&rig, "its chat is not told in this mode");
    assert!(skipped.contains("Some(0)"), "{skipped}");
    // ... exit 3 is, once, with its output.
    say(&rig, chat, user, "RUNPROC3 please").await;
    let notice = wait_text(&rig, OWNER, 1, "ended with exit code 3").await;
    assert!(
        notice.contains(NOTICE) && notice.contains("out3"),
        "{notice}"
    );
    let sent = texts(&rig, OWNER);
    assert_eq!(
        sent.iter().filter(|t| t.contains(NOTICE)).count(),
        1,
        "{sent:#?}"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_background_process_is_told_in_off_mode() {
    let rig = start("", "", &[("HERMES_BACKGROUND_NOTIFICATIONS", "off")]).await;
    rig.model
        .set_responder(responder(Arc::new(Semaphore::new(0))));
    say(
        &rig,
        Chat::private(OWNER),
        User::new(OWNER, "Owner"),
        "RUNPROC3 please",
    )
    .await;
    wait_text(&rig, OWNER, 0, "started 3").await;
    let skipped = wait_log(&rig, "its chat is not told in this mode");
    assert!(
        skipped.contains("Some(3)") && skipped.contains("off"),
        "{skipped}"
    );
    let sent = texts(&rig, OWNER);
    assert!(!sent.iter().any(|t| t.contains(NOTICE)), "{sent:#?}");
    rig.stop().await;
}
