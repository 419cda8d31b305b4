//! Discord end to end when the connection or the daemon goes away: a socket dropped in the
//! middle of a turn is resumed and the reply delivered exactly once; a zombie connection
//! (heartbeats unanswered) is replaced and later messages answered; messages sent while
//! the daemon was down are backfilled from channel history after a restart and answered
//! once, and what was answered before the restart is not answered again.

#[path = "discord_rig/mod.rs"]
mod rig;
mod support;

use std::time::Duration;

use fake_discord::Incoming;
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
    let grace = rig.fake.new_user("grace", false, &[]);
    rig.set_env(
        "DISCORD_ALLOWED_USERS",
        &format!("{},{}", rig.owner.id, grace.id),
    );
    rig.launch().await;
    let (ada_dm, grace_dm) = (rig.dm(&rig.owner), rig.dm(&grace));
    rig.say(&ada_dm, &rig.owner, "before the restart");
    rig.say(&grace_dm, &grace, "grace before");
    assert_eq!(
        rig.wait_texts(&ada_dm, 1).await,
        ["echo: before the restart"]
    );
    assert_eq!(rig.wait_texts(&grace_dm, 1).await, ["echo: grace before"]);
    rig.stop().await;

    // While the daemon is down, each DM gets a message, in the fake's history only. (One per
    // conversation: two in one DM would be merged by the busy mode, as live ones are.)
    rig.fake
        .add_history_message(Incoming::new(&ada_dm, &rig.owner, "sent while down"));
    rig.fake
        .add_history_message(Incoming::new(&grace_dm, &grace, "grace while down"));
    rig.launch().await;
    assert_eq!(
        rig.wait_texts(&ada_dm, 2).await,
        ["echo: before the restart", "echo: sent while down"]
    );
    assert_eq!(
        rig.wait_texts(&grace_dm, 2).await,
        ["echo: grace before", "echo: grace while down"]
    );
    // Backfill read both DMs' history, which still holds the messages answered before.
    let fetched = rig.fake.calls_to("GET /channels/{id}/messages");
    for dm in [&ada_dm, &grace_dm] {
        assert!(
            fetched
                .iter()
                .any(|c| c.path.ends_with(&format!("/channels/{dm}/messages"))),
            "{fetched:?}"
        );
    }
    // A live message afterwards: everything before it was handled exactly once.
    rig.say(&ada_dm, &rig.owner, "live again");
    assert_eq!(rig.wait_texts(&ada_dm, 3).await[2], "echo: live again");
    let mut saw = rig.model_saw();
    saw.sort();
    assert_eq!(
        saw,
        [
            "before the restart",
            "grace before",
            "grace while down",
            "live again",
            "sent while down"
        ]
    );
    rig.stop().await;
    assert_eq!(rig.texts_in(&ada_dm).len(), 3, "no reply twice");
    assert_eq!(rig.texts_in(&grace_dm).len(), 2, "no reply twice");
}
