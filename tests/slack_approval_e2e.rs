//! Slack approval buttons end to end through the real `hermesd run` binary: the fake model
//! asks for a dangerous terminal command, the gateway posts a Block Kit prompt with
//! buttons in the conversation's thread, and clicks come back as `block_actions`
//! envelopes. A stranger's click is acknowledged and changes nothing (the prompt keeps its
//! buttons, the command does not run); the owner's "Allow Once" removes the buttons
//! (`chat.update`) and the command runs; "Deny" blocks the next one and the model is told.

mod slack_support;
mod support;

use fake_slack::{Posted, events::Click};
use serde_json::{Value, json};
use slack_support::{OWNER, STRANGER, SlackRun, WAIT};
use support::fake_model::{Reply, Step};

const CHANNEL: &str = "C0OPS";

/// Waits for the next prompt (a post with blocks) in `thread`.
async fn prompt_in(run: &SlackRun, thread: &str) -> Posted {
    run.slack
        .wait_within(WAIT, "an approval prompt", |r| {
            r.posted
                .iter()
                .find(|p| p.blocks.is_some() && p.thread_ts.as_deref() == Some(thread))
                .cloned()
        })
        .await
}

/// The `value`s of the prompt's buttons.
fn button_values(prompt: &Posted) -> Vec<String> {
    prompt
        .blocks
        .as_ref()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().cloned().unwrap_or_default())
        .map(|e| e["value"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn click<'a>(prompt: &'a Posted, user: &'a str, value: &'a str, label: &'a str) -> Click<'a> {
    Click {
        user,
        channel: CHANNEL,
        message_ts: &prompt.ts,
        thread_ts: prompt.thread_ts.as_deref(),
        action_id: value,
        value,
        label,
        prompt_text: &prompt.text,
    }
}

/// Waits for a post in `thread` with exactly `text`.
async fn reply_in(run: &SlackRun, thread: &str, text: &str) -> Posted {
    run.slack
        .wait_within(WAIT, &format!("{text:?} in {thread}"), |r| {
            r.posted
                .iter()
                .find(|p| p.thread_ts.as_deref() == Some(thread) && p.text == text)
                .cloned()
        })
        .await
}

/// The tool results the model was sent in its last request.
fn tool_results(run: &SlackRun) -> Vec<String> {
    let requests = run.model_requests();
    let last = requests.last().expect("a model request");
    last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_buttons_allow_once_deny_and_ignore_strangers() {
    let run = SlackRun::start(&[], &[]).await;
    let keep = run.home.path().join("victim-allowed");
    let spare = run.home.path().join("victim-denied");
    std::fs::create_dir_all(&keep).unwrap();
    std::fs::create_dir_all(&spare).unwrap();

    run.model.push_all([
        Step::Reply(Reply::tool_call(
            "terminal",
            json!({"command": format!("rm -rf {}", keep.display())}),
        )),
        Step::text("Removed it."),
    ]);
    let thread = run.mention(CHANNEL, OWNER, "clean up the first one");
    let prompt = prompt_in(&run, &thread).await;
    assert!(
        prompt.text.starts_with("⚠️ Command Approval Required"),
        "{}",
        prompt.text
    );
    assert!(prompt.text.contains(&format!("rm -rf {}", keep.display())));
    assert_eq!(
        button_values(&prompt),
        ["/approve", "/approve session", "/approve always", "/deny"]
    );

    // A stranger's click is acknowledged and does nothing.
    let stranger =
        run.slack
            .push_block_actions(click(&prompt, STRANGER, "/approve", "✅ Allow Once"));
    run.wait_for_ack(&stranger).await;
    assert!(keep.exists());

    // The owner's click: buttons removed, the command runs, the turn finishes.
    let owner = run
        .slack
        .push_block_actions(click(&prompt, OWNER, "/approve", "✅ Allow Once"));
    run.wait_for_ack(&owner).await;
    reply_in(
        &run,
        &thread,
        "✅ Command approved. The agent is resuming...",
    )
    .await;
    reply_in(&run, &thread, "Removed it.").await;
    assert!(!keep.exists(), "the approved command ran");
    // The buttons come off in the background once the click is recorded.
    let updates = run.slack.wait_for_calls("chat.update", 1).await;
    assert_eq!(
        updates.len(),
        1,
        "only the owner's click answered the prompt"
    );
    assert_eq!(updates[0].str("ts"), Some(prompt.ts.as_str()));
    assert_eq!(
        updates[0].str("text"),
        Some(format!("*✅ Allow Once* — chosen by <@{OWNER}>").as_str())
    );
    let blocks = updates[0].body["blocks"].as_array().unwrap();
    assert!(
        blocks.iter().all(|b| b["type"] != "actions"),
        "buttons removed: {blocks:#?}"
    );

    // Deny: the next dangerous command is blocked and the model is told so.
    run.model.push_all([
        Step::Reply(Reply::tool_call(
            "terminal",
            json!({"command": format!("rm -rf {}", spare.display())}),
        )),
        Step::text("Left it alone."),
    ]);
    let first_thread = thread;
    let thread = run.mention(CHANNEL, OWNER, "now the second one");
    let prompt = prompt_in(&run, &thread).await;
    let deny = run
        .slack
        .push_block_actions(click(&prompt, OWNER, "/deny", "❌ Deny"));
    run.wait_for_ack(&deny).await;
    reply_in(&run, &thread, "Left it alone.").await;
    assert!(spare.exists(), "the denied command did not run");
    let results = tool_results(&run);
    assert_eq!(results.len(), 1, "{results:#?}");
    assert!(results[0].contains("BLOCKED"), "{results:#?}");
    assert_eq!(run.slack.wait_for_calls("chat.update", 2).await.len(), 2);
    assert_eq!(run.model_requests().len(), 4);
    // Each thread got exactly its progress line, prompt, decision and answer.
    for (thread, victim, decision, answer) in [
        (
            &first_thread,
            &keep,
            "✅ Command approved. The agent is resuming...",
            "Removed it.",
        ),
        (&thread, &spare, "❌ Command denied.", "Left it alone."),
    ] {
        let mut texts: Vec<String> = run
            .posts(CHANNEL)
            .into_iter()
            .filter(|p| p.thread_ts.as_deref() == Some(thread.as_str()))
            .map(|p| p.text)
            .collect();
        texts.sort();
        let command = format!("rm -rf {}", victim.display());
        let mut expected = vec![
            format!("💻 terminal: {command}"),
            format!(
                "⚠️ Command Approval Required\n\n```\n{command}\n```\nReason: recursive delete; \
                 delete in root path: {}\n\n\
                 Reply /approve (once), /approve session, /approve always, or /deny.",
                victim.display()
            ),
            decision.to_owned(),
            answer.to_owned(),
        ];
        expected.sort();
        assert_eq!(texts, expected);
    }
    assert_eq!(run.posts(CHANNEL).len(), 8);
    run.stop().await;
}
