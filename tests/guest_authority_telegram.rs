//! A guest — a member of an allowed Telegram group who is not an allowed user — through the
//! real binary (issue 27): with `TELEGRAM_ALLOWED_USERS=111` and the group in
//! `TELEGRAM_GROUP_ALLOWED_CHATS`, user 333 is answered, but their turn is offered no
//! `terminal`; their `/sethome`, `/platform pause telegram` and `/restart` are refused and
//! change nothing (`.env` as it was, the owner still answered, the daemon exits cleanly
//! later); in the shared group session their `/approve`, "yes" and button click on the
//! owner's pending `rm -rf` are refused and the directory stays, while the owner's own
//! `/approve` runs it; their answer to the owner's clarify question is refused too.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, MessageSpec, User};
use serde_json::json;
use support::fake_model::{Reply, Step};
use telegram_support::{Rig, start};

const GROUP: i64 = -1001;
const OWNER_ID: i64 = 111;
const GUEST_ID: i64 = 333;

fn owner() -> User {
    User::new(OWNER_ID, "Owner")
}

fn guest() -> User {
    User::new(GUEST_ID, "Guest")
}

/// The tool names offered in the model request whose last user text is `text`.
fn tools_offered_for(rig: &Rig, text: &str) -> Vec<String> {
    let request = rig
        .model
        .requests()
        .into_iter()
        .find(|r| telegram_support::last_user_text(&r.body).ends_with(text))
        .unwrap_or_else(|| panic!("no model request for {text:?}"));
    request.body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// Sends `text` from `user` in the group and waits for the next message the bot sends there.
async fn say(rig: &Rig, user: User, text: &str) -> String {
    let before = rig.sent_to(GROUP).len();
    rig.telegram
        .push_message(MessageSpec::text(Chat::group(GROUP), user, text));
    rig.wait_sent_to(GROUP, before + 1).await[before]
        .text
        .clone()
}

/// Waits until the group received a message containing `needle`.
async fn wait_group_text(rig: &Rig, needle: &str) -> String {
    rig.wait_for(&format!("{needle:?} in the group"), |rig| {
        rig.sent_to(GROUP)
            .into_iter()
            .map(|m| m.text)
            .find(|t| t.contains(needle))
    })
    .await
}

/// The callback data of the prompt's "Allow Once" button.
fn allow_once_data(rig: &Rig, prompt: i64) -> String {
    let message = rig.telegram.message(GROUP, prompt).expect("prompt stored");
    let rows = message.reply_markup.expect("buttons")["inline_keyboard"].clone();
    rows.as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row.as_array().cloned().unwrap_or_default())
        .find(|b| b["text"].as_str().is_some_and(|t| t.contains("Allow Once")))
        .and_then(|b| b["callback_data"].as_str().map(str::to_owned))
        .expect("an Allow Once button")
}

/// Sends `text` from `user` in the group; waits for a later message of the bot there that
/// contains `needle` (a turn's progress line may land in between) and returns it.
async fn say_expecting(rig: &Rig, user: User, text: &str, needle: &str) -> String {
    let before = rig.sent_to(GROUP).len();
    rig.telegram
        .push_message(MessageSpec::text(Chat::group(GROUP), user, text));
    wait_new_text(rig, before, needle).await
}

/// Waits for a message in the group after the first `before` that contains `needle`.
async fn wait_new_text(rig: &Rig, before: usize, needle: &str) -> String {
    rig.wait_for(&format!("{needle:?} in the group"), |rig| {
        rig.sent_to(GROUP)
            .into_iter()
            .skip(before)
            .map(|m| m.text)
            .find(|t| t.contains(needle))
    })
    .await
}

