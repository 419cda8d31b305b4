//! Discord end to end when the connection or the daemon goes away: a socket dropped in the
//! middle of a turn is resumed and the reply delivered exactly once; a zombie connection
//! (heartbeats unanswered) is replaced and later messages answered; messages sent while
//! the daemon was down are backfilled from channel history after a restart and answered
//! once, and what was answered before the restart is not answered again — in every channel
//! the bot answers in, however many there are; guild messages read back from history keep
//! the guild rules (REST history has no `guild_id`), so a stranger there gets no pairing
//! reply and no thread.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfilled_guild_messages_keep_the_guild_rules() {
    let mut rig = Rig::new(Duration::from_secs(30)).await;
    // Pairing for DMs: a guild message taken for a DM would earn a pairing code in public.
    rig.add_extra("dm_policy", "pairing");
    let general = rig.fake.add_text_channel("general");
    rig.set_env("DISCORD_ALLOWED_CHANNELS", &general);
    let stranger = rig.fake.new_user("mallory", false, &[]);
    let bot = rig.bot.clone();
    let mention = |text: &str| format!("<@{}> {text}", bot.id);
    // Sent while the daemon was down: only in the channel's history.
    rig.fake
        .add_history_message(Incoming::new(&general, &stranger, "hello everyone"));
    rig.fake.add_history_message(
        Incoming::new(&general, &stranger, &mention("let me in")).mentioning(&bot),
    );
    let asked = rig.fake.add_history_message(
        Incoming::new(&general, &rig.owner, &mention("what did I miss?")).mentioning(&bot),
    );
    rig.launch().await;

    // The owner's mention opens its auto-thread, where the answer goes.
    assert_eq!(rig.wait_texts(&asked, 1).await, ["echo: what did I miss?"]);
    let threads = rig.fake.calls_to(rig::START_THREAD);
    assert_eq!(threads.len(), 1, "only the owner's mention opens a thread");
    assert!(
        threads[0]
            .path
            .ends_with(&format!("/{general}/messages/{asked}/threads"))
    );
    // A live DM afterwards: the backfill is done by the time it is answered.
    let dm = rig.dm(&rig.owner);
    rig.say(&dm, &rig.owner, "live");
    rig.wait_texts(&dm, 1).await;
    assert!(
        rig.texts_in(&general).is_empty(),
        "nothing in the public channel: {:?}",
        rig.texts_in(&general)
    );
    assert_eq!(rig.model_saw(), ["what did I miss?", "live"]);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_sent_during_repeated_outages_is_answered_once() {
    let mut rig = Rig::new(Duration::from_secs(30)).await;
    rig.set_env("DISCORD_AUTO_THREAD", "false");
    rig.set_env("HERMES__AUXILIARY__TITLE_GENERATION__ENABLED", "false");
    let general = rig.fake.add_text_channel("general");
    let mut users = vec![rig.owner.clone()];
    for i in 0..7 {
        users.push(rig.fake.new_user(&format!("user{i}"), false, &[]));
    }
    let ids: Vec<String> = users.iter().map(|u| u.id.clone()).collect();
    rig.set_env("DISCORD_ALLOWED_USERS", &ids.join(","));
    let dms: Vec<String> = users.iter().map(|u| rig.dm(u)).collect();
    let bot = rig.bot.clone();
    let mut expected = Vec::new();
    // Each user talks to the bot once first (Discord lists no DM channels; the core tells
    // the adapter which ones it knows).
    rig.launch().await;
    for (user, dm) in users.iter().zip(&dms) {
        rig.say(dm, user, "hello");
        expected.push("hello".to_owned());
    }
    for dm in &dms {
        rig.wait_texts(dm, 1).await;
    }
    rig.stop().await;
    // Three outages; in each, every user writes one DM (the busy mode would merge two in
    // one DM) and one mention lands in a guild channel no setting names.
    for outage in 0..3 {
        for (user, dm) in users.iter().zip(&dms) {
            let text = format!("{} while down {outage}", user.name);
            rig.fake.add_history_message(Incoming::new(dm, user, &text));
            expected.push(text);
        }
        let text = format!("channel while down {outage}");
        rig.fake.add_history_message(
            Incoming::new(&general, &rig.owner, &format!("<@{}> {text}", bot.id)).mentioning(&bot),
        );
        expected.push(text);
        rig.launch().await;
        for dm in &dms {
            rig.wait_texts(dm, outage + 2).await;
        }
        rig.wait_texts(&general, outage + 1).await;
        rig.stop().await;
    }
    let mut saw = rig.model_saw();
    saw.sort();
    expected.sort();
    assert_eq!(saw, expected, "each missed message reached the model once");
    for dm in &dms {
        assert_eq!(rig.texts_in(dm).len(), 4, "one answer per message");
    }
    assert_eq!(rig.texts_in(&general).len(), 3);
}
