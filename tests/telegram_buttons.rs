//! Approvals as inline buttons through the real binary: the model asks for a dangerous
//! terminal command, the chat gets the approval prompt with its keyboard, a click by a user
//! who is not authorised changes nothing, the owner's "Allow Once" runs the command (the
//! directory is gone and the tool result reaches the model), the click is answered and the
//! keyboard removed; "Deny" leaves the directory alone and tells the model so.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, MessageSpec, User};
use serde_json::{Value, json};
use support::fake_model::{Reply, Step};
use telegram_support::{Rig, start};

const GROUP: i64 = -100_700;

/// Scripts a `terminal` call deleting `target` followed by `after`, sends the request, and
/// waits for the approval prompt; returns the prompt's message id.
async fn ask_to_delete(rig: &Rig, target: &std::path::Path, after: &str) -> i64 {
    std::fs::create_dir_all(target.join("inner")).unwrap();
    let command = format!("rm -rf {}", target.display());
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({ "command": command }),
    )));
    rig.model.push(Step::text(after));
    rig.telegram.push_message(MessageSpec::text(
        Chat::group(GROUP),
        User::new(7, "Bob"),
        "clean up please",
    ));
    rig.wait_for("the approval prompt", |rig| {
        rig.telegram
            .bot_messages(GROUP)
            .into_iter()
            .rev()
            .find(|m| m.text.contains("Command Approval Required") && has_buttons(m))
            .map(|m| m.message_id)
    })
    .await
}

fn has_buttons(message: &fake_telegram::StoredMessage) -> bool {
    keyboard(message).is_some_and(|rows| !rows.is_empty())
}

fn keyboard(message: &fake_telegram::StoredMessage) -> Option<Vec<Value>> {
    message.reply_markup.as_ref()?["inline_keyboard"]
        .as_array()
        .cloned()
}

/// (label, callback data) of every button on the prompt.
fn buttons(rig: &Rig, prompt: i64) -> Vec<(String, String)> {
    let message = rig.telegram.message(GROUP, prompt).expect("prompt stored");
    keyboard(&message)
        .unwrap_or_default()
        .iter()
        .flat_map(|row| row.as_array().cloned().unwrap_or_default())
        .map(|b| {
            (
                b["text"].as_str().unwrap_or_default().to_owned(),
                b["callback_data"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn data_of(buttons: &[(String, String)], label: &str) -> String {
    buttons
        .iter()
        .find(|(l, _)| l.contains(label))
        .unwrap_or_else(|| panic!("no {label:?} button in {buttons:?}"))
        .1
        .clone()
}

/// Waits until the group received `text`; returns how many messages it has by then.
async fn wait_text(rig: &Rig, text: &str) -> usize {
    rig.wait_for(&format!("{text:?} in the group"), |rig| {
        let sent = rig.sent_to(GROUP);
        sent.iter().any(|m| m.text == text).then_some(sent.len())
    })
    .await
}

/// The `tool` message the model received last.
fn last_tool_result(rig: &Rig) -> String {
    let request = rig.model.requests().last().cloned().expect("a request");
    let messages = request.body["messages"].as_array().cloned().unwrap();
    let tool = messages.iter().rev().find(|m| m["role"] == "tool");
    tool.map(|m| m["content"].to_string()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_once_runs_the_command_and_deny_blocks_it() {
    let seed: u64 = rand::random();
    println!("seed = {seed}");
    let rig = start("", "", &[]).await;
    let (bob, mallory) = (User::new(7, "Bob"), User::new(666, "Mallory"));

    let target = rig.home.path().join(format!("x-{seed}"));
    let prompt = ask_to_delete(&rig, &target, "deleted it").await;
    let choices = buttons(&rig, prompt);
    let labels: Vec<&str> = choices.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        labels,
        ["✅ Allow Once", "✅ Session", "✅ Always", "❌ Deny"],
        "{choices:?}"
    );
    let allow = data_of(&choices, "Allow Once");

    // Someone who is not allowed to talk to the agent clicks first: nothing happens.
    // Counted once the prompt itself is among the sent messages: the fake stores a message
    // (what `ask_to_delete` waits on) before its send is listed here.
    let sent_before = rig
        .wait_for("the prompt among the sent messages", |rig| {
            let sent = rig.sent_to(GROUP);
            sent.iter()
                .any(|m| m.text.contains("Command Approval Required"))
                .then_some(sent.len())
        })
        .await;
    let click = rig
        .telegram
        .push_callback(Chat::group(GROUP), mallory, prompt, &allow);
    rig.wait_confirmed(click).await;
    assert!(target.exists(), "an unauthorised click ran the command");
    assert_eq!(rig.model.requests().len(), 1, "the turn is still waiting");
    // Nothing answers the click (the turn's own progress line may still land meanwhile).
    let said: Vec<String> = rig.sent_to(GROUP)[sent_before..]
        .iter()
        .map(|m| m.text.clone())
        .collect();
    assert!(
        said.iter()
            .all(|t| !t.contains("approve") && !t.contains("denied") && !t.contains("pairing")),
        "the unauthorised click was answered: {said:?}"
    );
    assert_eq!(
        buttons(&rig, prompt),
        choices,
        "the owner can still click: the keyboard stays"
    );

    // The owner allows it once.
    let answered = rig.telegram.calls_of("answerCallbackQuery").len();
    rig.telegram
        .push_callback(Chat::group(GROUP), bob.clone(), prompt, &allow);
    wait_text(&rig, "deleted it").await;
    assert!(!target.exists(), "the approved command ran");
    assert_eq!(rig.model.requests().len(), 2);
    let result = last_tool_result(&rig);
    assert!(!result.contains("BLOCKED"), "{result}");
    assert!(
        rig.telegram.calls_of("answerCallbackQuery").len() > answered,
        "the click was answered"
    );
    // The keyboard comes off once the click is recorded, independently of the turn's reply.
    rig.wait_for("the keyboard removed", |rig| {
        (!has_buttons(&rig.telegram.message(GROUP, prompt).unwrap())).then_some(())
    })
    .await;

    // Deny: the directory stays and the model is told the command was blocked.
    let kept = rig.home.path().join(format!("y-{seed}"));
    let prompt = ask_to_delete(&rig, &kept, "fine, I won't").await;
    let deny = data_of(&buttons(&rig, prompt), "Deny");
    rig.telegram
        .push_callback(Chat::group(GROUP), bob, prompt, &deny);
    wait_text(&rig, "fine, I won't").await;
    assert!(kept.join("inner").is_dir(), "a denied command never runs");
    let result = last_tool_result(&rig);
    assert!(result.contains("BLOCKED"), "{result}");
    rig.wait_for("the denied prompt's keyboard removed", |rig| {
        (!has_buttons(&rig.telegram.message(GROUP, prompt).unwrap())).then_some(())
    })
    .await;

    // Every user message got its one final answer.
    let finals: Vec<String> = rig
        .sent_to(GROUP)
        .into_iter()
        .map(|m| m.text)
        .filter(|t| t == "deleted it" || t == "fine, I won't")
        .collect();
    assert_eq!(finals, ["deleted it", "fine, I won't"]);
    rig.stop().await;
}
