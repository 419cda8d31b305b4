//! The Socket Mode rules: ack only after the core recorded, redelivery on `Failed`,
//! retried envelopes keep their event id, reconnect-before-close on `disconnect`, silent
//! sockets replaced, bad tokens fatal, plain-text sockets to remote hosts refused.

mod support;

use std::time::Duration;

use fake_slack::{FakeSlack, SocketEvent};
use hermes_adapter::{Adapter, AdapterError, RecordOutcome};
use hermes_slack::{SlackAdapter, Tunables};
use serde_json::json;
use support::{BOUND, Harness, context, settings};

#[tokio::test]
async fn envelopes_are_acked_only_after_the_core_recorded_them() {
    let mut h = Harness::start(json!({})).await;
    let (pushed, _) = h.push_dm("first");
    let inbound = h.next_inbound().await;
    // The adapter is waiting for our answer: nothing may have been acked yet.
    assert!(
        h.fake
            .records()
            .acks
            .iter()
            .all(|a| a.envelope_id != pushed.envelope_id),
        "acked before the core recorded the event"
    );
    inbound.recorded.send(RecordOutcome::Recorded).unwrap();
    let ack = h.fake.wait_for_ack(&pushed.envelope_id).await;
    assert_eq!(ack.frame, json!({"envelope_id": pushed.envelope_id}));
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_failed_record_is_not_acked_and_the_redelivery_is_handed_over_again() {
    let mut h = Harness::start(json!({})).await;
    let (pushed, _) = h.push_dm("keep me");
    let inbound = h.next_inbound().await;
    inbound.recorded.send(RecordOutcome::Failed).unwrap();
    // The next envelope is handled (and acked) while the failed one stays unacked.
    let (marker, _) = h.push_dm("marker");
    let marker_event = h.record().await;
    assert_eq!(marker_event.text, "marker");
    h.fake.wait_for_ack(&marker.envelope_id).await;
    assert!(
        h.fake
            .records()
            .acks
            .iter()
            .all(|a| a.envelope_id != pushed.envelope_id)
    );

    // Slack retries the unacked envelope on its own once its ack is overdue.
    let again = h.record().await;
    assert_eq!(again.text, "keep me");
    assert_eq!(
        again.event_id, pushed.event_id,
        "a redelivery keeps Slack's event id"
    );
    let acked = h
        .fake
        .wait_for("the redelivered envelope's ack", |r| {
            r.acks
                .iter()
                .find(|a| a.envelope_id != marker.envelope_id)
                .cloned()
        })
        .await;
    let records = h.fake.records();
    assert!(
        records
            .auto_retries
            .iter()
            .any(|(missed, retry)| missed == &pushed.envelope_id && retry == &acked.envelope_id),
        "{:?}",
        records.auto_retries
    );
    assert_ne!(
        acked.envelope_id, pushed.envelope_id,
        "the retry came in a new envelope"
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_duplicate_answer_is_acked_and_a_recorded_redelivery_is_not_handed_over_twice() {
    let mut h = Harness::start(json!({})).await;
    let (pushed, _) = h.push_dm("once");
    let inbound = h.next_inbound().await;
    inbound.recorded.send(RecordOutcome::Duplicate).unwrap();
    h.fake.wait_for_ack(&pushed.envelope_id).await;
    // Slack retries an event whose ack it missed: same event, retry_attempt 1.
    let ts = h.fake.next_ts();
    let event = fake_slack::events::dm(support::DM, support::USER, "retried", &ts);
    let first = h.fake.push_event(event.clone());
    assert_eq!(h.record().await.text, "retried");
    h.fake.wait_for_ack(&first.envelope_id).await;
    let retry = h.fake.push_event(event);
    h.fake.wait_for_ack(&retry.envelope_id).await;
    h.expect_only_marker("after the retry").await;
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_disconnect_frame_opens_the_new_socket_before_closing_the_old() {
    let mut h = Harness::start(json!({})).await;
    h.fake.send_disconnect("warning");
    // Slack may still deliver on the old socket after the warning.
    let (during, _) = h.push_dm("during handover");
    assert_eq!(h.record().await.text, "during handover");
    h.fake.wait_for_ack(&during.envelope_id).await;
    h.fake
        .wait_for("the old socket closed by the client", |r| {
            r.position(&SocketEvent::ClosedByClient {
                connection: first_connection(r),
            })
        })
        .await;
    let records = h.fake.records();
    let old = first_connection(&records);
    let new_hello = records
        .timeline
        .iter()
        .position(|e| matches!(e, SocketEvent::Hello { connection } if *connection != old))
        .expect("a second socket said hello");
    let old_closed = records
        .position(&SocketEvent::ClosedByClient { connection: old })
        .unwrap();
    assert!(
        new_hello < old_closed,
        "old socket closed before the new one was ready: {:?}",
        records.timeline
    );
    let (after, _) = h.push_dm("after handover");
    assert_eq!(h.record().await.text, "after handover");
    let ack = h.fake.wait_for_ack(&after.envelope_id).await;
    assert_ne!(ack.connection, old);
    h.stop().await.unwrap();
}

fn first_connection(records: &fake_slack::Records) -> u64 {
    records
        .timeline
        .iter()
        .find_map(|e| match e {
            SocketEvent::Opened { connection } => Some(*connection),
            _ => None,
        })
        .expect("a socket was opened")
}

#[tokio::test]
async fn a_silent_socket_is_detected_and_replaced() {
    let tunables = Tunables {
        ping_interval: Duration::from_millis(100),
        silence_window: Duration::from_secs(1),
        ..Tunables::default()
    };
    let mut h = Harness::start_with(json!({}), &[], tunables).await;
    h.fake.go_silent();
    h.fake.wait_for_hellos(2).await;
    let (pushed, _) = h.push_dm("on the new socket");
    assert_eq!(h.record().await.text, "on the new socket");
    h.fake.wait_for_ack(&pushed.envelope_id).await;
    assert!(h.progress.reports() > 0);
    h.fake
        .wait_for("a ping on the new socket", |r| {
            r.timeline.iter().any(|e| matches!(e, SocketEvent::Ping { connection } if *connection != first_connection(r))).then_some(())
        })
        .await;
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_dropped_socket_is_reopened_and_unacked_envelopes_arrive_there() {
    let mut h = Harness::start(json!({})).await;
    h.fake.drop_socket();
    h.fake.wait_for_hellos(2).await;
    let (pushed, _) = h.push_dm("after the drop");
    assert_eq!(h.record().await.text, "after the drop");
    h.fake.wait_for_ack(&pushed.envelope_id).await;
    h.stop().await.unwrap();
}

async fn run_until_done(adapter: SlackAdapter) -> Result<(), AdapterError> {
    let (ctx, _inbound) = context();
    tokio::time::timeout(BOUND, adapter.run(ctx))
        .await
        .expect("run should end on its own")
}

#[tokio::test]
async fn invalid_bot_token_is_fatal() {
    let fake = FakeSlack::start().await;
    let cache = tempfile::tempdir().unwrap();
    let mut s = settings(&fake, json!({}), &[], cache.path());
    s.bot_token = hermes_slack::Secret::new("xoxb-revoked-token-999");
    let error = run_until_done(SlackAdapter::new(s)).await.unwrap_err();
    assert!(matches!(error, AdapterError::Fatal(_)), "{error:?}");
    assert!(error.to_string().contains("invalid_auth"));
    assert!(!error.to_string().contains("xoxb-revoked-token-999"));
    assert_eq!(fake.calls("auth.test").len(), 1);
}

#[tokio::test]
async fn invalid_app_token_is_fatal() {
    let fake = FakeSlack::start().await;
    let cache = tempfile::tempdir().unwrap();
    let mut s = settings(&fake, json!({}), &[], cache.path());
    s.app_token = hermes_slack::Secret::new("xapp-revoked-token-999");
    let error = run_until_done(SlackAdapter::new(s)).await.unwrap_err();
    assert!(matches!(error, AdapterError::Fatal(_)), "{error:?}");
    assert!(!error.to_string().contains("xapp-revoked-token-999"));
}

#[tokio::test]
async fn a_plain_ws_url_to_a_remote_host_is_refused() {
    let fake = FakeSlack::start().await;
    fake.set_socket_url(Some("ws://wss-primary.slack.com/link/?ticket=1".into()));
    let cache = tempfile::tempdir().unwrap();
    let adapter = SlackAdapter::new(settings(&fake, json!({}), &[], cache.path()));
    let error = run_until_done(adapter).await.unwrap_err();
    assert!(
        matches!(&error, AdapterError::Fatal(m) if m.contains("non-loopback")),
        "{error:?}"
    );
}

#[tokio::test]
async fn repeated_open_failures_give_up_with_a_retryable_error() {
    let fake = FakeSlack::start().await;
    fake.refuse_connections(Some("internal_error"));
    let cache = tempfile::tempdir().unwrap();
    let tunables = Tunables {
        reconnect_base: Duration::from_millis(1),
        reconnect_max: Duration::from_millis(5),
        max_open_failures: 3,
        ..Tunables::default()
    };
    let adapter =
        SlackAdapter::with_tunables(settings(&fake, json!({}), &[], cache.path()), tunables);
    let error = run_until_done(adapter).await.unwrap_err();
    assert!(matches!(error, AdapterError::Retryable(_)), "{error:?}");
    assert_eq!(fake.calls("apps.connections.open").len(), 3);
}

#[tokio::test]
async fn shutdown_returns_ok_and_closes_the_socket() {
    let h = Harness::start(json!({})).await;
    assert_eq!(h.fake.records().hellos(), 1);
    let progress = h.progress.clone();
    let result = {
        let Harness {
            fake,
            shutdown,
            run,
            ..
        } = h;
        shutdown.cancel();
        let result = tokio::time::timeout(BOUND, run).await.unwrap().unwrap();
        fake.wait_for("the socket closed", |r| {
            r.timeline
                .iter()
                .any(|e| matches!(e, SocketEvent::ClosedByClient { .. }))
                .then_some(())
        })
        .await;
        result
    };
    assert!(result.is_ok());
    assert!(progress.reports() > 0, "hello must count as progress");
}

#[tokio::test]
async fn shutdown_during_a_hand_over_returns_ok_without_acking() {
    let mut h = Harness::start(json!({})).await;
    let (pushed, _) = h.push_dm("in flight");
    let inbound = h.next_inbound().await; // held: the core never answers
    let Harness {
        fake,
        shutdown,
        run,
        ..
    } = h;
    shutdown.cancel();
    let result = tokio::time::timeout(BOUND, run).await.unwrap().unwrap();
    assert!(result.is_ok(), "{result:?}");
    drop(inbound);
    assert!(
        fake.records()
            .acks
            .iter()
            .all(|a| a.envelope_id != pushed.envelope_id)
    );
}
