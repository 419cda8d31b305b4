//! Stalled polling through the real binary: the fake stops answering `getUpdates` (the
//! connection stays open, as a dead NAT path looks), the daemon notices the missing progress
//! within the adapter's liveness window, `/ready` turns 503 with the adapter `degraded`,
//! polling is restarted, and once the Bot API answers again the message sent during the
//! stall and one sent afterwards are each answered exactly once and `/ready` recovers.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, Fault, User};
use serde_json::Value;
use telegram_support::{Rig, WAIT, start};

const CHAT: i64 = 9001;

async fn ready(rig: &Rig) -> (u16, Value) {
    let response = reqwest::get(format!("{}/ready", rig.daemon().admin_url()))
        .await
        .expect("GET /ready");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON readiness"))
}

/// Waits until `/ready` answers `status`, re-asking whenever the fake sees traffic (the
/// poller calls it at least once per poll timeout).
async fn wait_ready(rig: &Rig, status: u16) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let change = rig.telegram.next_change(left);
        let (now, body) = ready(rig).await;
        if now == status {
            return body;
        }
        assert!(
            change.await,
            "/ready stayed {now} {body}; log {:#?}",
            rig.daemon().logs()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_poll_is_detected_restarted_and_nothing_is_lost() {
    // Poll timeout 1 s + margin 1 s: a poll is abandoned after 2 s, the adapter counts as
    // silent after 3 s without a completed poll.
    let rig = start(
        "poll_margin_seconds: 1\nrequest_timeout_seconds: 5",
        "",
        &[("HERMESD_ADAPTER_BACKOFF_SECS", "1")],
    )
    .await;
    let (chat, user) = (Chat::private(CHAT), User::new(CHAT, "Ada"));
    rig.telegram.push_text(chat.clone(), user.clone(), "before");
    assert_eq!(rig.wait_sent_to(CHAT, 1).await[0].text, "echo: before");
    let body = wait_ready(&rig, 200).await;
    assert_eq!(body["adapters"]["telegram"]["state"], "live");

    // Every poll from now on hangs until the test lifts the fault.
    rig.telegram.fail_next("getUpdates", Fault::Stall, 10_000);
    let daemon = rig.daemon.as_ref().unwrap();
    let line = tokio::task::block_in_place(|| daemon.wait_for_line("no progress for", WAIT))
        .unwrap_or_else(|| panic!("stall never detected: {:#?}", daemon.logs()));
    assert!(line.contains("telegram"), "{line}");
    let (status, body) = ready(&rig).await;
    assert_eq!(status, 503, "{body}");
    let telegram = &body["adapters"]["telegram"];
    assert_eq!(telegram["state"], "degraded", "{body}");
    assert!(
        telegram["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("no progress")),
        "{body}"
    );
    let during = rig.telegram.push_text(chat.clone(), user.clone(), "during");

    rig.telegram.clear_faults("getUpdates");
    let body = wait_ready(&rig, 200).await;
    let telegram = &body["adapters"]["telegram"];
    assert_eq!(telegram["state"], "live", "{body}");
    assert!(telegram["restarts"].as_u64().unwrap() >= 1, "{body}");
    rig.wait_confirmed(during).await;
    rig.telegram.push_text(chat, user, "after");

    let sent = rig.wait_sent_to(CHAT, 3).await;
    let texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["echo: before", "echo: during", "echo: after"]);
    let stalled = rig
        .telegram
        .calls_of("getUpdates")
        .iter()
        .filter(|c| c.fault == Some(Fault::Stall))
        .count();
    assert!(
        stalled >= 2,
        "polls were retried during the stall: {stalled}"
    );
    rig.stop().await;
}
