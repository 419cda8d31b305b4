//! The gateway connection heals itself: RESUME with replay after a dropped socket or a
//! RECONNECT, a zombie (unanswered heartbeats) replaced, re-IDENTIFY after INVALID_SESSION,
//! duplicates never handed over twice; bad tokens and a failing gateway lookup are errors;
//! the token never shows in Debug output or errors.

mod support;

use std::time::Duration;

use fake_discord::{FakeDiscord, Incoming};
use hermes_adapter::{AdapterError, Liveness};
use serde_json::json;
use support::{Harness, TOKEN, settings};

#[tokio::test]
async fn a_dropped_socket_resumes_and_missed_dispatches_arrive_once() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    h.fake.push_message(Incoming::new(&dm, &alice, "before"));
    assert_eq!(h.next_event().await.text, "before");

    h.fake.drop_socket();
    // Sent while the socket is down (or going down): replayed on RESUME.
    h.fake
        .push_message(Incoming::new(&dm, &alice, "while down 1"));
    h.fake
        .push_message(Incoming::new(&dm, &alice, "while down 2"));
    let resumes = h.fake.wait_for_frames(6, 1).await;
    assert_eq!(resumes[0].d["session_id"], "session-1");
    assert_eq!(h.next_event().await.text, "while down 1");
    assert_eq!(h.next_event().await.text, "while down 2");

    h.fake.duplicate_next_dispatches(2);
    let twice = h
        .fake
        .push_message(Incoming::new(&dm, &alice, "sent twice"));
    h.fake.push_message(Incoming::new(&dm, &alice, "after"));
    assert_eq!(h.next_event().await.text, "sent twice");
    assert_eq!(h.next_event().await.text, "after");
    assert_eq!(
        h.deliveries_of(&twice),
        1,
        "the duplicate dispatch was not handed over"
    );
    let delivered = h.core.deliveries();
    let unique: std::collections::HashSet<&String> = delivered.iter().collect();
    assert_eq!(
        unique.len(),
        delivered.len(),
        "nothing delivered twice: {delivered:?}"
    );
    assert_eq!(
        h.fake.frames_with_op(2).len(),
        1,
        "resumed, never re-identified"
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_reconnect_request_resumes_the_session() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    h.fake.request_reconnect();
    h.fake.wait_for_frames(6, 1).await;
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    h.fake
        .push_message(Incoming::new(&dm, &alice, "after reconnect"));
    assert_eq!(h.next_event().await.text, "after reconnect");
    assert_eq!(h.fake.frames_with_op(2).len(), 1);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn unanswered_heartbeats_replace_the_zombie_connection() {
    let mut h = Harness::start_with(Duration::from_millis(200), json!({}), &[], |_| {}).await;
    h.ready(1).await;
    // The first connection heartbeats and is answered.
    h.fake
        .wait_for(" a heartbeat ACKed", |s| {
            s.frames
                .iter()
                .any(|f| f.op == 1 && f.connection == 1)
                .then_some(())
        })
        .await;
    h.fake.stop_acking_heartbeats();
    let zombie = h.fake.read(|s| s.connections.last().map(|c| c.id)).unwrap();
    let resume = h
        .fake
        .wait_for("a RESUME from a new connection", |s| {
            s.frames
                .iter()
                .find(|f| f.op == 6 && f.connection > zombie)
                .cloned()
        })
        .await;
    assert_eq!(resume.d["session_id"], "session-1");
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    h.fake
        .push_message(Incoming::new(&dm, &alice, "on the new connection"));
    assert_eq!(h.next_event().await.text, "on the new connection");
    assert_eq!(h.progress.liveness(Duration::from_secs(30)), Liveness::Live);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn invalid_session_leads_to_a_new_identify() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    h.fake.invalidate_session();
    h.ready(2).await;
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    h.fake
        .push_message(Incoming::new(&dm, &alice, "new session"));
    assert_eq!(h.next_event().await.text, "new session");
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_session_timeout_close_re_identifies() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    h.fake.close_gateway(4009);
    h.ready(2).await;
    assert!(
        h.fake.frames_with_op(6).is_empty(),
        "4009 ends the session: no RESUME"
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_bad_token_is_fatal_at_the_rest_check() {
    let fake = FakeDiscord::start("the-real-token", Duration::from_secs(30)).await;
    let cache = tempfile::tempdir().unwrap();
    let config = settings(&fake, json!({}), &[], cache.path());
    let mut h = Harness::from_parts(fake, config, cache);
    let error = h.run_result().await.unwrap_err();
    assert!(matches!(error, AdapterError::Fatal(_)), "{error:?}");
    assert!(error.to_string().contains("401"));
    assert!(!error.to_string().contains(TOKEN));
    assert!(h.fake.frames_with_op(2).is_empty());
}

#[tokio::test]
async fn gateway_close_4004_is_fatal() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    h.fake.close_gateway(4004);
    let error = h.run_result().await.unwrap_err();
    assert!(
        matches!(error, AdapterError::Fatal(ref m) if m.contains("4004")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_failing_gateway_lookup_is_an_error_and_nothing_connects() {
    let fake = FakeDiscord::start(TOKEN, Duration::from_secs(30)).await;
    fake.set_gateway_lookup_status(Some(500));
    let cache = tempfile::tempdir().unwrap();
    let config = settings(&fake, json!({}), &[], cache.path());
    let mut h = Harness::from_parts(fake, config, cache);
    let error = h.run_result().await.unwrap_err();
    assert!(matches!(error, AdapterError::Retryable(_)), "{error:?}");
    assert!(error.to_string().contains("gateway URL"), "{error}");
    assert!(
        h.fake
            .read(|s| s.frames.is_empty() && s.next_connection == 1)
    );

    // A configured gateway URL skips the lookup.
    let fake = FakeDiscord::start(TOKEN, Duration::from_secs(30)).await;
    fake.set_gateway_lookup_status(Some(500));
    let cache = tempfile::tempdir().unwrap();
    let config = settings(
        &fake,
        json!({"gateway_url": fake.gateway_url()}),
        &[],
        cache.path(),
    );
    let mut h = Harness::from_parts(fake, config, cache);
    h.ready(1).await;
    assert!(h.fake.calls_to("GET /gateway/bot").is_empty());
    h.stop().await.unwrap();
}

#[tokio::test]
async fn the_token_never_appears_in_debug_output_or_errors() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    let mut texts = vec![format!("{:?}", h.adapter)];
    let result = hermes_adapter::Adapter::send(
        &h.adapter,
        hermes_adapter::Outbound {
            chat_id: "404".into(),
            thread_id: None,
            kind: hermes_adapter::OutboundKind::Typing,
        },
    )
    .await;
    texts.push(format!("{result:?}"));
    texts.push(
        h.adapter
            .rename_thread("404", "x")
            .await
            .unwrap_err()
            .to_string(),
    );
    h.fake.close_gateway(4004);
    let error = h.run_result().await.unwrap_err();
    texts.push(format!("{error:?} {error}"));
    let identify = h.fake.frames_with_op(2);
    assert_eq!(
        identify[0].d["token"], TOKEN,
        "the token did reach the gateway"
    );
    for text in texts {
        assert!(!text.contains(TOKEN), "token leaked: {text}");
    }
}

#[tokio::test]
async fn heartbeats_continue_while_the_core_is_slow_and_nothing_is_lost() {
    let mut h = Harness::start_with(Duration::from_millis(200), json!({}), &[], |_| {}).await;
    h.ready(1).await;
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    h.core.pause(true);
    // More than the adapter buffers: the gateway reader has to wait for the event loop.
    let ids: Vec<String> = (0..1500)
        .map(|i| {
            h.fake
                .push_message(Incoming::new(&dm, &alice, &format!("m{i}")))
        })
        .collect();
    let before = h.fake.frames_with_op(1).len();
    h.fake
        .wait_for("three heartbeats while the core is stalled", |s| {
            (s.frames.iter().filter(|f| f.op == 1).count() >= before + 3).then_some(())
        })
        .await;
    h.core.pause(false);
    for id in &ids {
        assert_eq!(&h.next_event().await.event_id, id);
    }
    for id in &ids {
        assert_eq!(h.deliveries_of(id), 1);
    }
    h.stop().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_gateway_is_given_up_after_the_configured_attempts() {
    let fake = FakeDiscord::start(TOKEN, Duration::from_secs(30)).await;
    let cache = tempfile::tempdir().unwrap();
    // Port 1 on loopback refuses connections.
    let mut config = settings(
        &fake,
        json!({"gateway_url": "ws://127.0.0.1:1/gw"}),
        &[],
        cache.path(),
    );
    config.max_connect_failures = 3;
    let mut h = Harness::from_parts(fake, config, cache);
    let error = h.run_result().await.unwrap_err();
    assert!(
        matches!(error, AdapterError::Retryable(ref m) if m.contains("3 times")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_socket_closed_right_after_identify_backs_off_instead_of_reconnecting_at_once() {
    let fake = FakeDiscord::start(TOKEN, Duration::from_secs(30)).await;
    fake.close_after_identify(4);
    let cache = tempfile::tempdir().unwrap();
    let mut settings = settings(&fake, json!({}), &[], cache.path());
    settings.reconnect_min = Duration::from_millis(100);
    settings.reconnect_max = Duration::from_millis(400);
    let mut h = Harness::from_parts(fake, settings, cache);
    let identifies = h.fake.wait_for_frames(2, 5).await;
    let gaps: Vec<Duration> = identifies
        .windows(2)
        .map(|pair| pair[1].at - pair[0].at)
        .collect();
    for (index, gap) in gaps.iter().enumerate() {
        let floor = Duration::from_millis(100 << index).min(Duration::from_millis(400));
        assert!(
            *gap >= floor,
            "gap {index} was {gap:?}, backoff ≥ {floor:?}: {gaps:?}"
        );
    }
    // The fifth IDENTIFY got READY: the session works.
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    h.fake.push_message(Incoming::new(&dm, &alice, "finally"));
    assert_eq!(h.next_event().await.text, "finally");
    h.stop().await.unwrap();
}

#[tokio::test]
async fn identifies_wait_for_the_session_start_budget() {
    let fake = FakeDiscord::start(TOKEN, Duration::from_secs(30)).await;
    // One IDENTIFY left until the budget resets in 3 s; the first socket dies at once.
    fake.set_session_start_limit(
        json!({"total": 1000, "remaining": 1, "reset_after": 3000, "max_concurrency": 1}),
    );
    fake.close_after_identify(1);
    let cache = tempfile::tempdir().unwrap();
    let settings = settings(&fake, json!({}), &[], cache.path());
    let mut h = Harness::from_parts(fake, settings, cache);
    let identifies = h.fake.wait_for_frames(2, 2).await;
    let gap = identifies[1].at - identifies[0].at;
    assert!(
        gap >= Duration::from_secs(2),
        "second IDENTIFY after {gap:?}"
    );
    h.stop().await.unwrap();
}
