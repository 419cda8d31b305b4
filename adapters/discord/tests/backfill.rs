//! Backfill after a restart: messages addressed to the bot while it was away are handed
//! over once; answered ones, ones not addressed to it and ones older than the window are
//! not.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use fake_discord::Incoming;
use hermes_adapter::{Adapter, ChatType, Outbound, OutboundKind};
use hermes_discord::DiscordAdapter;
use serde_json::json;
use support::Harness;

async fn reply(adapter: &DiscordAdapter, chat_id: &str, reply_to: Option<&str>, text: &str) {
    let result = adapter
        .send(Outbound {
            chat_id: chat_id.into(),
            thread_id: None,
            kind: OutboundKind::Text {
                text: text.into(),
                reply_to: reply_to.map(Into::into),
                plain: false,
            },
        })
        .await;
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test]
async fn a_restart_backfills_only_unanswered_messages_addressed_to_the_bot() {
    let mut h = Harness::start(json!({}), &[("DISCORD_ALLOWED_CHANNELS", "general")]).await;
    h.ready(1).await;
    let bot = h.fake.bot_user();
    let general = h.fake.add_text_channel("general");
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    let mention = format!("<@{}>", bot.id);

    // Before the restart: a DM and an auto-threaded conversation, both answered.
    let first = h.fake.push_message(Incoming::new(&dm, &alice, "first"));
    assert_eq!(h.next_event().await.event_id, first);
    reply(&h.adapter, &dm, Some(&first), "answer to first").await;
    let thread = h.fake.push_message(
        Incoming::new(&general, &alice, &format!("{mention} start")).mentioning(&bot),
    );
    assert_eq!(h.next_event().await.source.chat_id, thread);
    reply(&h.adapter, &thread, None, "answer in the thread").await;
    h.stop().await.unwrap();

    // While the bot is away.
    let unanswered = h.fake.add_history_message(
        Incoming::new(&general, &alice, &format!("{mention} still there?")).mentioning(&bot),
    );
    let answered = h.fake.add_history_message(
        Incoming::new(&general, &alice, &format!("{mention} answered")).mentioning(&bot),
    );
    h.fake
        .add_history_message(Incoming::new(&general, &bot, "here you go").replying_to(&answered));
    h.fake.add_history_message(Incoming::new(
        &general,
        &alice,
        "chit chat, not for the bot",
    ));
    h.fake.add_history_message(
        Incoming::new(&general, &alice, &format!("{mention} too old"))
            .mentioning(&bot)
            .aged(Duration::from_secs(7 * 3600)),
    );
    let in_dm = h
        .fake
        .add_history_message(Incoming::new(&dm, &alice, "dm while down"));
    let in_thread =
        h.fake
            .add_history_message(Incoming::new(&thread, &alice, "follow-up in the thread"));

    // A new process: a fresh adapter, told by the core which conversations exist.
    h.adapter = DiscordAdapter::new(h.settings.clone());
    h.adapter.remember_conversations([dm.clone()]);
    h.run();
    h.ready(2).await;
    let mut handed_over = BTreeSet::new();
    for _ in 0..3 {
        let event = h.next_event().await;
        if event.event_id == unanswered {
            assert_eq!(
                event.source.chat_type,
                ChatType::Thread,
                "auto-thread applies to backfilled mentions"
            );
        }
        handed_over.insert(event.event_id);
    }
    assert_eq!(handed_over, BTreeSet::from([unanswered, in_dm, in_thread]));

    let sentinel = h
        .fake
        .push_message(Incoming::new(&dm, &alice, "live again"));
    assert_eq!(
        h.next_event().await.event_id,
        sentinel,
        "nothing else was backfilled"
    );
    assert_eq!(h.deliveries_of(&answered), 0);
    assert_eq!(
        h.deliveries_of(&first),
        1,
        "answered before the restart: not handed over again"
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn backfill_can_be_switched_off() {
    let mut h = Harness::start(json!({"missed_message_backfill": {"enabled": false}}), &[]).await;
    h.ready(1).await;
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    h.stop().await.unwrap();
    h.fake
        .add_history_message(Incoming::new(&dm, &alice, "while down"));
    h.adapter = DiscordAdapter::new(h.settings.clone());
    h.adapter.remember_conversations([dm.clone()]);
    h.run();
    h.ready(2).await;
    let live = h.fake.push_message(Incoming::new(&dm, &alice, "live"));
    assert_eq!(h.next_event().await.event_id, live);
    assert!(h.fake.calls_to("GET /channels/{id}/messages").is_empty());
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_message_the_core_could_not_record_is_offered_again_until_it_is() {
    let mut h = Harness::start(json!({"auto_thread": false}), &[]).await;
    h.ready(1).await;
    let bot = h.fake.bot_user();
    let general = h.fake.add_text_channel("general");
    let alice = h.fake.new_user("alice", false, &[]);
    // A plain guild-channel message, which no DM/thread backfill would ever find again.
    h.core.answer_next(hermes_adapter::RecordOutcome::Failed, 2);
    let lost = h.fake.push_message(
        Incoming::new(&general, &alice, &format!("<@{}> storage was down", bot.id))
            .mentioning(&bot),
    );
    let next = h.fake.push_message(
        Incoming::new(&general, &alice, &format!("<@{}> next", bot.id)).mentioning(&bot),
    );
    assert_eq!(h.next_event().await.event_id, lost, "re-offered in order");
    assert_eq!(h.next_event().await.event_id, next);
    assert_eq!(h.deliveries_of(&lost), 3, "refused twice, then recorded");
    assert_eq!(h.deliveries_of(&next), 1);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn history_is_read_page_by_page_in_every_channel_the_bot_answers_in() {
    // Pages of 5 messages; 12 DMs from one user and a mention in a channel no setting
    // names: all 13 are handed over (the scan used to stop after 10, in DMs and threads).
    let mut h = Harness::start(
        json!({"auto_thread": false, "missed_message_backfill": {"limit": 5}}),
        &[],
    )
    .await;
    h.ready(1).await;
    let bot = h.fake.bot_user();
    let general = h.fake.add_text_channel("general");
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    h.stop().await.unwrap();
    let mut missed = BTreeSet::new();
    for i in 0..12 {
        missed.insert(h.fake.add_history_message(Incoming::new(
            &dm,
            &alice,
            &format!("while down {i}"),
        )));
    }
    missed.insert(h.fake.add_history_message(
        Incoming::new(&general, &alice, &format!("<@{}> in the channel", bot.id)).mentioning(&bot),
    ));
    h.fake
        .add_history_message(Incoming::new(&general, &alice, "not for the bot"));

    h.adapter = DiscordAdapter::new(h.settings.clone());
    h.adapter.remember_conversations([dm.clone()]);
    h.run();
    h.ready(2).await;
    let mut handed_over = BTreeSet::new();
    for _ in 0..13 {
        handed_over.insert(h.next_event().await.event_id);
    }
    assert_eq!(handed_over, missed);
    let pages = h
        .fake
        .calls_to("GET /channels/{id}/messages")
        .iter()
        .filter(|c| c.path.ends_with(&format!("/{dm}/messages")))
        .count();
    assert!(pages >= 3, "12 messages in pages of 5: {pages} requests");
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_guild_message_read_back_from_history_keeps_the_guild_rules() {
    // REST history has no guild_id and no member: the channel's type says "guild", the
    // member lookup gives the roles, the mention rule applies.
    let mut h = Harness::start(
        json!({"auto_thread": false}),
        &[("DISCORD_ALLOWED_ROLES", "crew")],
    )
    .await;
    h.ready(1).await;
    let bot = h.fake.bot_user();
    let general = h.fake.add_text_channel("general");
    let alice = h.fake.new_user("alice", false, &["crew"]);
    h.stop().await.unwrap();
    h.fake.add_history_message(Incoming::new(
        &general,
        &alice,
        "no mention, not for the bot",
    ));
    let mention = h.fake.add_history_message(
        Incoming::new(&general, &alice, &format!("<@{}> hello", bot.id)).mentioning(&bot),
    );
    h.adapter = DiscordAdapter::new(h.settings.clone());
    h.run();
    h.ready(2).await;
    let event = h.next_event().await;
    assert_eq!(event.event_id, mention);
    assert_eq!(event.source.chat_type, ChatType::Group);
    assert_eq!(event.source.chat_id, general);
    assert_eq!(
        event.source.scope_id.as_deref(),
        Some(h.fake.guild_id().as_str())
    );
    assert!(event.source.role_authorized, "roles from the member lookup");
    assert_eq!(h.fake.calls_to("GET /guilds/{id}/members/{id}").len(), 1);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_history_read_answered_429_is_waited_out_not_skipped() {
    // Seen in the repeated-outage end-to-end test: the scan's burst of history reads met
    // Discord's limit, and every channel whose read got a 429 was skipped, its missed
    // messages never answered. A 429 means "later": the read waits and goes again.
    let mut h = Harness::start(json!({"auto_thread": false}), &[]).await;
    h.ready(1).await;
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    h.stop().await.unwrap();
    let missed = h
        .fake
        .add_history_message(Incoming::new(&dm, &alice, "while down"));
    h.fake.fail_next(
        "GET /channels/{id}/messages",
        fake_discord::Fault::RateLimited { retry_after: 0.2 },
        2,
    );
    h.adapter = DiscordAdapter::new(h.settings.clone());
    h.adapter.remember_conversations([dm.clone()]);
    h.run();
    h.ready(2).await;
    assert_eq!(h.next_event().await.event_id, missed);
    let reads: Vec<u16> = h
        .fake
        .calls_to("GET /channels/{id}/messages")
        .iter()
        .map(|c| c.status)
        .collect();
    assert_eq!(reads, [429, 429, 200], "waited out, then read");
    h.stop().await.unwrap();
}
