//! Inbound: DMs, the guild rules table, mention stripping, auto-threads, attachments.
//! "Not handed over" is proven with a sentinel DM pushed afterwards: gateway order is
//! preserved, so the next event must be the sentinel.

mod support;

use fake_discord::{FakeUser, Incoming};
use hermes_adapter::{Adapter, ChatType, MessageType};
use serde_json::json;
use support::Harness;

async fn expect_dropped(h: &mut Harness, dm: &str, user: &FakeUser, label: &str) {
    let sentinel = format!("sentinel after {label}");
    h.fake.push_message(Incoming::new(dm, user, &sentinel));
    let event = h.next_event().await;
    assert_eq!(
        event.text, sentinel,
        "{label}: expected to be dropped, got {:?}",
        event.text
    );
}

async fn expect_admitted(h: &mut Harness, label: &str, text: &str) -> hermes_adapter::MessageEvent {
    let event = h.next_event().await;
    assert_eq!(event.text, text, "{label}");
    event
}

#[tokio::test]
async fn a_dm_becomes_a_dm_event_keyed_by_the_message_id() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    let user = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&user);
    let id = h
        .fake
        .push_message(Incoming::new(&dm, &user, "hello there"));
    let event = h.next_event().await;
    assert_eq!(event.event_id, id);
    assert_eq!(event.message_id.as_deref(), Some(id.as_str()));
    assert_eq!(event.text, "hello there");
    assert_eq!(event.message_type, MessageType::Text);
    assert_eq!(event.source.chat_type, ChatType::Dm);
    assert_eq!(event.source.chat_id, dm);
    assert_eq!(event.source.user_id.as_deref(), Some(user.id.as_str()));
    assert_eq!(event.source.user_name.as_deref(), Some("alice"));
    assert!(event.timestamp > 1.6e9);
    let command = h
        .fake
        .push_message(Incoming::new(&dm, &user, "/new My title"));
    let event = h.next_event().await;
    assert_eq!(
        (event.event_id, event.message_type),
        (command, MessageType::Command)
    );
    assert!(h.progress.reports() > 0);
    let identify = &h.fake.frames_with_op(2)[0];
    assert_eq!(
        identify.d["intents"], 37_377,
        "GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT"
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn guild_rules_mentions_free_ignored_roles_and_bots() {
    let mut h = Harness::start(
        json!({}),
        &[
            ("DISCORD_AUTO_THREAD", "false"),
            ("DISCORD_FREE_RESPONSE_CHANNELS", "#free"),
            ("DISCORD_IGNORED_CHANNELS", "ignored"),
            ("DISCORD_ALLOWED_ROLES", "777"),
            ("DISCORD_ALLOW_BOTS", "mentions"),
        ],
    )
    .await;
    h.ready(1).await;
    let bot = h.fake.bot_user();
    let general = h.fake.add_text_channel("general");
    let free = h.fake.add_text_channel("free");
    let ignored = h.fake.add_text_channel("ignored");
    let alice = h.fake.new_user("alice", false, &["777"]);
    let bob = h.fake.new_user("bob", false, &["1"]);
    let other_bot = h.fake.new_user("otherbot", true, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    let mention = format!("<@{}>", bot.id);

    h.fake
        .push_message(Incoming::new(&general, &bob, "no mention"));
    expect_dropped(&mut h, &dm, &alice, "no mention in a gated channel").await;

    h.fake.push_message(
        Incoming::new(&general, &bob, &format!("{mention} what is up")).mentioning(&bot),
    );
    let event = expect_admitted(&mut h, "mention", "what is up").await;
    assert_eq!(event.source.chat_type, ChatType::Group);
    assert_eq!(event.source.chat_id, general);
    assert!(!event.source.role_authorized, "bob has no allowed role");
    assert_eq!(event.source.scope_id, Some(h.fake.guild_id()));
    assert_eq!(
        event.source.chat_name.as_deref(),
        Some("Hermes Test Guild / #general")
    );

    h.fake.push_message(Incoming::new(
        &general,
        &alice,
        &format!("hi <@!{}> there", bot.id),
    ));
    let event = expect_admitted(&mut h, "raw nickname mention only", "hi  there").await;
    assert!(event.source.role_authorized, "alice has role 777");

    h.fake
        .push_message(Incoming::new(&general, &bob, "<@123> look").mentioning(&alice));
    expect_dropped(&mut h, &dm, &alice, "addressed to another user").await;

    h.fake.push_message(Incoming::new(&free, &bob, "free talk"));
    expect_admitted(&mut h, "free-response channel by #name", "free talk").await;

    h.fake
        .push_message(Incoming::new(&free, &bob, "hey other").mentioning(&other_bot));
    expect_dropped(
        &mut h,
        &dm,
        &alice,
        "addressed to another bot in a free channel",
    )
    .await;

    h.fake
        .push_message(Incoming::new(&ignored, &bob, &format!("{mention} hi")).mentioning(&bot));
    expect_dropped(&mut h, &dm, &alice, "ignored channel").await;

    h.fake
        .push_message(Incoming::new(&free, &other_bot, "bot without mention"));
    expect_dropped(
        &mut h,
        &dm,
        &alice,
        "bot author without mention (mentions mode)",
    )
    .await;

    h.fake.push_message(
        Incoming::new(&general, &other_bot, &format!("{mention} from a bot")).mentioning(&bot),
    );
    let event = expect_admitted(&mut h, "bot author with mention", "from a bot").await;
    assert!(event.source.is_bot);

    h.fake
        .push_message(Incoming::new(&general, &bob, &mention).mentioning(&bot));
    expect_dropped(&mut h, &dm, &alice, "mention-only message").await;
    h.stop().await.unwrap();
}

#[tokio::test]
async fn allowed_channels_are_a_hard_filter_and_allow_bots_all_admits_bots() {
    let mut h = Harness::start(
        json!({"require_mention": false, "auto_thread": false}),
        &[
            ("DISCORD_ALLOWED_CHANNELS", "allowed"),
            ("DISCORD_ALLOW_BOTS", "all"),
        ],
    )
    .await;
    h.ready(1).await;
    let bot = h.fake.bot_user();
    let allowed = h.fake.add_text_channel("allowed");
    let elsewhere = h.fake.add_text_channel("elsewhere");
    let thread = h.fake.add_thread(&allowed, "side talk");
    let alice = h.fake.new_user("alice", false, &[]);
    let helper_bot = h.fake.new_user("helper", true, &[]);
    let dm = h.fake.add_dm_channel(&alice);

    h.fake.push_message(
        Incoming::new(&elsewhere, &alice, &format!("<@{}> hi", bot.id)).mentioning(&bot),
    );
    expect_dropped(
        &mut h,
        &dm,
        &alice,
        "channel outside DISCORD_ALLOWED_CHANNELS",
    )
    .await;

    h.fake
        .push_message(Incoming::new(&allowed, &alice, "no mention needed"));
    expect_admitted(
        &mut h,
        "allowed channel, require_mention off",
        "no mention needed",
    )
    .await;

    h.fake.push_message(Incoming::new(
        &thread,
        &alice,
        "in a thread of an allowed channel",
    ));
    let event = expect_admitted(
        &mut h,
        "thread under an allowed channel",
        "in a thread of an allowed channel",
    )
    .await;
    assert_eq!(event.source.chat_type, ChatType::Thread);
    assert_eq!(event.source.thread_id.as_deref(), Some(thread.as_str()));

    h.fake
        .push_message(Incoming::new(&allowed, &helper_bot, "bot talk"));
    expect_admitted(&mut h, "bot author with allow_bots=all", "bot talk").await;
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_mention_opens_a_thread_and_the_conversation_lives_there() {
    let mut h = Harness::start(
        json!({"no_thread_channels": ["plain"]}),
        &[("DISCORD_FREE_RESPONSE_CHANNELS", "free")],
    )
    .await;
    h.ready(1).await;
    let bot = h.fake.bot_user();
    let general = h.fake.add_text_channel("general");
    let free = h.fake.add_text_channel("free");
    let plain = h.fake.add_text_channel("plain");
    let alice = h.fake.new_user("alice", false, &[]);
    let mention = format!("<@{}>", bot.id);

    let id = h.fake.push_message(
        Incoming::new(&general, &alice, &format!("{mention} plan the <#1> launch"))
            .mentioning(&bot),
    );
    let event = h.next_event().await;
    assert_eq!(event.event_id, id);
    assert_eq!(event.source.chat_type, ChatType::Thread);
    assert_eq!(
        event.source.chat_id, id,
        "a thread started from a message has its id"
    );
    assert_eq!(event.source.thread_id.as_deref(), Some(id.as_str()));
    // Opened once the core recorded the message (a refused sender opens none).
    let calls = h
        .fake
        .wait_for_calls("POST /channels/{id}/messages/{id}/threads", 1)
        .await;
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].body["name"], "plan the launch");
    assert!(calls[0].path.contains(&general));

    // Follow-ups in the bot's thread need no mention.
    h.fake
        .push_message(Incoming::new(&id, &alice, "and the budget?"));
    let event = h.next_event().await;
    assert_eq!(
        (event.text.as_str(), event.source.chat_id.as_str()),
        ("and the budget?", id.as_str())
    );

    // Not for replies, free-response channels or no-thread channels.
    let reply = h.fake.push_message(
        Incoming::new(&general, &alice, &format!("{mention} a reply"))
            .mentioning(&bot)
            .replying_to(&id),
    );
    let event = h.next_event().await;
    assert_eq!(
        (event.event_id.as_str(), event.source.chat_type),
        (reply.as_str(), ChatType::Group)
    );
    assert_eq!(event.reply_to_message_id.as_deref(), Some(id.as_str()));
    h.fake
        .push_message(Incoming::new(&free, &alice, &format!("{mention} in free")).mentioning(&bot));
    assert_eq!(h.next_event().await.source.chat_type, ChatType::Group);
    h.fake.push_message(
        Incoming::new(&plain, &alice, &format!("{mention} in plain")).mentioning(&bot),
    );
    assert_eq!(h.next_event().await.source.chat_type, ChatType::Group);
    assert_eq!(
        h.fake
            .calls_to("POST /channels/{id}/messages/{id}/threads")
            .len(),
        1
    );

    // The core renames the thread from the session title.
    h.adapter
        .rename_thread(&id, "  Launch   planning  ")
        .await
        .unwrap();
    let name = h.fake.read(|s| s.channels[&id].name.clone());
    assert_eq!(name.as_deref(), Some("Launch planning"));
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_refused_thread_is_announced_and_the_answer_goes_to_the_channel() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    let bot = h.fake.bot_user();
    let general = h.fake.add_text_channel("general");
    let alice = h.fake.new_user("alice", false, &[]);
    h.fake.fail_next(
        "POST /channels/{id}/messages/{id}/threads",
        fake_discord::Fault::Status(403),
        1,
    );
    let id = h.fake.push_message(
        Incoming::new(&general, &alice, &format!("<@{}> hi", bot.id)).mentioning(&bot),
    );
    // The core has the message (addressed to the thread it would open) before Discord
    // refuses the thread.
    let event = h.next_event().await;
    assert_eq!(event.source.chat_id, id);
    let answer = h
        .adapter
        .send(hermes_adapter::Outbound {
            chat_id: id.clone(),
            thread_id: Some(id.clone()),
            kind: hermes_adapter::OutboundKind::Text {
                text: "the answer".into(),
                reply_to: None,
                plain: false,
            },
        })
        .await;
    assert!(answer.is_ok(), "{answer:?}");
    let sent = h.fake.calls_to("POST /channels/{id}/messages");
    let texts: Vec<(&str, &str)> = sent
        .iter()
        .map(|c| {
            (
                c.path.as_str(),
                c.body["content"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let in_general = format!("/api/v10/channels/{general}/messages");
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert_eq!(texts[0].0, in_general);
    assert!(
        texts[0].1.contains("Discord refused the new thread"),
        "{texts:?}"
    );
    assert_eq!(texts[1], (in_general.as_str(), "the answer"));
    h.stop().await.unwrap();
}

#[tokio::test]
async fn attachments_are_cached_under_the_size_cap() {
    let mut h = Harness::start(json!({"max_attachment_bytes": 64}), &[]).await;
    h.ready(1).await;
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    h.fake.push_message(
        Incoming::new(&dm, &alice, "see file")
            .with_attachment("notes.txt", "text/plain", b"small file")
            .with_attachment("big.bin", "application/octet-stream", &[7u8; 65]),
    );
    let mut event = h.next_event().await;
    assert_eq!(event.message_type, MessageType::Document);
    assert!(event.media_paths.is_empty(), "recorded before any download");
    assert_eq!(event.pending_media.len(), 2);
    h.adapter.fetch_pending_media(&mut event).await;
    assert_eq!(
        event.media_paths.len(),
        1,
        "the 65-byte file is over the cap"
    );
    assert_eq!(
        event
            .pending_media
            .iter()
            .map(|p| p.label.as_str())
            .collect::<Vec<_>>(),
        ["big.bin"],
        "what was not fetched stays pending, for the core's note"
    );
    assert_eq!(event.media_types, vec!["text/plain".to_owned()]);
    assert!(event.media_paths[0].starts_with(h.cache.path().to_str().unwrap()));
    assert_eq!(std::fs::read(&event.media_paths[0]).unwrap(), b"small file");

    h.fake
        .push_message(Incoming::new(&dm, &alice, "").with_attachment(
            "cat.png",
            "image/png",
            b"png",
        ));
    let event = h.next_event().await;
    assert_eq!(event.message_type, MessageType::Photo);
    assert_eq!(event.text, "(message without text)");
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_slow_download_has_its_own_deadline_not_the_rest_timeout() {
    // REST calls time out after 1 s here; the attachment takes 2 s to arrive.
    let mut h = Harness::start_with(std::time::Duration::from_secs(30), json!({}), &[], |s| {
        s.http_timeout = std::time::Duration::from_secs(1);
    })
    .await;
    h.ready(1).await;
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    h.fake.delay_attachments(std::time::Duration::from_secs(2));
    h.fake
        .push_message(Incoming::new(&dm, &alice, "slow file").with_attachment(
            "notes.txt",
            "text/plain",
            b"hi",
        ));
    let mut event = h.next_event().await;
    h.adapter.fetch_pending_media(&mut event).await;
    assert_eq!(
        event.media_paths.len(),
        1,
        "downloaded despite the 1 s REST timeout"
    );
    assert_eq!(std::fs::read(&event.media_paths[0]).unwrap(), b"hi");
    h.stop().await.unwrap();
}
