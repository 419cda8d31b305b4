//! Inbound translation against the fake: DMs, the channel gates, mention/app_mention
//! dedupe, thread session ids, `!cmd`, attachments, native slash commands.

mod support;

use fake_slack::{BOT_USER_ID, events};
use hermes_adapter::{Adapter, ChatType, MessageType};
use serde_json::json;
use support::{CHANNEL, DM, Harness, USER};

#[tokio::test]
async fn a_dm_becomes_an_event_with_its_own_thread_session() {
    let mut h = Harness::start(json!({})).await;
    let (pushed, ts) = h.push_dm("hello there");
    let event = h.record().await;
    assert_eq!(event.text, "hello there");
    assert_eq!(
        event.event_id, pushed.event_id,
        "Slack's event_id is the event id"
    );
    assert_eq!(event.message_type, MessageType::Text);
    assert_eq!(event.message_id.as_deref(), Some(ts.as_str()));
    assert_eq!(event.source.platform, "slack");
    assert_eq!(event.source.chat_id, DM);
    assert_eq!(event.source.chat_type, ChatType::Dm);
    assert_eq!(event.source.user_id.as_deref(), Some(USER));
    assert_eq!(event.source.scope_id.as_deref(), Some(fake_slack::TEAM_ID));
    assert_eq!(event.source.user_name.as_deref(), Some("User U100"));
    // dm_top_level_threads_as_sessions (default): the message's ts keys its session.
    assert_eq!(event.source.thread_id.as_deref(), Some(ts.as_str()));
    assert_eq!(event.reply_to_message_id, None);
    assert!(event.timestamp > 1.7e9);
    h.fake.wait_for_ack(&pushed.envelope_id).await;
    assert!(h.fake.records().unexpected.is_empty());
    h.stop().await.unwrap();
}

/// One row of the gating table: settings, the message, whether it starts a turn.
struct Case {
    name: &'static str,
    extra: serde_json::Value,
    env: &'static [(&'static str, &'static str)],
    event: fn(&str) -> serde_json::Value,
    accepted: bool,
}

fn mention(ts: &str) -> serde_json::Value {
    events::channel_message(CHANNEL, USER, &format!("<@{BOT_USER_ID}> hi"), ts)
}
fn plain(ts: &str) -> serde_json::Value {
    events::channel_message(CHANNEL, USER, "hi all", ts)
}
fn wake_word(ts: &str) -> serde_json::Value {
    events::channel_message(CHANNEL, USER, "Hermes, status?", ts)
}
fn other_bot(ts: &str) -> serde_json::Value {
    events::bot_message(CHANNEL, "BOTHER", "beep", ts)
}
fn other_bot_mentioning(ts: &str) -> serde_json::Value {
    events::bot_message(CHANNEL, "BOTHER", &format!("<@{BOT_USER_ID}> beep"), ts)
}
fn own(ts: &str) -> serde_json::Value {
    events::own_message(CHANNEL, &format!("<@{BOT_USER_ID}> echo"), ts)
}
fn group_dm_plain(ts: &str) -> serde_json::Value {
    let mut event = events::channel_message("G100", USER, "hi group", ts);
    event["channel_type"] = json!("mpim");
    event
}
fn edit(ts: &str) -> serde_json::Value {
    events::edit(
        CHANNEL,
        USER,
        "1.0",
        &format!("<@{BOT_USER_ID}> edited"),
        ts,
    )
}
fn delete(ts: &str) -> serde_json::Value {
    events::delete(CHANNEL, "1.0", ts)
}

