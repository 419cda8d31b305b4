//! Discord end to end when the connection or the daemon goes away: a socket dropped in the
//! middle of a turn is resumed and the reply delivered exactly once; a zombie connection
//! (heartbeats unanswered) is replaced and later messages answered; messages sent while
//! the daemon was down are backfilled from channel history after a restart and answered
//! once, and what was answered before the restart is not answered again.

#[path = "discord_rig/mod.rs"]
mod rig;
mod support;

use std::time::Duration;

use rig::Rig;
use support::fake_model::Step;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_socket_mid_turn_resumes_and_a_zombie_connection_is_replaced() {
    // Short heartbeats, so a zombie is noticed within seconds.
    let mut rig = Rig::new(Duration::from_millis(1000)).await;
    rig.launch().await;
    let dm = rig.dm(&rig.owner);

    let (held, gate) = Step::gated("answer after the drop");
    rig.model.push(held);
    rig.say(&dm, &rig.owner, "hold this turn open");
    rig.model
        .wait_for_requests(1, Duration::from_secs(60))
        .await;
    rig.fake.drop_socket();
    let resumed = rig.fake.wait_for_frames(6, 1).await;
    assert_eq!(resumed[0].d["token"], rig::TOKEN);
    gate.add_permits(1);
    assert_eq!(rig.wait_texts(&dm, 1).await, ["answer after the drop"]);
    rig.say(&dm, &rig.owner, "still with me?");
    let texts = rig.wait_texts(&dm, 2).await;
    assert_eq!(texts, ["answer after the drop", "echo: still with me?"]);

    // The live connection stops acknowledging heartbeats: the adapter reconnects.
    let reconnects =
        |rig: &Rig| rig.fake.frames_with_op(2).len() + rig.fake.frames_with_op(6).len();
    let before = reconnects(&rig);
    rig.fake.stop_acking_heartbeats();
    rig.fake
        .wait_for("a new IDENTIFY or RESUME after missed ACKs", |s| {
            let n = s.frames.iter().filter(|f| f.op == 2 || f.op == 6).count();
            (n > before).then_some(())
        })
        .await;
    rig.say(&dm, &rig.owner, "after the zombie");
    let texts = rig.wait_texts(&dm, 3).await;
    assert_eq!(
        texts,
        [
            "answer after the drop",
            "echo: still with me?",
            "echo: after the zombie"
        ]
    );
    assert_eq!(
        rig.model_saw(),
        ["hold this turn open", "still with me?", "after the zombie"]
    );
    rig.stop().await;
    assert_eq!(rig.texts_in(&dm).len(), 3, "every reply exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_sent_while_down_are_backfilled_and_answered_once() {
    let mut rig = Rig::new(Duration::from_secs(30)).await;
    rig.launch().await;
    let dm = rig.dm(&rig.owner);
    rig.say(&dm, &rig.owner, "before the restart");
    assert_eq!(rig.wait_texts(&dm, 1).await, ["echo: before the restart"]);
    rig.stop().await;

    // While the daemon is down, two messages land in the DM's history only.
    let missed = [
        rig.fake.add_history_message(fake_discord::Incoming::new(
            &dm,
            &rig.owner,
            "sent while down 1",
        )),
        rig.fake.add_history_message(fake_discord::Incoming::new(
            &dm,
            &rig.owner,
            "sent while down 2",
        )),
    ];
    rig.launch().await;
    let texts = rig.wait_texts(&dm, 3).await;
    assert_eq!(
        texts,
        [
            "echo: before the restart",
            "echo: sent while down 1",
            "echo: sent while down 2"
        ]
    );
    // Backfill fetched the DM's history (which still holds the answered message).
    let fetched = rig.fake.calls_to("GET /channels/{id}/messages");
    assert!(
        fetched
            .iter()
            .any(|c| c.path.ends_with(&format!("/channels/{dm}/messages"))),
        "{fetched:?}"
    );
    // A live message afterwards: everything before it was handled exactly once.
    rig.say(&dm, &rig.owner, "live again");
    let texts = rig.wait_texts(&dm, 4).await;
    assert_eq!(texts[3], "echo: live again");
    assert_eq!(
        rig.model_saw(),
        [
            "before the restart",
            "sent while down 1",
            "sent while down 2",
            "live again"
        ]
    );
    rig.stop().await;
    assert_eq!(rig.texts_in(&dm).len(), 4, "ids {missed:?}: no reply twice");
}
