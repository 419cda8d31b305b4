//! One slow chat never blocks the others, and the poller does not spin, through the real
//! binary: while a document's download in one chat is held open by the fake, a message in
//! another chat is answered, and the poller (which cannot long-poll while an update is
//! unconfirmed) slows its re-polls to its documented pace of one per 0.5 s once polls bring
//! nothing new; the fake's flood control on getUpdates (armed at 12 calls a second: the
//! ramp after new updates stays under it, a 20 ms spin would not) never has to refuse it.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::time::Duration;

use fake_telegram::{Attachment, Chat, MessageSpec, User};
use telegram_support::start;

const SLOW_CHAT: i64 = 7;
const FAST_CHAT: i64 = 9001;
/// The adapter's documented pace while an update is in flight and nothing new arrives
/// (`IN_FLIGHT_PACE_MAX`), reached after five doublings from 20 ms.
const PACE: Duration = Duration::from_millis(500);
/// Polls it takes the pace to slow from 20 ms to `PACE`.
const RAMP: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_download_neither_blocks_other_chats_nor_makes_the_poller_spin() {
    let rig = start("", "", &[]).await;
    rig.telegram.limit_get_updates(12);
    rig.telegram.hold_downloads();
    let document = MessageSpec::text(
        Chat::private(SLOW_CHAT),
        User::new(SLOW_CHAT, "Slow"),
        "read this",
    )
    .with_attachment(Attachment::Document {
        bytes: vec![b'x'; 4096],
        file_name: "big.txt".into(),
        mime_type: "text/plain".into(),
    });
    rig.telegram.push_message(document);
    rig.wait_for("the download to start", |rig| {
        (!rig.telegram.calls_of("(download)").is_empty()).then_some(())
    })
    .await;

    rig.telegram.push_text(
        Chat::private(FAST_CHAT),
        User::new(FAST_CHAT, "Fast"),
        "quick question",
    );
    rig.wait_sent_to(FAST_CHAT, 1).await;
    assert!(
        rig.sent_to(SLOW_CHAT).is_empty(),
        "the slow chat is still downloading"
    );

    // Nothing new arrives now and one update stays in flight: the poller re-asks at its pace.
    let before = rig.telegram.get_updates_times().len();
    let polls = rig
        .wait_for("ten more polls while the download is held", |rig| {
            let times = rig.telegram.get_updates_times();
            (times.len() >= before + RAMP + 4).then(|| times[before..].to_vec())
        })
        .await;
    for pair in polls[RAMP..].windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= PACE - Duration::from_millis(20),
            "polled again after {gap:?}"
        );
    }
    let refused: Vec<_> = rig
        .telegram
        .calls_of("getUpdates")
        .into_iter()
        .filter(|c| c.status == Some(429))
        .collect();
    assert!(
        refused.is_empty(),
        "flood control refused {} polls",
        refused.len()
    );

    rig.telegram.release_downloads();
    rig.wait_sent_to(SLOW_CHAT, 1).await;
    assert!(
        rig.model_saw().iter().any(|t| t.contains("big.txt")),
        "{:?}",
        rig.model_saw()
    );
    rig.stop().await;
}