#[tokio::test]
async fn channel_gating_table() {
    let cases = [
        Case {
            name: "mention required, mentioned",
            extra: json!({}),
            env: &[],
            event: mention,
            accepted: true,
        },
        Case {
            name: "mention required, not mentioned",
            extra: json!({}),
            env: &[],
            event: plain,
            accepted: false,
        },
        Case {
            name: "require_mention false",
            extra: json!({"require_mention": false}),
            env: &[],
            event: plain,
            accepted: true,
        },
        Case {
            name: "env SLACK_REQUIRE_MENTION=false wins",
            extra: json!({"require_mention": true}),
            env: &[("SLACK_REQUIRE_MENTION", "false")],
            event: plain,
            accepted: true,
        },
        Case {
            name: "free-response channel",
            extra: json!({"free_response_channels": [CHANNEL]}),
            env: &[],
            event: plain,
            accepted: true,
        },
        Case {
            name: "allowed channels exclude this one, even mentioned",
            extra: json!({"allowed_channels": "C999"}),
            env: &[],
            event: mention,
            accepted: false,
        },
        Case {
            name: "allowed channels include this one",
            extra: json!({"allowed_channels": [CHANNEL]}),
            env: &[],
            event: mention,
            accepted: true,
        },
        Case {
            name: "mention pattern counts as a mention",
            extra: json!({"mention_patterns": ["^hermes\\b"]}),
            env: &[],
            event: wake_word,
            accepted: true,
        },
        Case {
            name: "bots ignored by default",
            extra: json!({"require_mention": false}),
            env: &[],
            event: other_bot,
            accepted: false,
        },
        Case {
            name: "bots: mentions, not mentioned",
            extra: json!({"allow_bots": "mentions"}),
            env: &[],
            event: other_bot,
            accepted: false,
        },
        Case {
            name: "bots: mentions, mentioned",
            extra: json!({"allow_bots": "mentions"}),
            env: &[],
            event: other_bot_mentioning,
            accepted: true,
        },
        Case {
            name: "bots: all",
            extra: json!({"require_mention": false}),
            env: &[("SLACK_ALLOW_BOTS", "all")],
            event: other_bot,
            accepted: true,
        },
        Case {
            name: "own messages always ignored",
            extra: json!({"allow_bots": "all", "require_mention": false}),
            env: &[],
            event: own,
            accepted: false,
        },
        Case {
            name: "group DM obeys channel gates",
            extra: json!({}),
            env: &[],
            event: group_dm_plain,
            accepted: false,
        },
        Case {
            name: "edits never start turns",
            extra: json!({"require_mention": false}),
            env: &[],
            event: edit,
            accepted: false,
        },
        Case {
            name: "deletions never start turns",
            extra: json!({"require_mention": false}),
            env: &[],
            event: delete,
            accepted: false,
        },
    ];
    for case in cases {
        let mut h = Harness::start_with(case.extra.clone(), case.env, Default::default()).await;
        let ts = h.fake.next_ts();
        let pushed = h.fake.push_event((case.event)(&ts));
        if case.accepted {
            let event = h.record().await;
            assert_eq!(event.event_id, pushed.event_id, "{}", case.name);
            assert!(
                !event.text.contains(BOT_USER_ID),
                "{}: mention not stripped",
                case.name
            );
        } else {
            h.expect_only_marker(&format!("after {}", case.name)).await;
        }
        h.fake.wait_for_ack(&pushed.envelope_id).await;
        h.stop().await.unwrap();
    }
}

#[tokio::test]
async fn user_names_are_looked_up_once_and_prefer_the_display_name() {
    let mut h = Harness::start(json!({})).await;
    h.fake.set_display_name(USER, "ada");
    h.push_dm("one");
    assert_eq!(h.record().await.source.user_name.as_deref(), Some("ada"));
    h.push_dm("two");
    assert_eq!(h.record().await.source.user_name.as_deref(), Some("ada"));
    assert_eq!(h.fake.calls("users.info").len(), 1, "the name is cached");
    h.stop().await.unwrap();
}

#[tokio::test]
async fn message_and_app_mention_for_one_message_yield_one_event() {
    let mut h = Harness::start(json!({})).await;
    let ts = h.fake.next_ts();
    let text = format!("<@{BOT_USER_ID}> summarize this");
    let first = h
        .fake
        .push_event(events::channel_message(CHANNEL, USER, &text, &ts));
    let second = h
        .fake
        .push_event(events::app_mention(CHANNEL, USER, &text, &ts));
    let event = h.record().await;
    assert_eq!(event.text, "summarize this");
    assert_eq!(event.event_id, first.event_id);
    assert_eq!(event.source.chat_type, ChatType::Group);
    h.fake.wait_for_ack(&second.envelope_id).await;
    h.expect_only_marker("after the app_mention").await;
    h.stop().await.unwrap();
}