fn assert_refused(reply: &str, what: &str) {
    assert!(
        reply.contains("refused") && reply.contains(what),
        "expected a refusal naming {what:?}: {reply}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_guest_chats_without_tools_or_control_and_cannot_answer_the_owners_approval() {
    let group = GROUP.to_string();
    let rig = start(
        "",
        "group_sessions_per_user: false\n",
        &[
            ("TELEGRAM_ALLOWED_USERS", "111"),
            ("TELEGRAM_GROUP_ALLOWED_CHATS", group.as_str()),
        ],
    )
    .await;
    let env_file = rig.home.path().join(".env");
    let env_before = std::fs::read_to_string(&env_file).ok();

    // The guest is answered, but their turn is offered no terminal; the owner's is.
    assert_eq!(say(&rig, guest(), "hello there").await, "echo: hello there");
    assert_eq!(say(&rig, owner(), "and me").await, "echo: and me");
    let guest_tools = tools_offered_for(&rig, "hello there");
    let owner_tools = tools_offered_for(&rig, "and me");
    assert!(
        owner_tools.iter().any(|t| t == "terminal"),
        "{owner_tools:?}"
    );
    for withheld in [
        "terminal",
        "process",
        "write_file",
        "patch",
        "cronjob",
        "delegate_task",
    ] {
        assert!(
            !guest_tools.iter().any(|t| t == withheld),
            "a guest's turn was offered {withheld}: {guest_tools:?}"
        );
    }

    // A model that names the withheld tool anyway gets a refusal, and nothing runs.
    let marker = rig.home.path().join("guest-was-here");
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": format!("touch {}", marker.display())}),
    )));
    rig.model.push(Step::text("could not"));
    rig.telegram.push_message(MessageSpec::text(
        Chat::group(GROUP),
        guest(),
        "run a command for me",
    ));
    wait_group_text(&rig, "could not").await;
    assert!(!marker.exists(), "a guest's turn ran terminal");
    let request = rig.model.requests().last().cloned().unwrap();
    let refused = request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    assert!(
        refused.contains("not available") && refused.contains("gateway.guest_tools"),
        "{refused}"
    );

    // Control commands: refused, with no effect.
    assert_refused(&say(&rig, guest(), "/sethome").await, "/sethome");
    assert_eq!(
        std::fs::read_to_string(&env_file).ok(),
        env_before,
        "a guest's /sethome rewrote .env"
    );
    assert_refused(
        &say(&rig, guest(), "/platform pause telegram").await,
        "/platform",
    );
    assert_refused(&say(&rig, guest(), "/restart").await, "/restart");
    // Telegram is still running for the owner, in the group and in a DM.
    assert_eq!(say(&rig, owner(), "still here?").await, "echo: still here?");
    rig.telegram.push_message(MessageSpec::text(
        Chat::private(OWNER_ID),
        owner(),
        "dm check",
    ));
    rig.wait_sent_to(OWNER_ID, 1).await;
    assert_eq!(rig.sent_to(OWNER_ID)[0].text, "echo: dm check");

    // The owner's dangerous command waits for approval in the shared group session.
    let target = rig.home.path().join("owners-dir");
    std::fs::create_dir_all(target.join("inner")).unwrap();
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": format!("rm -rf {}", target.display())}),
    )));
    rig.model.push(Step::text("deleted it"));
    rig.telegram.push_message(MessageSpec::text(
        Chat::group(GROUP),
        owner(),
        "clean up please",
    ));
    let prompt = rig
        .wait_for("the approval prompt", |rig| {
            rig.telegram
                .bot_messages(GROUP)
                .into_iter()
                .find(|m| m.text.contains("Command Approval Required"))
                .map(|m| m.message_id)
        })
        .await;
    let requests = rig.model.requests().len();

    // The guest's answers, by command, plain word, permanent approval and button: refused.
    let asked = "only the person whose request asked";
    for answer in ["/approve", "yes", "/deny"] {
        assert_refused(
            &say_expecting(&rig, guest(), answer, "refused").await,
            asked,
        );
    }
    assert_refused(
        &say_expecting(&rig, guest(), "/approve always", "refused").await,
        "permanently",
    );
    let before = rig.sent_to(GROUP).len();
    let allow_once = allow_once_data(&rig, prompt);
    rig.telegram
        .push_callback(Chat::group(GROUP), guest(), prompt, &allow_once);
    let reply = rig.wait_sent_to(GROUP, before + 1).await[before]
        .text
        .clone();
    assert_refused(&reply, "only the person whose request asked");
    assert!(target.exists(), "a guest's answer ran the owner's command");
    let keyboard = rig
        .telegram
        .message(GROUP, prompt)
        .and_then(|m| m.reply_markup);
    assert!(
        keyboard.is_some_and(|k| k["inline_keyboard"]
            .as_array()
            .is_some_and(|r| !r.is_empty())),
        "the refused click left the prompt's buttons"
    );
    assert_eq!(rig.model.requests().len(), requests, "the turn still waits");

    // The owner's own answer runs it.
    rig.telegram
        .push_message(MessageSpec::text(Chat::group(GROUP), owner(), "/approve"));
    wait_group_text(&rig, "deleted it").await;
    assert!(!target.exists(), "the owner's approval ran the command");

    // A clarify question of the owner's turn: the guest's answer is refused, the owner's
    // reaches the model.
    rig.model.push(Step::Reply(Reply::tool_call(
        "clarify",
        json!({"question": "Which colour?", "choices": ["red", "blue"]}),
    )));
    rig.model.push(Step::text("going with it"));
    rig.telegram.push_message(MessageSpec::text(
        Chat::group(GROUP),
        owner(),
        "pick a colour",
    ));
    wait_group_text(&rig, "Which colour?").await;
    assert_refused(
        &say_expecting(&rig, guest(), "blue", "refused").await,
        asked,
    );
    rig.telegram
        .push_message(MessageSpec::text(Chat::group(GROUP), owner(), "red"));
    wait_group_text(&rig, "going with it").await;
    let answered = rig.model.requests().last().unwrap().body["messages"].clone();
    let tool_answer = answered
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        .unwrap_or_default();
    assert_eq!(tool_answer["user_response"], "red", "{tool_answer}");

    let logs = rig.daemon().logs().join("\n");
    assert!(
        logs.contains("refused: the sender lacks the authority"),
        "the operator's log records the refusals"
    );
    // A clean exit 0: no restart was requested (it would exit 75).
    rig.stop().await;
}
