//! An envelope whose payload does not have its documented shape reaches the core as a dead
//! letter, is acknowledged only after the core kept it, and the next message still flows.

mod support;

use hermes_adapter::RecordOutcome;
use serde_json::json;
use support::{BOUND, DM, Harness, USER};

#[tokio::test]
async fn a_malformed_envelope_is_kept_then_acknowledged() {
    let mut h = Harness::start(json!({})).await;
    // An events_api payload whose `event` is not an object.
    let envelope_id = h.fake.push_raw_envelope(
        "events_api",
        json!({"type": "event_callback", "event_id": "Ev1", "event": "garbled",
            "channel_id": DM, "user_id": USER}),
    );
    let handed = tokio::time::timeout(BOUND, h.dead_letters.recv())
        .await
        .expect("a dead letter within 30 s")
        .expect("channel open");
    assert_eq!(handed.letter.platform, "slack");
    assert_eq!(handed.letter.item_id, envelope_id);
    assert!(handed.letter.raw.contains("garbled"));
    assert_eq!(
        handed.letter.source.as_ref().map(|s| s.chat_id.as_str()),
        Some(DM)
    );
    handed.recorded.send(RecordOutcome::Recorded).unwrap();
    h.fake.wait_for_ack(&envelope_id).await;

    let (pushed, _) = h.push_dm("still there?");
    let event = h.record().await;
    assert_eq!(event.text, "still there?");
    h.fake.wait_for_ack(&pushed.envelope_id).await;
}
