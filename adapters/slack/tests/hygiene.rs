//! Connection hygiene: `Retry-After` on `apps.connections.open` is honoured, sockets Slack
//! closes right after their `hello` are reopened with a growing delay rather than at once,
//! and file transfers have their own time bound instead of the Web API call's.

mod support;

use std::time::Duration;

use fake_slack::{FakeSlack, Fault};
use hermes_adapter::{Adapter, Outbound, OutboundKind, SendErrorKind};
use hermes_slack::{SlackAdapter, Tunables};
use serde_json::json;
use support::{BOUND, DM, Harness, context, settings};

/// Starts the adapter against `fake` and returns its shutdown token and task.
fn start(
    fake: &FakeSlack,
    tunables: Tunables,
    cache: &std::path::Path,
) -> (
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<Result<(), hermes_adapter::AdapterError>>,
    tokio::sync::mpsc::Receiver<hermes_adapter::Inbound>,
) {
    let adapter = SlackAdapter::with_tunables(settings(fake, json!({}), &[], cache), tunables);
    let (ctx, inbound) = context();
    let shutdown = ctx.shutdown.clone();
    let run = tokio::spawn(async move { adapter.run(ctx).await });
    (shutdown, run, inbound)
}

/// The gaps between consecutive `apps.connections.open` calls.
fn open_gaps(fake: &FakeSlack) -> Vec<Duration> {
    let calls = fake.calls("apps.connections.open");
    calls
        .windows(2)
        .map(|pair| pair[1].at.duration_since(pair[0].at))
        .collect()
}

#[tokio::test]
async fn retry_after_on_apps_connections_open_is_waited_out() {
    let fake = FakeSlack::start().await;
    fake.fail_next(
        "apps.connections.open",
        Fault::RateLimited {
            retry_after_secs: 2,
        },
    );
    let cache = tempfile::tempdir().unwrap();
    // The adapter's own backoff is far shorter than what Slack asks for.
    let tunables = Tunables {
        reconnect_base: Duration::from_millis(10),
        reconnect_max: Duration::from_millis(50),
        max_open_failures: 2,
        ..Tunables::default()
    };
    let (shutdown, run, _inbound) = start(&fake, tunables, cache.path());
    fake.wait_for_hellos(1).await;
    let gaps = open_gaps(&fake);
    assert_eq!(gaps.len(), 1, "one refused open, then one that worked");
    assert!(
        gaps[0] >= Duration::from_secs(2),
        "reopened after {:?}",
        gaps[0]
    );
    shutdown.cancel();
    let result = tokio::time::timeout(BOUND, run).await.unwrap().unwrap();
    assert!(result.is_ok(), "a rate limit is no failure: {result:?}");
}

#[tokio::test]
async fn sockets_closed_right_after_hello_are_reopened_with_a_growing_delay() {
    let fake = FakeSlack::start().await;
    fake.close_after_hello(3);
    let cache = tempfile::tempdir().unwrap();
    let base = Duration::from_millis(200);
    let tunables = Tunables {
        reconnect_base: base,
        reconnect_max: Duration::from_secs(5),
        ..Tunables::default()
    };
    let (shutdown, run, mut inbound) = start(&fake, tunables, cache.path());
    // Three sockets closed at once, the fourth one stays.
    fake.wait_for_hellos(4).await;
    let ts = fake.next_ts();
    fake.push_event(fake_slack::events::dm(DM, support::USER, "made it", &ts));
    let event = tokio::time::timeout(BOUND, inbound.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(event.event.text, "made it");
    let gaps = open_gaps(&fake);
    assert_eq!(gaps.len(), 3, "{gaps:?}");
    for (i, gap) in gaps.iter().enumerate() {
        let least = base * (1 << i);
        assert!(
            *gap >= least,
            "reopen {i} after {gap:?}, expected at least {least:?}"
        );
    }
    shutdown.cancel();
    drop(event);
    tokio::time::timeout(BOUND, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

fn media(path: &str) -> Outbound {
    Outbound {
        chat_id: DM.into(),
        thread_id: None,
        kind: OutboundKind::Media {
            path: path.into(),
            caption: None,
        },
    }
}

#[tokio::test]
async fn uploads_are_bounded_by_the_transfer_timeout_not_the_api_one() {
    let tunables = Tunables {
        request_timeout: Duration::from_secs(1),
        transfer_timeout: Duration::from_secs(60),
        ..Tunables::default()
    };
    let h = Harness::start_with(json!({}), &[], tunables).await;
    let path = h.cache.path().join("report.txt");
    std::fs::write(&path, b"a large report").unwrap();
    // Slack takes longer than a Web API call may to take in the bytes: still a success.
    h.fake
        .fail_next("file.upload", Fault::Delay(Duration::from_secs(2)));
    let sent = h.adapter.send(media(&path.to_string_lossy())).await;
    assert!(sent.is_ok(), "{sent:?}");
    let done = h.fake.calls("files.completeUploadExternal");
    assert_eq!(done.len(), 1);
    assert_eq!(
        h.fake.records().uploads.values().next().map(Vec::as_slice),
        Some(&b"a large report"[..])
    );
    // The same delay on a Web API call is over its bound: reported as ambiguous.
    h.fake
        .fail_next("chat.postMessage", Fault::Delay(Duration::from_secs(2)));
    let text = Outbound {
        chat_id: DM.into(),
        thread_id: None,
        kind: OutboundKind::Text {
            text: "hi".into(),
            reply_to: None,
            plain: false,
        },
    };
    let sent = h.adapter.send(text).await;
    assert_eq!(
        sent.error.as_ref().map(|(kind, _)| *kind),
        Some(SendErrorKind::Ambiguous),
        "{sent:?}"
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn downloads_are_bounded_by_the_transfer_timeout_not_the_api_one() {
    let tunables = Tunables {
        request_timeout: Duration::from_secs(1),
        transfer_timeout: Duration::from_secs(60),
        ..Tunables::default()
    };
    let mut h = Harness::start_with(json!({}), &[], tunables).await;
    let file = h
        .fake
        .add_file("slow.csv", "text/csv", b"a,b\n1,2\n".to_vec());
    h.fake
        .fail_next("file.download", Fault::Delay(Duration::from_secs(2)));
    let ts = h.fake.next_ts();
    let mut shared = fake_slack::events::dm(DM, support::USER, "numbers", &ts);
    shared["files"] = json!([file]);
    h.fake.push_event(shared);
    let event = h.record_and_fetch().await;
    assert_eq!(event.media_paths.len(), 1, "{event:?}");
    assert!(event.text.contains("1,2"), "{}", event.text);
    h.stop().await.unwrap();
}
