//! Slack's 3-second ack deadline (<https://api.slack.com/apis/socket-mode#acknowledge>):
//! look-ups that only enrich an event give up in time, a message's files are downloaded
//! only after its ack (and clicks or slash commands never wait for them), and the envelopes the fake retries on its own
//! while one is still being handled are handed over once.

mod support;

use std::time::Duration;

use fake_slack::{Fault, events};
use hermes_adapter::{Adapter, RecordOutcome};
use serde_json::json;
use support::{DM, Harness, USER};

/// Slack's deadline is 3 s; the bound asserted keeps a margin below it (the look-up
/// budget is 1.5 s, so a loaded machine still fits).
const ACK_BOUND: Duration = Duration::from_millis(2500);

#[tokio::test]
async fn a_slow_users_info_is_abandoned_and_the_event_goes_on_with_the_user_id() {
    let mut h = Harness::start(json!({})).await;
    h.fake
        .fail_next("users.info", Fault::Delay(Duration::from_secs(20)));
    let (pushed, _) = h.push_dm("who am I?");
    let event = h.record().await;
    assert_eq!(event.text, "who am I?");
    // The name could not be learned in time: the id stands in, and is not remembered.
    assert_eq!(event.source.user_name.as_deref(), Some(USER));
    h.fake.wait_for_ack(&pushed.envelope_id).await;
    let latency = h.fake.records().ack_latency(&pushed.envelope_id).unwrap();
    assert!(latency < ACK_BOUND, "acked after {latency:?}");
    h.push_dm("and now?");
    assert_eq!(
        h.record().await.source.user_name.as_deref(),
        Some("User U100"),
        "the next message asks again"
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_message_with_a_slow_file_is_acked_before_its_download() {
    let mut h = Harness::start(json!({})).await;
    let file = h.fake.add_file("big.txt", "text/plain", b"big".to_vec());
    h.fake
        .fail_next("file.download", Fault::Delay(Duration::from_secs(10)));
    let ts = h.fake.next_ts();
    let mut shared = events::dm(DM, USER, "see attached", &ts);
    shared["files"] = json!([file]);
    let slow = h.fake.push_event(shared);
    let mut recorded = h.record().await;
    assert_eq!(recorded.event_id, slow.event_id);
    h.fake.wait_for_ack(&slow.envelope_id).await;
    let latency = h.fake.records().ack_latency(&slow.envelope_id).unwrap();
    assert!(latency < ACK_BOUND, "acked after {latency:?}");
    assert!(
        h.fake.calls("file.download").is_empty(),
        "downloaded before the ack"
    );
    // The core fetches the file before the turn; clicks and commands meanwhile go on.
    let adapter = h.adapter.clone();
    let fetching = tokio::spawn(async move {
        adapter.fetch_pending_media(&mut recorded).await;
        recorded
    });
    h.fake.wait_for_calls("file.download", 1).await;
    let slash = h.fake.push_slash_command(DM, USER, "/status", "");
    let click = h.fake.push_block_actions(events::Click {
        user: USER,
        channel: DM,
        message_ts: "1.0",
        thread_ts: None,
        action_id: "/approve",
        value: "/approve",
        label: "Allow",
        prompt_text: "Run it?",
    });
    let mut both: Vec<String> = Vec::new();
    for _ in 0..2 {
        both.push(h.record().await.event_id);
    }
    both.sort();
    let mut expected = vec![
        format!("slash:{}", slash.event_id),
        format!("cb:{}", click.event_id),
    ];
    expected.sort();
    assert_eq!(both, expected);
    for pushed in [&slash, &click] {
        h.fake.wait_for_ack(&pushed.envelope_id).await;
        let latency = h.fake.records().ack_latency(&pushed.envelope_id).unwrap();
        assert!(latency < ACK_BOUND, "acked after {latency:?}");
    }
    let fetched = tokio::time::timeout(support::BOUND, fetching)
        .await
        .expect("the download finished")
        .unwrap();
    assert_eq!(fetched.media_paths.len(), 1, "{fetched:?}");
    assert!(
        fetched.text.contains("[Content of big.txt]:\nbig"),
        "{}",
        fetched.text
    );
    assert!(
        h.fake.records().auto_retries.is_empty(),
        "Slack had to retry"
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn retries_of_an_envelope_still_being_handled_are_not_handed_over_again() {
    let mut h = Harness::start(json!({})).await;
    let (pushed, _) = h.push_dm("slow to record");
    let held = h.next_inbound().await;
    // The core takes its time: Slack retries the envelope on its own, with a new envelope
    // id, retry_attempt 1 and a retry_reason.
    let retry = h
        .fake
        .wait_for("Slack's own retry", |r| {
            r.auto_retries
                .iter()
                .find(|(missed, _)| missed == &pushed.envelope_id)
                .map(|(_, retry)| retry.clone())
        })
        .await;
    held.recorded.send(RecordOutcome::Recorded).unwrap();
    h.fake.wait_for_ack(&pushed.envelope_id).await;
    h.fake.wait_for_ack(&retry).await;
    h.expect_only_marker("after the retry").await;
    h.stop().await.unwrap();
}
