//! Inbound translation against the fake Bot API: DM fields, group gating in the reference's
//! order, forum topics, split-paste and album merging, button clicks.

mod support;

use hermes_adapter::Adapter as _;

use fake_telegram::{Attachment, BOT_ID, BOT_USERNAME, Chat, FakeTelegram, MessageSpec, User};
use hermes_adapter::{ChatType, MessageType};
use serde_json::json;
use support::{TestCore, settings, start, wait_backlog_taken, wait_confirmed};

#[tokio::test]
async fn a_dm_becomes_an_event_with_every_field() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    let running = start(settings(&fake, json!({})), &core);
    let alice = User::new(42, "Alice").with_username("alice");
    let update_id = fake.push_text(Chat::private(42), alice, "hello there");

    let event = core.next_event().await;
    assert_eq!(event.event_id, update_id.to_string());
    assert_eq!(event.text, "hello there");
    assert_eq!(event.message_type, MessageType::Text);
    assert_eq!(event.source.platform, "telegram");
    assert_eq!(event.source.chat_id, "42");
    assert_eq!(event.source.chat_type, ChatType::Dm);
    assert_eq!(event.source.user_id.as_deref(), Some("42"));
    assert_eq!(event.source.user_name.as_deref(), Some("Alice"));
    assert_eq!(event.source.user_id_alt.as_deref(), Some("alice"));
    assert_eq!(event.source.thread_id, None);
    assert!(event.message_id.is_some());
    assert!(event.timestamp > 1_700_000_000.0);
    wait_confirmed(&fake, update_id).await;
    assert!(
        core.ctx.progress.reports() > 0,
        "completed polls report progress"
    );
    running.stop().await.expect("clean stop");
}

#[tokio::test]
async fn commands_are_delivered_as_commands_with_the_bot_suffix_removed_in_groups() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    let running = start(settings(&fake, json!({"require_mention": true})), &core);
    fake.push_text(
        Chat::supergroup(-100),
        User::new(7, "Bob"),
        &format!("/new@{BOT_USERNAME} my title"),
    );
    let event = core.next_event().await;
    assert_eq!(event.message_type, MessageType::Command);
    assert_eq!(event.text, "/new my title");
    assert_eq!(event.command().as_deref(), Some("new"));
    assert_eq!(event.source.chat_type, ChatType::Group);
    running.stop().await.unwrap();
}

/// One case of the gating table: the message, and whether it must reach the core.
struct Case {
    name: &'static str,
    spec: MessageSpec,
    delivered: bool,
}

async fn run_cases(extra: serde_json::Value, cases: Vec<Case>) {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    let running = start(settings(&fake, extra), &core);
    for case in cases {
        let (update_id, _) = fake.push_message(case.spec);
        wait_confirmed(&fake, update_id).await;
        // The offset passes an update only after its event was recorded, so whatever was
        // delivered is already here.
        let delivered: Vec<_> = core
            .drain()
            .into_iter()
            .filter(|e| e.event_id == update_id.to_string())
            .collect();
        assert_eq!(
            !delivered.is_empty(),
            case.delivered,
            "case {:?}",
            case.name
        );
    }
    running.stop().await.unwrap();
}

#[tokio::test]
async fn group_gating_follows_the_reference_order() {
    let group = Chat::supergroup(-100);
    let user = || User::new(7, "Bob");
    let me = User::bot(BOT_ID, BOT_USERNAME);
    let text = |t: &str| MessageSpec::text(group.clone(), user(), t);
    let free_chat = Chat::supergroup(-200);
    let cases = vec![
        Case {
            name: "plain chatter needs a mention",
            spec: text("just chatting"),
            delivered: false,
        },
        Case {
            name: "@mention",
            spec: text(&format!("@{BOT_USERNAME} what time is it")),
            delivered: true,
        },
        Case {
            name: "/cmd@bot",
            spec: text(&format!("/help@{BOT_USERNAME}")),
            delivered: true,
        },
        Case {
            name: "bare /cmd needs a mention",
            spec: text("/help"),
            delivered: false,
        },
        Case {
            name: "reply to the bot",
            spec: text("and then?").replying_to(1, me.clone()),
            delivered: true,
        },
        Case {
            name: "reply to someone else",
            spec: text("and then?").replying_to(1, user()),
            delivered: false,
        },
        Case {
            name: "mention pattern",
            spec: text("Hermes, summarise"),
            delivered: true,
        },
        Case {
            name: "another bot addressed exclusively",
            spec: text("@other_helper_bot Hermes do it"),
            delivered: false,
        },
        Case {
            name: "both bots addressed",
            spec: text(&format!("@other_helper_bot @{BOT_USERNAME} hi")),
            delivered: true,
        },
        Case {
            name: "free-response chat",
            spec: MessageSpec::text(free_chat, user(), "anything"),
            delivered: true,
        },
        Case {
            name: "the bot's own message",
            spec: MessageSpec::text(group.clone(), me.clone(), "echo"),
            delivered: false,
        },
        Case {
            name: "ignored thread",
            spec: text(&format!("@{BOT_USERNAME} hi")).in_topic(13),
            delivered: false,
        },
        Case {
            name: "DMs are never gated",
            spec: MessageSpec::text(Chat::private(7), user(), "hi"),
            delivered: true,
        },
    ];
    let extra = json!({"require_mention": true, "free_response_chats": ["-200"],
        "mention_patterns": ["^hermes\\b"], "ignored_threads": "13"});
    run_cases(extra, cases).await;
}

