//! Slack's 3-second ack deadline through the real `hermesd run` binary: a message whose
//! attachment takes 10 seconds to download holds up only its own channel. Every envelope
//! of the other channels, and a slash command typed in the slow channel itself, is acked
//! in under a second (measured by the fake, from the envelope written to the ack read);
//! the fake retries the slow envelope on its own, as Slack does, and still every message
//! is answered exactly once.

mod slack_support;
mod support;

use std::time::Duration;

use fake_slack::{Fault, events};
use serde_json::json;
use slack_support::{FRIEND, OWNER, SlackRun, WAIT};

/// Slack's deadline is 3 s; anything near it is a bug, so the bound asserted is 1 s.
const ACK_BOUND: Duration = Duration::from_secs(1);
const DOWNLOAD: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_download_in_one_channel_delays_no_other_ack() {
    let run = SlackRun::start(&[], &[]).await;
    let slow = "D0SLOW";
    let others = ["D0ONE", "D0TWO", "D0THREE"];
    // Warm-up: every user's name is known and the store is open, so what is measured
    // below is the envelope path, not a first look-up.
    for (i, channel) in others.iter().enumerate() {
        let user = if i % 2 == 0 { OWNER } else { FRIEND };
        run.dm(channel, user, "warm up");
        run.posts_in(channel, 1).await;
    }

    let file = run
        .slack
        .add_file("notes.txt", "text/plain", b"the slow file".to_vec());
    run.slack.fail_next("file.download", Fault::Delay(DOWNLOAD));
    let ts = run.slack.next_ts();
    let mut shared = events::dm(slow, OWNER, "read this", &ts);
    shared["subtype"] = json!("file_share");
    shared["files"] = json!([file]);
    let slow_push = run.slack.push_event(shared);
    run.slack
        .wait_within(WAIT, "the slow download to start", |r| {
            r.calls
                .iter()
                .any(|c| c.method == "file.download")
                .then_some(())
        })
        .await;

    // While the download runs: messages in three other channels, and a slash command
    // in the slow channel itself.
    let mut fast = Vec::new();
    for round in 0..2 {
        for (i, channel) in others.iter().enumerate() {
            let user = if i % 2 == 0 { OWNER } else { FRIEND };
            fast.push(run.dm(channel, user, &format!("quick {round}")).0);
        }
    }
    let slash = run.slack.push_slash_command(slow, OWNER, "/help", "");
    fast.push(slash.clone());
    for pushed in &fast {
        run.wait_for_ack(pushed).await;
    }
    let records = run.slack.records();
    for pushed in &fast {
        let latency = records
            .ack_latency(&pushed.envelope_id)
            .expect("acked and timed");
        assert!(
            latency < ACK_BOUND,
            "{} acked after {latency:?} while another channel downloaded a file",
            pushed.envelope_id
        );
    }
    for channel in others {
        let posts = run.posts_in(channel, 3).await;
        let mut texts: Vec<&str> = posts.iter().map(|p| p.text.as_str()).collect();
        texts.sort();
        assert_eq!(texts, ["echo: quick 0", "echo: quick 1", "echo: warm up"]);
    }

    // The slow message: Slack retried it while it downloaded; it is answered once, with
    // the file, and every copy is acked in the end.
    let posts = run.posts_in(slow, 2).await;
    let retries = run
        .slack
        .wait_within(WAIT, "every retry of the slow envelope acked", |r| {
            let retries: Vec<String> = r
                .auto_retries
                .iter()
                .map(|(_, retry)| retry.clone())
                .collect();
            let all_acked = std::iter::once(&slow_push.envelope_id)
                .chain(&retries)
                .all(|id| r.acks.iter().any(|a| &a.envelope_id == id));
            all_acked.then_some(retries)
        })
        .await;
    assert!(
        !retries.is_empty(),
        "a 10 s download leaves the envelope unacked past Slack's deadline"
    );
    let answer = posts
        .iter()
        .find(|p| p.text.starts_with("echo:"))
        .expect("the file message was answered");
    assert!(answer.text.contains("read this"), "{}", answer.text);
    let requests = run.model_requests();
    let with_file: Vec<_> = requests
        .iter()
        .filter(|r| slack_support::last_user_text(r).contains("the slow file"))
        .collect();
    assert_eq!(
        with_file.len(),
        1,
        "the file message reached the model once"
    );

    // A last round trip, so a late second answer would have had time to show.
    run.dm(others[0], OWNER, "barrier");
    run.posts_in(others[0], 4).await;
    assert_eq!(run.posts(slow).len(), 2, "{:#?}", run.posts(slow));
    // Warm-up, six quick ones, the file message, the barrier (the slash command is the
    // gateway's own and asks no model).
    assert_eq!(run.model_requests().len(), 3 + 6 + 1 + 1);
    run.stop().await;
}
