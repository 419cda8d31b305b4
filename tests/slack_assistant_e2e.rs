//! Slack's assistant split view (<https://api.slack.com/docs/apps/ai>) through the real
//! `hermesd run` binary: the opened thread gets suggested prompts, a question in it is
//! answered in the thread with the channel the user is looking at passed to the agent,
//! the thread shows a status while the turn runs, and the session's generated title
//! becomes the thread's title.

mod slack_support;
mod support;

use fake_slack::events;
use slack_support::{OWNER, SlackRun, WAIT, last_user_text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assistant_thread_gets_prompts_status_context_and_a_title() {
    let run = SlackRun::start(&[], &[]).await;
    run.model.set_title_reply(Some("Incident Review"));
    let dm = "D0OWNER";
    let thread = run.slack.next_ts();
    let started = run.slack.push_event(events::assistant_thread(
        "assistant_thread_started",
        OWNER,
        dm,
        &thread,
        Some("C0INCIDENT"),
        &run.slack.next_ts(),
    ));
    run.wait_for_ack(&started).await;
    let prompts = run
        .slack
        .wait_within(WAIT, "the suggested prompts", |r| {
            r.calls
                .iter()
                .find(|c| c.method == "assistant.threads.setSuggestedPrompts")
                .cloned()
        })
        .await;
    assert_eq!(prompts.str("channel_id"), Some(dm));
    assert_eq!(prompts.str("thread_ts"), Some(thread.as_str()));

    run.dm_in_thread(dm, OWNER, "what happened here?", &thread);
    let reply = run.next_post(dm, 0).await;
    assert_eq!(reply.thread_ts.as_deref(), Some(thread.as_str()));
    let asked = last_user_text(&run.model_requests()[0]);
    assert!(
        asked.starts_with("[Slack assistant: the user is viewing channel <#C0INCIDENT>]"),
        "{asked}"
    );
    let statuses = run.slack.calls("assistant.threads.setStatus");
    assert!(
        statuses
            .iter()
            .any(|s| s.str("thread_ts") == Some(thread.as_str())
                && !s.str("status").unwrap_or("").is_empty()),
        "{statuses:#?}"
    );
    let title = run
        .slack
        .wait_within(WAIT, "the thread's title", |r| {
            r.calls
                .iter()
                .find(|c| c.method == "assistant.threads.setTitle")
                .cloned()
        })
        .await;
    assert_eq!(title.str("channel_id"), Some(dm));
    assert_eq!(title.str("thread_ts"), Some(thread.as_str()));
    assert_eq!(title.str("title"), Some("Incident Review"));
    assert!(run.slack.records().faulted.is_empty());
    run.stop().await;
}
