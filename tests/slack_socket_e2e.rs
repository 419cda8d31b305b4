//! Slack's Socket Mode faults end to end through the real `hermesd run` binary: Slack's
//! retries and duplicate deliveries (also after a `kill -9`, when only the journal
//! remembers), a socket that goes silent (replaced by the adapter; and when Slack also
//! refuses new connections, `/ready` shows the adapter degraded until it is live again),
//! and a `disconnect` frame (the new socket opens before the old one closes). In every case
//! each message is answered exactly once and none is lost.

mod slack_support;
mod support;

use fake_slack::SocketEvent;
use serde_json::Value;
use slack_support::{OWNER, SlackRun, WAIT};

async fn ready(run: &SlackRun) -> (u16, Value) {
    let url = format!("{}/ready", run.daemon().admin_url());
    let response = reqwest::get(url).await.expect("GET /ready");
    let code = response.status().as_u16();
    (code, response.json().await.expect("/ready is JSON"))
}

/// The texts posted in `channel`, sorted (separate sessions may answer in any order).
fn sorted_texts(run: &SlackRun, channel: &str) -> Vec<String> {
    let mut texts: Vec<String> = run.posts(channel).into_iter().map(|p| p.text).collect();
    texts.sort();
    texts
}

fn connection_ids(run: &SlackRun) -> Vec<u64> {
    run.slack
        .records()
        .timeline
        .iter()
        .filter_map(|e| match e {
            SocketEvent::Hello { connection } => Some(*connection),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retried_and_duplicate_envelopes_are_answered_once_even_after_kill_9() {
    let mut run = SlackRun::start(
        &[],
        &[("RUST_LOG", "info,hermesd::gateway::router::respond=debug")],
    )
    .await;
    let dm = "D0OWNER";
    let (first, _) = run.dm(dm, OWNER, "only once please");
    assert_eq!(run.next_post(dm, 0).await.text, "echo: only once please");
    run.wait_for_ack(&first).await;

    // Slack retries the event (retry_attempt 1) and then delivers it once more: same
    // event id, new envelopes; both are acknowledged, neither answered.
    let retry = run.slack.redeliver(&first.envelope_id, "timeout").unwrap();
    let duplicate = run
        .slack
        .redeliver(&first.envelope_id, "http_error")
        .unwrap();
    assert_eq!(retry.event_id, first.event_id);
    run.wait_for_ack(&retry).await;
    run.wait_for_ack(&duplicate).await;
    let (barrier, _) = run.dm(dm, OWNER, "barrier one");
    assert_eq!(run.next_post(dm, 1).await.text, "echo: barrier one");
    run.wait_until_delivered(&first).await;
    run.wait_until_delivered(&barrier).await;

    // kill -9: the adapter's memory is gone, only the journal remembers the event.
    let daemon = run.daemon.take().unwrap();
    tokio::task::spawn_blocking(move || daemon.kill9())
        .await
        .unwrap();
    run.slack
        .wait_within(WAIT, "the killed daemon's socket to close", |r| {
            r.timeline
                .iter()
                .any(|e| matches!(e, SocketEvent::ClosedByClient { .. }))
                .then_some(())
        })
        .await;
    // Sent while hermesd is down: Slack holds it until a socket says hello.
    let (while_down, _) = run.dm(dm, OWNER, "sent while down");
    run.launch(2).await;
    let after_restart = run.slack.redeliver(&first.envelope_id, "timeout").unwrap();
    run.wait_for_ack(&after_restart).await;
    run.wait_for_ack(&while_down).await;
    run.dm(dm, OWNER, "barrier two");
    run.posts_in(dm, 4).await;
    // One more round trip, so a late second answer would have had time to show.
    run.dm(dm, OWNER, "barrier three");
    run.posts_in(dm, 5).await;
    assert_eq!(
        sorted_texts(&run, dm),
        [
            "echo: barrier one",
            "echo: barrier three",
            "echo: barrier two",
            "echo: only once please",
            "echo: sent while down",
        ]
    );
    assert_eq!(run.model_requests().len(), 5);
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_socket_is_replaced_and_ready_shows_a_failed_reconnect() {
    let run = SlackRun::start(
        &[
            ("socket_ping_interval_seconds", "0.5"),
            ("socket_silence_seconds", "2"),
        ],
        &[("HERMESD_ADAPTER_BACKOFF_SECS", "1")],
    )
    .await;
    let dm = "D0OWNER";

    // The socket stops answering (pings included): the adapter notices within its silence
    // window, opens a new connection and carries on; the supervisor never had to step in.
    run.slack.go_silent();
    run.slack
        .wait_within(WAIT, "the socket to go silent", |r| {
            r.timeline
                .iter()
                .any(|e| matches!(e, SocketEvent::Silenced { .. }))
                .then_some(())
        })
        .await;
    // Slack holds it until a socket works again.
    let (during, _) = run.dm(dm, OWNER, "sent into the silence");
    run.daemon()
        .wait_for_line("socket silent; replacing it", WAIT)
        .expect("silence detected");
    run.wait_for_hellos(2).await;
    assert_eq!(run.slack.calls("apps.connections.open").len(), 2);
    assert_eq!(
        run.next_post(dm, 0).await.text,
        "echo: sent into the silence"
    );
    run.wait_for_ack(&during).await;
    let (code, body) = ready(&run).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["adapters"]["slack"]["state"], "live", "{body}");
    assert_eq!(body["adapters"]["slack"]["restarts"], 0, "{body}");

    // Silent again, and Slack refuses new connections: no socket can be opened, so the
    // supervisor sees no progress and `/ready` says degraded (not "starting") until a
    // socket works again.
    run.slack.refuse_connections(Some("internal_error"));
    run.slack.go_silent();
    run.daemon()
        .wait_for_line("no progress for", WAIT)
        .expect("the supervisor noticed");
    let (code, body) = ready(&run).await;
    assert_eq!(code, 503, "{body}");
    assert_eq!(body["adapters"]["slack"]["state"], "degraded", "{body}");
    let error = body["adapters"]["slack"]["last_error"]
        .as_str()
        .unwrap_or("");
    assert!(error.contains("no progress"), "{body}");
    let (queued, _) = run.dm(dm, OWNER, "sent during the outage");

    run.slack.refuse_connections(None);
    run.daemon()
        .wait_for_line("adapter live again", WAIT)
        .expect("live again");
    let (code, body) = ready(&run).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["adapters"]["slack"]["state"], "live", "{body}");
    assert!(
        body["adapters"]["slack"]["restarts"].as_u64() >= Some(1),
        "{body}"
    );
    assert_eq!(
        run.next_post(dm, 1).await.text,
        "echo: sent during the outage"
    );
    run.wait_for_ack(&queued).await;
    run.dm(dm, OWNER, "after the recovery");
    run.posts_in(dm, 3).await;
    assert_eq!(
        sorted_texts(&run, dm),
        [
            "echo: after the recovery",
            "echo: sent during the outage",
            "echo: sent into the silence",
        ]
    );
    assert_eq!(run.model_requests().len(), 3);
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_frame_opens_the_new_socket_first_and_loses_nothing() {
    let run = SlackRun::start(&[], &[]).await;
    let dm = "D0OWNER";
    run.dm(dm, OWNER, "before the refresh");
    run.next_post(dm, 0).await;

    // Slack warns the socket will be refreshed; events keep coming meanwhile.
    run.slack.send_disconnect("refresh_requested");
    let around: Vec<_> = (0..5)
        .map(|i| run.dm(dm, OWNER, &format!("around the switch {i}")).0)
        .collect();
    run.wait_for_hellos(2).await;
    let (after, _) = run.dm(dm, OWNER, "after the switch");
    run.posts_in(dm, 7).await;
    // With both sockets open Slack may hand "after the switch" to the old one as the
    // daemon closes it; then Slack's retry of it is what gets acked.
    for pushed in around.iter().chain([&after]) {
        run.wait_for_delivery_ack(pushed).await;
    }

    let ids = connection_ids(&run);
    let (old, new) = (ids[0], ids[1]);
    let records = run
        .slack
        .wait_within(WAIT, "the old socket to be closed", |r| {
            r.position(&SocketEvent::ClosedByClient { connection: old })
                .map(|_| r.clone())
        })
        .await;
    let new_hello = records
        .position(&SocketEvent::Hello { connection: new })
        .unwrap();
    let old_closed = records
        .position(&SocketEvent::ClosedByClient { connection: old })
        .unwrap();
    assert!(new_hello < old_closed, "{:#?}", records.timeline);
    assert_eq!(run.slack.calls("apps.connections.open").len(), 2);

    let mut expected: Vec<String> = (0..5)
        .map(|i| format!("echo: around the switch {i}"))
        .chain([
            "echo: after the switch".to_owned(),
            "echo: before the refresh".to_owned(),
        ])
        .collect();
    expected.sort();
    assert_eq!(sorted_texts(&run, dm), expected);
    assert_eq!(run.model_requests().len(), 7);
    run.stop().await;
}