#[tokio::test]
async fn allowed_chats_are_a_hard_gate_except_guest_mentions() {
    let user = || User::new(7, "Bob");
    let cases = vec![
        Case {
            name: "allowed chat, no mention needed",
            spec: MessageSpec::text(Chat::group(-1), user(), "hi"),
            delivered: true,
        },
        Case {
            name: "other chat",
            spec: MessageSpec::text(Chat::group(-2), user(), "hi"),
            delivered: false,
        },
        Case {
            name: "other chat, guest mention",
            spec: MessageSpec::text(Chat::group(-2), user(), &format!("@{BOT_USERNAME} hi")),
            delivered: true,
        },
        Case {
            name: "other chat, pattern does not bypass",
            spec: MessageSpec::text(Chat::group(-2), user(), "hermes hi"),
            delivered: false,
        },
    ];
    run_cases(
        json!({"allowed_chats": "-1", "guest_mode": true, "mention_patterns": "hermes"}),
        cases,
    )
    .await;
}

#[tokio::test]
async fn allowed_topics_filter_forum_messages() {
    let forum = Chat::forum(-300);
    let user = || User::new(7, "Bob");
    let cases = vec![
        Case {
            name: "allowed topic",
            spec: MessageSpec::text(forum.clone(), user(), "hi").in_topic(5),
            delivered: true,
        },
        Case {
            name: "other topic",
            spec: MessageSpec::text(forum.clone(), user(), "hi").in_topic(6),
            delivered: false,
        },
        Case {
            name: "General topic is 1",
            spec: MessageSpec::text(forum.clone(), user(), "hi"),
            delivered: true,
        },
    ];
    run_cases(json!({"allowed_topics": ["5", "1"]}), cases).await;
}