#[tokio::test]
async fn thread_ids_follow_the_reference() {
    let mut h = Harness::start(json!({})).await;
    // A top-level mention starts a thread keyed by its own ts.
    let root = h.fake.next_ts();
    h.fake.push_event(events::channel_message(
        CHANNEL,
        USER,
        &format!("<@{BOT_USER_ID}> start"),
        &root,
    ));
    let event = h.record().await;
    assert_eq!(event.source.thread_id.as_deref(), Some(root.as_str()));
    assert_eq!(event.reply_to_message_id, None);
    // Once mentioned in a thread, the bot follows later replies there without a mention.
    let thread = h.fake.next_ts();
    h.fake.push_event(events::thread_reply(
        CHANNEL,
        USER,
        &format!("<@{BOT_USER_ID}> in thread"),
        &h.fake.next_ts(),
        &thread,
    ));
    let mentioned = h.record().await;
    assert_eq!(mentioned.source.thread_id.as_deref(), Some(thread.as_str()));
    assert_eq!(
        mentioned.reply_to_message_id.as_deref(),
        Some(thread.as_str())
    );
    h.fake.push_event(events::thread_reply(
        CHANNEL,
        USER,
        "follow-up",
        &h.fake.next_ts(),
        &thread,
    ));
    let follow_up = h.record().await;
    assert_eq!(follow_up.text, "follow-up");
    assert_eq!(follow_up.source.thread_id.as_deref(), Some(thread.as_str()));
    // A reply in an unrelated thread is gated.
    h.fake.push_event(events::thread_reply(
        CHANNEL,
        USER,
        "elsewhere",
        &h.fake.next_ts(),
        "1.5",
    ));
    h.expect_only_marker("after the unrelated thread").await;
    h.stop().await.unwrap();
}

