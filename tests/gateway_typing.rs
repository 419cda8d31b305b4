//! The typing indicator loop on a paused clock: its cadence, the bound on a slow send, the
//! cool-down after the platform pushes back, pause/resume for approvals, and stop on drop.

mod support;

use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::{LengthUnit, OutboundKind, SendErrorKind, SendResult};
use hermesd::gateway::typing::{DEFAULT_TYPING_INTERVAL, TypingLoop};
use support::scripted_adapter::ScriptedAdapter;
use tokio::time::Instant;

fn adapter() -> Arc<ScriptedAdapter> {
    Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16))
}

/// Send times in milliseconds since `start`.
fn offsets(adapter: &ScriptedAdapter, start: Instant) -> Vec<u128> {
    adapter
        .send_times()
        .into_iter()
        .map(|t| (t - start).as_millis())
        .collect()
}

async fn advance(ms: u64) {
    // The clock is paused: this advances virtual time, letting the loop run to that point.
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

#[tokio::test(start_paused = true)]
async fn typing_repeats_every_interval_to_the_chat_and_stops_when_dropped() {
    let adapter = adapter();
    let start = Instant::now();
    let typing = TypingLoop::start(adapter.clone(), "42", Some("7"), DEFAULT_TYPING_INTERVAL);
    advance(7_000).await;
    assert_eq!(offsets(&adapter, start), [0, 2_000, 4_000, 6_000]);
    let sent = adapter.sent();
    assert!(sent.iter().all(|(_, o)| o.kind == OutboundKind::Typing
        && o.chat_id == "42"
        && o.thread_id.as_deref() == Some("7")));
    drop(typing);
    advance(10_000).await;
    assert_eq!(adapter.sent().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_slow_typing_send_is_abandoned_after_the_bound() {
    let adapter = adapter();
    adapter.answer_after(Duration::from_secs(60), SendResult::sent(None));
    let start = Instant::now();
    let _typing = TypingLoop::start(adapter.clone(), "42", None, DEFAULT_TYPING_INTERVAL);
    advance(6_000).await;
    // Bound 1.5 s (interval 2 s − 0.25 s, capped at 1.5 s), then the interval.
    assert_eq!(offsets(&adapter, start), [0, 3_500, 5_500]);
}

#[tokio::test(start_paused = true)]
async fn the_platform_pushing_back_cools_the_loop_down() {
    let adapter = adapter();
    adapter
        .answer(SendResult::rate_limited(Duration::from_secs(7)))
        .answer(SendResult::failed(SendErrorKind::Transient, "502"))
        .answer(SendResult::rate_limited(Duration::from_millis(100)))
        .answer(SendResult::rate_limited(Duration::from_secs(1_000)))
        .answer(SendResult::failed(SendErrorKind::NotFound, "no such chat"));
    let start = Instant::now();
    let _typing = TypingLoop::start(adapter.clone(), "42", None, DEFAULT_TYPING_INTERVAL);
    advance(341_000).await;
    // retry_after 7 s; no retry_after → 30 s; 0.1 s clamped to 1 s; 1000 s clamped to
    // 300 s; a non-retryable failure keeps the normal interval.
    assert_eq!(
        offsets(&adapter, start),
        [0, 7_000, 37_000, 38_000, 338_000, 340_000]
    );
}

#[tokio::test(start_paused = true)]
async fn typing_pauses_for_an_approval_and_resumes_at_once() {
    let adapter = adapter();
    let start = Instant::now();
    let typing = TypingLoop::start(adapter.clone(), "42", None, DEFAULT_TYPING_INTERVAL);
    advance(1_000).await;
    typing.pause();
    advance(8_000).await;
    assert_eq!(offsets(&adapter, start), [0]);
    typing.resume();
    advance(2_500).await;
    assert_eq!(offsets(&adapter, start), [0, 9_000, 11_000]);
    typing.stop();
    advance(10_000).await;
    assert_eq!(adapter.sent().len(), 3);
}
