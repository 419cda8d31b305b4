//! Slack's 3-second ack deadline through the real `hermesd run` binary: a message whose
//! attachment takes 10 seconds to download is recorded and acked at once, and its file is
//! fetched afterwards, before its turn. Its own envelope, every envelope of the other
//! channels, and a slash command typed in the slow channel itself are acked in under a
//! second (measured by the fake, from the envelope written to the ack read); Slack never
//! has to retry (the fake would, on its own, as Slack does); every message is answered
//! exactly once; the model gets the file once it is downloaded, and a one-line notice
//! instead when the download fails.

mod slack_support;
mod support;

use std::time::Duration;

use fake_slack::{Fault, Pushed, events};
use serde_json::{Value, json};
use slack_support::{FRIEND, OWNER, SlackRun};

/// Slack's deadline is 3 s; anything near it is a bug, so the bound asserted is 1 s.
const ACK_BOUND: Duration = Duration::from_secs(1);
const DOWNLOAD: Duration = Duration::from_secs(10);

/// A DM from the owner sharing `file`, as Slack sends it (`file_share`).
fn share_file(run: &SlackRun, channel: &str, text: &str, file: Value) -> Pushed {
    let ts = run.slack.next_ts();
    let mut shared = events::dm(channel, OWNER, text, &ts);
    shared["subtype"] = json!("file_share");
    shared["files"] = json!([file]);
    run.slack.push_event(shared)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_download_delays_no_ack_not_even_its_own() {
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
    let slow_push = share_file(&run, slow, "read this", file);
    run.wait_for_ack(&slow_push).await;
    run.wait_for_call("file.download").await;
    // The next download fails: that message's model sees a notice instead of the file.
    let failing = "D0FAIL";
    let broken = run
        .slack
        .add_file("broken.txt", "text/plain", b"never seen".to_vec());
    run.slack.fail_next("file.download", Fault::Status(500));
    let failing_push = share_file(&run, failing, "and this one", broken);

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
    fast.push(slow_push.clone());
    fast.push(failing_push.clone());
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
            "{} acked after {latency:?} while a file downloaded",
            pushed.envelope_id
        );
    }
    for channel in others {
        let posts = run.posts_in(channel, 3).await;
        let mut texts: Vec<&str> = posts.iter().map(|p| p.text.as_str()).collect();
        texts.sort();
        assert_eq!(texts, ["echo: quick 0", "echo: quick 1", "echo: warm up"]);
    }

    // The slow message: acked before its download, so Slack never retried it; answered
    // once the file was there, and the model saw the file's content.
    let posts = run.posts_in(slow, 2).await;
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
        "the file message reached the model once, with its file"
    );
    let posts = run.posts_in(failing, 1).await;
    assert!(posts[0].text.contains("and this one"), "{}", posts[0].text);
    let failed = run
        .model_requests()
        .iter()
        .map(slack_support::last_user_text)
        .filter(|text| text.contains("and this one"))
        .collect::<Vec<_>>();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert!(
        failed[0].contains("[Slack attachment notice]") && failed[0].contains("HTTP 500"),
        "the model is told the download failed: {}",
        failed[0]
    );
    assert!(!failed[0].contains("never seen"), "{}", failed[0]);

    // A last round trip, so a late second answer would have had time to show.
    run.dm(others[0], OWNER, "barrier");
    run.posts_in(others[0], 4).await;
    assert_eq!(run.posts(slow).len(), 2, "{:#?}", run.posts(slow));
    assert_eq!(run.posts(failing).len(), 1, "{:#?}", run.posts(failing));
    let retries = run.slack.records().auto_retries;
    assert!(retries.is_empty(), "Slack had to retry: {retries:?}");
    // Warm-up, six quick ones, the two file messages, the barrier (the slash command is
    // the gateway's own and asks no model).
    assert_eq!(run.model_requests().len(), 3 + 6 + 2 + 1);
    run.stop().await;
}

/// Acked before its download, the message lives only in the journal while the file
/// downloads: a `kill -9` then loses nothing. The restarted daemon fetches the file again
/// and answers once, and the model sees the file once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_the_download_after_the_ack_loses_nothing() {
    let mut run = SlackRun::start(&[], &[]).await;
    let dm = "D0KILL";
    let file = run.slack.add_file(
        "later.txt",
        "text/plain",
        b"fetched after the restart".to_vec(),
    );
    // Long enough that the daemon is killed mid-download.
    run.slack
        .fail_next("file.download", Fault::Delay(Duration::from_secs(600)));
    let pushed = share_file(&run, dm, "keep this", file);
    run.wait_for_ack(&pushed).await;
    let latency = run
        .slack
        .records()
        .ack_latency(&pushed.envelope_id)
        .expect("acked and timed");
    assert!(latency < ACK_BOUND, "acked after {latency:?}");
    run.wait_for_call("file.download").await;

    let daemon = run.daemon.take().unwrap();
    tokio::task::spawn_blocking(move || daemon.kill9())
        .await
        .unwrap();
    assert!(run.posts(dm).is_empty(), "answered before the file came");
    run.launch(2).await;
    let answer = run.next_post(dm, 0).await;
    assert!(answer.text.contains("keep this"), "{}", answer.text);
    // One more round trip, so a late second answer would have had time to show.
    run.dm(dm, OWNER, "barrier");
    run.posts_in(dm, 2).await;
    assert_eq!(run.posts(dm).len(), 2, "{:#?}", run.posts(dm));
    let with_file = run
        .model_requests()
        .iter()
        .filter(|r| {
            slack_support::last_user_text(r).contains("[Content of later.txt]:\nfetched after")
        })
        .count();
    assert_eq!(with_file, 1, "the model saw the file once");
    let retries = run.slack.records().auto_retries;
    assert!(retries.is_empty(), "Slack had to retry: {retries:?}");
    run.stop().await;
}