#[tokio::test]
async fn forum_topics_and_dm_topics_carry_thread_ids() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    let running = start(settings(&fake, json!({})), &core);
    let user = || User::new(7, "Bob");

    fake.push_message(MessageSpec::text(Chat::forum(-300), user(), "/topic_cmd").in_topic(5));
    let event = core.next_event().await;
    assert_eq!(
        (event.source.chat_type, event.source.thread_id.as_deref()),
        (ChatType::Group, Some("5"))
    );

    fake.push_message(MessageSpec::text(Chat::forum(-300), user(), "/general"));
    assert_eq!(
        core.next_event().await.source.thread_id.as_deref(),
        Some("1"),
        "General topic"
    );

    // A reply in an ordinary group carries a reply-UI thread id that is not a topic.
    let mut reply_anchor = MessageSpec::text(Chat::supergroup(-100), user(), "/plain");
    reply_anchor.thread_id = Some(99);
    fake.push_message(reply_anchor);
    assert_eq!(core.next_event().await.source.thread_id, None);

    fake.push_message(MessageSpec::text(Chat::private(7), user(), "/dm_topic").in_topic(8));
    let event = core.next_event().await;
    assert_eq!(
        (event.source.chat_type, event.source.thread_id.as_deref()),
        (ChatType::Dm, Some("8"))
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn split_pastes_are_merged_and_acknowledged_together() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    // A long quiet window, so all parts land in one batch however loaded the machine is.
    let running = start(
        settings(
            &fake,
            json!({"text_batch_delay_seconds": 2.0, "text_batch_split_delay_seconds": 4.0}),
        ),
        &core,
    );
    wait_backlog_taken(&fake).await;
    let part1 = "a".repeat(4096);
    let part2 = "b".repeat(4096);
    let first = fake.push_text(Chat::private(42), User::new(42, "Alice"), &part1);
    let second = fake.push_text(Chat::private(42), User::new(42, "Alice"), &part2);
    let last = fake.push_text(Chat::private(42), User::new(42, "Alice"), "tail");

    let event = core.next_event().await;
    assert_eq!(
        event.event_id,
        first.to_string(),
        "the first part's update id is the event's id"
    );
    assert_eq!(event.text, format!("{part1}\n{part2}\ntail"));
    wait_confirmed(&fake, last).await;
    assert!(second < last);
    assert!(core.drain().is_empty(), "one event for the whole paste");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn albums_are_merged_by_media_group_id() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    let cache = tempfile::tempdir().unwrap();
    let extra = json!({"cache_dir": cache.path(), "media_batch_delay_seconds": 2.0});
    let running = start(settings(&fake, extra), &core);
    wait_backlog_taken(&fake).await;
    let user = || User::new(42, "Alice");
    for (n, caption) in [(1u8, "holiday"), (2, ""), (3, "")] {
        let spec = MessageSpec::text(Chat::private(42), user(), caption)
            .with_attachment(Attachment::Photo {
                bytes: vec![n; 100],
            })
            .in_media_group("album-1");
        fake.push_message(spec);
    }
    let mut event = core.next_event().await;
    assert_eq!(event.message_type, MessageType::Photo);
    assert_eq!(event.text, "holiday");
    assert_eq!(
        event.pending_media.len(),
        3,
        "one event carries the album's files"
    );
    running.adapter.fetch_pending_media(&mut event).await;
    assert_eq!(event.media_paths.len(), 3);
    assert_eq!(event.media_types, vec!["image/jpeg"; 3]);
    for (n, path) in event.media_paths.iter().enumerate() {
        assert_eq!(
            std::fs::read(path).unwrap(),
            vec![n as u8 + 1; 100],
            "largest size downloaded"
        );
    }
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_button_click_becomes_a_command_answered_and_its_buttons_removed() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    let running = start(settings(&fake, json!({})), &core);
    let buttons = [("Allow once", "/approve once"), ("Deny", "/deny")];
    let sent =
        support::send_prompt(&running.adapter, "42", "Allow `rm -rf /tmp/x`?", &buttons).await;
    let update_id = fake.push_callback(
        Chat::private(42),
        User::new(42, "Alice"),
        sent,
        "/approve once",
    );

    let event = core.next_event().await;
    assert!(event.event_id.starts_with("cb:"), "{}", event.event_id);
    assert_eq!(event.message_type, MessageType::Command);
    assert_eq!(event.text, "/approve once");
    assert_eq!(event.source.user_id.as_deref(), Some("42"));
    fake.wait_for_calls("answerCallbackQuery", 1, support::WAIT)
        .await
        .unwrap();
    let removed = fake
        .wait_for_calls("editMessageReplyMarkup", 1, support::WAIT)
        .await
        .unwrap();
    assert_eq!(removed[0].i64("message_id"), Some(sent));
    wait_confirmed(&fake, update_id).await;
    assert_eq!(
        fake.message(42, sent).unwrap().reply_markup,
        Some(json!({"inline_keyboard": []}))
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_click_whose_record_failed_keeps_its_buttons_and_comes_back() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    let running = start(settings(&fake, json!({})), &core);
    let sent = support::send_prompt(&running.adapter, "42", "Allow?", &[("Deny", "/deny")]).await;
    core.answer_next(hermes_adapter::RecordOutcome::Failed, 1);
    let update_id = fake.push_callback(Chat::private(42), User::new(42, "Alice"), sent, "/deny");

    let (first, outcome) = core.next().await;
    assert_eq!(outcome, hermes_adapter::RecordOutcome::Failed);
    let (again, outcome) = core.next().await;
    assert_eq!(
        (again.event_id, outcome),
        (first.event_id, hermes_adapter::RecordOutcome::Recorded)
    );
    wait_confirmed(&fake, update_id).await;
    let removals = fake.calls_of("editMessageReplyMarkup");
    assert_eq!(
        removals.len(),
        1,
        "buttons removed once, after the successful record"
    );
    running.stop().await.unwrap();
}