#[tokio::test]
async fn replies_in_threads_the_bot_posted_in_continue_without_mention() {
    let mut h = Harness::start(json!({})).await;
    let root = h.fake.next_ts();
    h.fake.push_event(events::channel_message(
        CHANNEL,
        USER,
        &format!("<@{BOT_USER_ID}> q"),
        &root,
    ));
    let event = h.record().await;
    let sent = hermes_adapter::Adapter::send(
        &h.adapter,
        hermes_adapter::Outbound {
            chat_id: CHANNEL.into(),
            thread_id: event.source.thread_id.clone(),
            kind: hermes_adapter::OutboundKind::Text {
                text: "answer".into(),
                reply_to: None,
                plain: false,
            },
        },
    )
    .await;
    assert!(sent.is_ok(), "{sent:?}");
    h.fake.push_event(events::thread_reply(
        CHANNEL,
        USER,
        "thanks, and?",
        &h.fake.next_ts(),
        &root,
    ));
    let follow_up = h.record().await;
    assert_eq!(follow_up.text, "thanks, and?");
    // The reply carries the thread parent (the user's question) for context.
    assert_eq!(follow_up.reply_to_text.as_deref(), Some("q"));
    assert!(!follow_up.reply_to_is_own_message);
    assert_eq!(
        follow_up.reply_to_message_id.as_deref(),
        Some(root.as_str())
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn after_a_restart_threads_the_bot_was_in_continue_without_mention() {
    let mut h = Harness::start(json!({})).await;
    // Before the restart a user mentioned the bot at top level; the bot answered in the
    // thread. This process has no memory of it.
    let root = h.fake.next_ts();
    let question = format!("<@{BOT_USER_ID}> question");
    h.fake
        .store_message(events::channel_message(CHANNEL, USER, &question, &root));
    h.fake.push_event(events::thread_reply(
        CHANNEL,
        USER,
        "and also",
        &h.fake.next_ts(),
        &root,
    ));
    let event = h.record().await;
    assert_eq!(event.text, "and also");
    assert_eq!(event.reply_to_text.as_deref(), Some("question"));
    // A thread the bot was never part of stays gated.
    let other = h.fake.next_ts();
    h.fake.store_message(events::channel_message(
        CHANNEL,
        USER,
        "team chatter",
        &other,
    ));
    h.fake.push_event(events::thread_reply(
        CHANNEL,
        USER,
        "reply",
        &h.fake.next_ts(),
        &other,
    ));
    h.expect_only_marker("after the unrelated thread").await;
    assert_eq!(
        h.fake.calls("conversations.replies").len(),
        2,
        "one lookup per thread, cached"
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn reply_in_thread_false_keys_one_session_per_channel() {
    let mut h = Harness::start(json!({"reply_in_thread": false, "require_mention": false})).await;
    h.fake.push_event(events::channel_message(
        CHANNEL,
        USER,
        "top level",
        &h.fake.next_ts(),
    ));
    let event = h.record().await;
    assert_eq!(event.source.thread_id, None);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn bang_commands_become_slash_commands() {
    let mut h = Harness::start(json!({})).await;
    h.push_dm("!new my title");
    let event = h.record().await;
    assert_eq!(event.text, "/new my title");
    assert_eq!(event.message_type, MessageType::Command);
    assert_eq!(event.command().as_deref(), Some("new"));
    h.push_dm("!nice work");
    assert_eq!(h.record().await.text, "!nice work");
    // After the mention is stripped, too.
    h.fake.push_event(events::channel_message(
        CHANNEL,
        USER,
        &format!("<@{BOT_USER_ID}> !status"),
        &h.fake.next_ts(),
    ));
    let event = h.record().await;
    assert_eq!(event.text, "/status");
    assert_eq!(event.message_type, MessageType::Command);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn shared_files_are_downloaded_with_the_bot_token_and_capped() {
    let mut h = Harness::start(json!({"max_attachment_bytes": 1024})).await;
    let small = h
        .fake
        .add_file("notes.txt", "text/plain", b"remember the milk".to_vec());
    let big = h
        .fake
        .add_file("big.bin", "application/octet-stream", vec![7u8; 4096]);
    let mut event = events::dm(DM, USER, "see attached", &h.fake.next_ts());
    // The small file arrives as a Slack Connect stub: files.info supplies the object.
    event["files"] = json!([fake_slack::FakeSlack::connect_stub(&small), big]);
    h.fake.push_event(event);
    // Recorded first, with nothing downloaded: the files come when the core asks.
    let mut event = h.record().await;
    assert!(h.fake.calls("file.download").is_empty());
    assert_eq!(event.pending_media.len(), 2, "{event:?}");
    h.adapter.fetch_pending_media(&mut event).await;
    assert!(event.pending_media.is_empty());
    assert_eq!(event.media_paths.len(), 1, "{event:?}");
    assert_eq!(event.media_types, ["text/plain"]);
    assert!(event.media_paths[0].starts_with(&*h.cache.path().to_string_lossy()));
    let saved = std::fs::read(&event.media_paths[0]).unwrap();
    assert_eq!(saved, b"remember the milk");
    assert_eq!(event.message_type, MessageType::Document);
    assert!(
        event.text.contains("over the 1024-byte limit"),
        "{}",
        event.text
    );
    assert!(
        event
            .text
            .contains("[Content of notes.txt]:\nremember the milk\n\nsee attached"),
        "small text files are inlined: {}",
        event.text
    );
    assert_eq!(h.fake.calls("files.info").len(), 1);
    let download = &h.fake.calls("file.download")[0];
    assert_eq!(
        download.token.as_deref(),
        Some(h.fake.tokens().bot.as_str())
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn native_slash_commands_become_command_events() {
    let mut h = Harness::start(json!({})).await;
    let pushed = h.fake.push_slash_command(CHANNEL, USER, "/status", "");
    let event = h.record().await;
    assert_eq!(event.text, "/status");
    assert_eq!(event.message_type, MessageType::Command);
    assert_eq!(event.event_id, format!("slash:{}", pushed.event_id));
    assert_eq!(event.source.chat_type, ChatType::Group);
    let ack = h.fake.wait_for_ack(&pushed.envelope_id).await;
    assert_eq!(
        ack.frame["payload"],
        json!({"response_type": "ephemeral", "text": "Running `/status`…"})
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn only_what_a_person_wrote_starts_a_turn_in_a_free_response_channel() {
    let mut h = Harness::start(json!({"free_response_channels": [CHANNEL]})).await;
    // Notices Slack posts into the channel itself: none of them is a question.
    let notices = [
        ("channel_topic", "set the channel topic: deploys"),
        ("channel_purpose", "set the channel purpose: ops"),
        (
            "channel_name",
            "renamed the channel from \"old\" to \"new\"",
        ),
        ("pinned_item", "pinned a message to this channel."),
        ("bot_add", "added an integration to this channel: bot"),
        ("channel_archive", "archived the channel"),
        ("some_future_subtype", "anything"),
    ];
    for (subtype, text) in notices {
        let ts = h.fake.next_ts();
        let pushed = h
            .fake
            .push_event(events::with_subtype(CHANNEL, subtype, USER, text, &ts));
        h.expect_only_marker(&format!("after {subtype}")).await;
        h.fake.wait_for_ack(&pushed.envelope_id).await;
    }
    // What a person wrote: a plain message, a `/me` message, a reply also sent to the
    // channel, a file share.
    let file = h.fake.add_file("n.txt", "text/plain", b"note".to_vec());
    for subtype in ["me_message", "thread_broadcast", "file_share"] {
        let ts = h.fake.next_ts();
        let mut event = events::with_subtype(CHANNEL, subtype, USER, "look at this", &ts);
        if subtype == "file_share" {
            event["files"] = json!([file.clone()]);
        }
        let pushed = h.fake.push_event(event);
        let event = h.record().await;
        assert_eq!(event.event_id, pushed.event_id, "{subtype}");
        assert!(event.text.contains("look at this"), "{subtype}: {event:?}");
    }
    h.stop().await.unwrap();
}

#[tokio::test]
async fn the_assistant_split_view_gets_prompts_context_and_a_title() {
    let mut h = Harness::start(json!({})).await;
    let thread = h.fake.next_ts();
    let started = h.fake.push_event(events::assistant_thread(
        "assistant_thread_started",
        USER,
        DM,
        &thread,
        Some("C0VIEWED"),
        &h.fake.next_ts(),
    ));
    let prompts = h
        .fake
        .wait_for_calls("assistant.threads.setSuggestedPrompts", 1)
        .await;
    assert_eq!(prompts[0].str("channel_id"), Some(DM));
    assert_eq!(prompts[0].str("thread_ts"), Some(thread.as_str()));
    let offered = prompts[0].body["prompts"].as_array().unwrap();
    assert!((1..=4).contains(&offered.len()), "{offered:?}");
    assert!(
        h.fake.records().faulted.is_empty(),
        "the fake accepted the prompts"
    );
    h.fake.wait_for_ack(&started.envelope_id).await;

    // The user switches to another channel beside the thread, then asks.
    h.fake.push_event(events::assistant_thread(
        "assistant_thread_context_changed",
        USER,
        DM,
        &thread,
        Some("C0OTHER"),
        &h.fake.next_ts(),
    ));
    let ts = h.fake.next_ts();
    let mut question = events::dm(DM, USER, "what is going on there?", &ts);
    question["thread_ts"] = json!(thread);
    h.fake.push_event(question);
    let event = h.record().await;
    assert_eq!(
        event.text,
        "[Slack assistant: the user is viewing channel <#C0OTHER>]\n\nwhat is going on there?"
    );
    assert_eq!(event.source.thread_id.as_deref(), Some(thread.as_str()));

    // The session's title names the thread; threads that are not assistant threads are
    // left alone.
    let renamed = h.adapter.rename_thread(&thread, "Incident review").await;
    assert!(renamed.is_ok(), "{renamed:?}");
    let titles = h.fake.calls("assistant.threads.setTitle");
    assert_eq!(titles.len(), 1);
    assert_eq!(titles[0].str("channel_id"), Some(DM));
    assert_eq!(titles[0].str("thread_ts"), Some(thread.as_str()));
    assert_eq!(titles[0].str("title"), Some("Incident review"));
    let other = h.adapter.rename_thread("1.0", "Nothing").await;
    assert!(other.is_ok(), "{other:?}");
    assert_eq!(h.fake.calls("assistant.threads.setTitle").len(), 1);
    h.expect_only_marker("after the assistant events").await;
    h.stop().await.unwrap();
}
