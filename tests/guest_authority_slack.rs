//! A guest on Slack through the real binary (issue 27): the owner is in
//! `SLACK_ALLOWED_USERS` and the channel is in `SLACK_GROUP_ALLOWED_CHATS`, so a member of
//! the channel nobody listed chats as a guest. The guest is answered, but their turn is
//! offered no `terminal`; their `/sethome`, `/platform pause slack` and `/restart` are
//! refused and change nothing; in the owner's thread their `!approve` and their click on
//! the approval prompt are refused and the directory stays, while the owner's click runs
//! the command.

mod slack_support;
mod support;

use fake_slack::{Posted, events::Click};
use serde_json::json;
use slack_support::{OWNER, STRANGER, SlackRun, WAIT};
use support::fake_model::{Reply, Step};

const CHANNEL: &str = "C0OPS";
/// Only a member of the allowed channel: a guest.
const GUEST: &str = STRANGER;

/// The tool names offered in the model request whose last user text ends with `text`.
fn tools_offered_for(run: &SlackRun, text: &str) -> Vec<String> {
    let request = run
        .model_requests()
        .into_iter()
        .find(|r| slack_support::last_user_text(r).ends_with(text))
        .unwrap_or_else(|| panic!("no model request for {text:?}"));
    request.body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// Waits for a post in `thread` whose text satisfies `wanted`.
async fn post_in_thread(
    run: &SlackRun,
    thread: &str,
    what: &str,
    wanted: impl Fn(&str) -> bool,
) -> Posted {
    run.slack
        .wait_within(WAIT, what, |r| {
            r.posted
                .iter()
                .find(|p| p.thread_ts.as_deref() == Some(thread) && wanted(&p.text))
                .cloned()
        })
        .await
}

/// A slash command from `user` in the channel; returns the next post there.
async fn slash(run: &SlackRun, user: &str, command: &str, text: &str) -> String {
    let seen = run.posts(CHANNEL).len();
    run.slack.push_slash_command(CHANNEL, user, command, text);
    run.next_post(CHANNEL, seen).await.text
}

fn assert_refused(reply: &str, what: &str) {
    assert!(
        reply.contains("refused") && reply.contains(what),
        "expected a refusal naming {what:?}: {reply}"
    );
}

fn click<'a>(prompt: &'a Posted, user: &'a str) -> Click<'a> {
    Click {
        user,
        channel: CHANNEL,
        message_ts: &prompt.ts,
        thread_ts: prompt.thread_ts.as_deref(),
        action_id: "/approve",
        value: "/approve",
        label: "✅ Allow Once",
        prompt_text: &prompt.text,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_guest_chats_without_tools_or_control_and_cannot_answer_the_owners_approval() {
    let run = SlackRun::start(&[], &[("SLACK_GROUP_ALLOWED_CHATS", CHANNEL)]).await;
    let env_file = run.home.path().join(".env");
    let env_before = std::fs::read_to_string(&env_file).ok();

    let guest_thread = run.mention(CHANNEL, GUEST, "hello there");
    post_in_thread(&run, &guest_thread, "the guest's answer", |t| {
        t == "echo: hello there"
    })
    .await;
    let owner_thread = run.mention(CHANNEL, OWNER, "and me");
    post_in_thread(&run, &owner_thread, "the owner's answer", |t| {
        t == "echo: and me"
    })
    .await;
    let guest_tools = tools_offered_for(&run, "hello there");
    let owner_tools = tools_offered_for(&run, "and me");
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

    assert_refused(&slash(&run, GUEST, "/sethome", "").await, "/sethome");
    assert_eq!(std::fs::read_to_string(&env_file).ok(), env_before);
    assert_refused(
        &slash(&run, GUEST, "/platform", "pause slack").await,
        "/platform",
    );
    assert_refused(&slash(&run, GUEST, "/restart", "").await, "/restart");
    let still = run.mention(CHANNEL, OWNER, "still here?");
    post_in_thread(&run, &still, "Slack still answering the owner", |t| {
        t == "echo: still here?"
    })
    .await;

    // The owner's dangerous command waits for approval in the owner's thread.
    let target = run.home.path().join("owners-dir");
    std::fs::create_dir_all(target.join("inner")).unwrap();
    run.model.push_all([
        Step::Reply(Reply::tool_call(
            "terminal",
            json!({"command": format!("rm -rf {}", target.display())}),
        )),
        Step::text("deleted it"),
    ]);
    let thread = run.mention(CHANNEL, OWNER, "clean up please");
    let prompt = post_in_thread(&run, &thread, "the approval prompt", |t| {
        t.contains("Command Approval Required")
    })
    .await;
    let requests = run.model_requests().len();

    let refusal =
        |t: &str| t.contains("refused") && t.contains("only the person whose request asked");
    run.thread_reply(CHANNEL, GUEST, "!approve", &thread);
    post_in_thread(
        &run,
        &thread,
        "the refusal of the guest's !approve",
        refusal,
    )
    .await;
    let seen = run
        .posts(CHANNEL)
        .iter()
        .filter(|p| refusal(&p.text))
        .count();
    let clicked = run.slack.push_block_actions(click(&prompt, GUEST));
    run.wait_for_ack(&clicked).await;
    run.slack
        .wait_within(WAIT, "the refusal of the guest's click", |r| {
            let refusals = r
                .posted
                .iter()
                .filter(|p| p.channel == CHANNEL && refusal(&p.text))
                .count();
            (refusals > seen).then_some(())
        })
        .await;
    assert!(target.exists(), "a guest's answer ran the owner's command");
    let updates = run
        .slack
        .records()
        .calls
        .iter()
        .filter(|c| c.method == "chat.update")
        .count();
    assert_eq!(updates, 0, "the refused click left the prompt's buttons");
    assert_eq!(run.model_requests().len(), requests, "the turn still waits");

    let owner_click = run.slack.push_block_actions(click(&prompt, OWNER));
    run.wait_for_ack(&owner_click).await;
    post_in_thread(&run, &thread, "the approved turn's answer", |t| {
        t == "deleted it"
    })
    .await;
    assert!(!target.exists(), "the owner's approval ran the command");
    assert!(
        run.daemon()
            .logs()
            .join("\n")
            .contains("refused: the sender lacks the authority"),
        "the operator's log records the refusals"
    );
    run.stop().await;
}
