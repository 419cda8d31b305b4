//! A guest on Discord through the real binary (issue 27): the owner is the one
//! `DISCORD_ALLOWED_USERS` entry and the channel is in `DISCORD_GROUP_ALLOWED_CHATS`, so
//! another member of the channel chats as a guest. The guest is answered, but their turn is
//! offered no `terminal`; their `/sethome`, `/platform pause discord` and `/restart` are
//! refused and change nothing; in the shared channel session their `/approve` and their
//! click on the owner's approval prompt are refused and the directory stays, while the
//! owner's own click runs the command.

#[path = "discord_rig/mod.rs"]
mod rig;
mod support;

use std::time::Duration;

use rig::Rig;
use serde_json::json;
use support::fake_model::{Reply, Step};

const HEARTBEAT: Duration = Duration::from_secs(30);

/// The tool names offered in the model request whose last user text ends with `text`.
fn tools_offered_for(rig: &Rig, text: &str) -> Vec<String> {
    let request = rig
        .model
        .requests()
        .into_iter()
        .find(|r| rig::last_user_text(&r.body).ends_with(text))
        .unwrap_or_else(|| panic!("no model request for {text:?}"));
    request.body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// `user` writes `text` in `channel`; returns the next message the bot sends there.
async fn say(rig: &Rig, channel: &str, user: &fake_discord::FakeUser, text: &str) -> String {
    let before = rig.texts_in(channel).len();
    rig.say(channel, user, text);
    rig.wait_texts(channel, before + 1).await[before].clone()
}

/// `user` writes `text` in `channel`; waits for a later message of the bot there that
/// contains `needle` (a turn's progress line may land in between) and returns it.
async fn say_expecting(
    rig: &Rig,
    channel: &str,
    user: &fake_discord::FakeUser,
    text: &str,
    needle: &str,
) -> String {
    let before = rig.texts_in(channel).len();
    rig.say(channel, user, text);
    wait_new_text(rig, channel, before, needle).await
}

/// Waits for a message in `channel` after the first `before` that contains `needle`.
async fn wait_new_text(rig: &Rig, channel: &str, before: usize, needle: &str) -> String {
    let channel = channel.to_owned();
    rig.fake
        .wait_for(&format!("{needle:?} in {channel}"), |s| {
            s.calls
                .iter()
                .filter(|c| {
                    c.route == rig::CREATE_MESSAGE
                        && c.path == format!("/api/v10/channels/{channel}/messages")
                        && c.status < 300
                })
                .skip(before)
                .map(rig::content)
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
async fn a_channel_guest_chats_without_tools_or_control_and_cannot_answer_the_owners_approval() {
    let mut rig = Rig::new(HEARTBEAT).await;
    let ops = rig.fake.add_text_channel("ops");
    rig.set_env("DISCORD_FREE_RESPONSE_CHANNELS", &ops);
    rig.set_env("DISCORD_GROUP_ALLOWED_CHATS", &ops);
    rig.append_config("group_sessions_per_user: false\n");
    rig.launch().await;
    let guest = rig.fake.new_user("guest", false, &[]);
    let owner = rig.owner.clone();
    let env_file = rig.home.path().join(".env");
    let env_before = std::fs::read_to_string(&env_file).ok();

    assert_eq!(
        say(&rig, &ops, &guest, "hello there").await,
        "echo: hello there"
    );
    assert_eq!(say(&rig, &ops, &owner, "and me").await, "echo: and me");
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

    assert_refused(&say(&rig, &ops, &guest, "/sethome").await, "/sethome");
    assert_eq!(std::fs::read_to_string(&env_file).ok(), env_before);
    assert_refused(
        &say(&rig, &ops, &guest, "/platform pause discord").await,
        "/platform",
    );
    assert_refused(&say(&rig, &ops, &guest, "/restart").await, "/restart");
    assert_eq!(
        say(&rig, &ops, &owner, "still here?").await,
        "echo: still here?",
        "Discord is not paused"
    );

    // The owner's dangerous command waits for approval in the shared channel session.
    let target = rig.home.path().join("owners-dir");
    std::fs::create_dir_all(target.join("inner")).unwrap();
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": format!("rm -rf {}", target.display())}),
    )));
    rig.model.push(Step::text("deleted it"));
    rig.say(&ops, &owner, "clean up please");
    let prompt_id = rig
        .fake
        .wait_for("an approval prompt", |s| {
            s.history.get(&ops)?.iter().find_map(|m| {
                m["content"]
                    .as_str()?
                    .contains("Command Approval Required")
                    .then(|| m["id"].as_str().unwrap_or_default().to_owned())
            })
        })
        .await;
    let requests = rig.model.requests().len();

    let asked = "only the person whose request asked";
    assert_refused(
        &say_expecting(&rig, &ops, &guest, "/approve", "refused").await,
        asked,
    );
    let before = rig.texts_in(&ops).len();
    rig.fake
        .push_button_click(&ops, &prompt_id, &guest, "/approve");
    assert_refused(&wait_new_text(&rig, &ops, before, "refused").await, asked);
    assert!(target.exists(), "a guest's answer ran the owner's command");
    assert!(
        rig.fake.calls_to(rig::EDIT_ORIGINAL).is_empty(),
        "the refused click left the prompt's buttons"
    );
    assert_eq!(rig.model.requests().len(), requests, "the turn still waits");

    rig.fake
        .push_button_click(&ops, &prompt_id, &owner, "/approve");
    rig.fake
        .wait_for("the owner's approved turn", |s| {
            s.history
                .get(&ops)?
                .iter()
                .any(|m| m["content"] == "deleted it")
                .then_some(())
        })
        .await;
    assert!(!target.exists(), "the owner's approval ran the command");
    assert!(
        rig.logs()
            .join("\n")
            .contains("refused: the sender lacks the authority"),
        "the operator's log records the refusals"
    );
    rig.stop().await;
}
