//! Outbound operations against the fake, which enforces Telegram's rules (MarkdownV2
//! well-formedness, 4096 UTF-16 units, reply and topic targets): formatting, error mapping,
//! the protocol-level resends, edits, deletes, typing, prompts and native media.

mod support;

use std::time::Duration;

use fake_telegram::{Chat, FakeTelegram, Fault, MessageSpec, User};
use hermes_adapter::{Adapter, Outbound, OutboundKind, SendErrorKind, SendResult};
use hermes_telegram::{TelegramAdapter, to_markdown_v2};
use serde_json::json;
use support::settings;

async fn adapter(fake: &FakeTelegram) -> TelegramAdapter {
    TelegramAdapter::new(settings(fake, json!({})))
}

fn text(chat: &str, text: &str) -> Outbound {
    Outbound {
        chat_id: chat.into(),
        thread_id: None,
        kind: OutboundKind::Text {
            text: text.into(),
            reply_to: None,
            plain: false,
        },
    }
}

async fn send(adapter: &TelegramAdapter, outbound: Outbound) -> SendResult {
    tokio::time::timeout(support::WAIT, adapter.send(outbound))
        .await
        .expect("send finishes")
}

#[tokio::test]
async fn tricky_markdown_is_escaped_so_telegram_accepts_it() {
    let fake = FakeTelegram::start().await;
    let adapter = adapter(&fake).await;
    let inputs = [
        r"_*[]()~`>#+-=|{}.!\",
        "Version 1.2.3 (beta) costs $5 - really!",
        "**Bold** and *italic* and ~~strike~~ and ||spoiler||",
        "# Heading with (parens) and dots...",
        "Use `let x = a_b * (c + d);` here.",
        "```python\ndef f(x):\n    return x * 2  # `tick` and \\ backslash\n```\nafter.",
        "[the docs](https://example.com/path_(1)?q=a.b) and [x](http://y.z/)",
        "> a quote. with stuff!\nnormal line",
        "snake_case_name and 2*3=6 and {braces} and a|b",
        "😀 emoji, 中文。and Ωmega.",
        "unclosed `backtick and **half bold",
    ];
    assert!(
        fake_telegram::visible_utf16_len(inputs[0]).is_err(),
        "the fake rejects unescaped text"
    );
    for input in inputs {
        let result = send(&adapter, text("42", input)).await;
        assert!(result.is_ok(), "{input:?} rejected: {result:?}");
        let sent = fake.sent_messages().pop().unwrap();
        assert_eq!(sent.text, to_markdown_v2(input));
        assert_eq!(sent.parse_mode.as_deref(), Some("MarkdownV2"));
    }
}

#[tokio::test]
async fn a_parse_rejection_is_bad_format_and_plain_sends_without_formatting() {
    let fake = FakeTelegram::start().await;
    let adapter = adapter(&fake).await;
    fake.fail_next("sendMessage", Fault::CantParseEntities, 1);
    let result = send(&adapter, text("42", "**hi** there.")).await;
    assert_eq!(result.kind(), Some(SendErrorKind::BadFormat));

    let plain = Outbound {
        kind: OutboundKind::Text {
            text: "**hi** there.".into(),
            reply_to: None,
            plain: true,
        },
        ..text("42", "")
    };
    assert!(send(&adapter, plain).await.is_ok());
    let sent = fake.sent_messages().pop().unwrap();
    assert_eq!((sent.text.as_str(), sent.parse_mode), ("hi there.", None));
}

#[tokio::test]
async fn the_4096_utf16_limit_is_counted_like_telegram() {
    let fake = FakeTelegram::start().await;
    let adapter = adapter(&fake).await;
    // 😀 is 2 UTF-16 units, 中 and . are 1 each: 1024 × 4 = 4096 visible units; the escapes
    // for '.' do not count.
    let full = "😀中.".repeat(1024);
    assert_eq!(full.encode_utf16().count(), 4096);
    let result = send(&adapter, text("42", &full)).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        fake.sent_messages().pop().unwrap().text,
        to_markdown_v2(&full)
    );

    let over = format!("{full}a");
    assert_eq!(
        send(&adapter, text("42", &over)).await.kind(),
        Some(SendErrorKind::TooLong)
    );
}

#[tokio::test]
async fn flood_control_reports_retry_after() {
    let fake = FakeTelegram::start().await;
    let adapter = adapter(&fake).await;
    fake.fail_next("sendMessage", Fault::TooManyRequests { retry_after: 7 }, 1);
    let result = send(&adapter, text("42", "hi")).await;
    assert_eq!(result.kind(), Some(SendErrorKind::RateLimited));
    assert_eq!(result.retry_after, Some(Duration::from_secs(7)));
    assert_eq!(
        fake.calls_of("sendMessage").len(),
        1,
        "one attempt; the core retries"
    );
}

#[tokio::test]
async fn errors_map_to_the_core_kinds() {
    let fake = FakeTelegram::start().await;
    let adapter = adapter(&fake).await;
    for (fault, kind) in [
        (Fault::Forbidden, SendErrorKind::Forbidden),
        (Fault::ServerError, SendErrorKind::Transient),
        (Fault::BadGateway, SendErrorKind::Transient),
        (Fault::DropConnection, SendErrorKind::Ambiguous),
        (
            Fault::BadRequest("Bad Request: chat not found".into()),
            SendErrorKind::NotFound,
        ),
    ] {
        fake.fail_next("sendMessage", fault.clone(), 1);
        assert_eq!(
            send(&adapter, text("42", "hi")).await.kind(),
            Some(kind),
            "{fault:?}"
        );
    }
    let url = fake.url();
    drop(fake);
    let gone = TelegramAdapter::new(
        hermes_telegram::Settings::from_config(
            "1:abc",
            json!({"base_url": url}).as_object().unwrap(),
            &Default::default(),
        )
        .unwrap(),
    );
    assert_eq!(
        send(&gone, text("42", "hi")).await.kind(),
        Some(SendErrorKind::Transient)
    );
}

#[tokio::test]
async fn a_reply_to_a_missing_message_is_sent_at_once_without_the_quote() {
    let fake = FakeTelegram::start().await;
    let adapter = adapter(&fake).await;
    let (_, user_message) = fake.push_message(MessageSpec::text(
        Chat::private(42),
        User::new(42, "A"),
        "q",
    ));
    let reply = |to: String| Outbound {
        kind: OutboundKind::Text {
            text: "answer".into(),
            reply_to: Some(to),
            plain: false,
        },
        ..text("42", "")
    };

    assert!(
        send(&adapter, reply(user_message.to_string()))
            .await
            .is_ok()
    );
    assert_eq!(
        fake.sent_messages().pop().unwrap().reply_to,
        Some(user_message)
    );

    // `allow_sending_without_reply`: a deleted quote costs no failed round trip.
    assert!(send(&adapter, reply("999999".into())).await.is_ok());
    let calls = fake.calls_of("sendMessage");
    assert_eq!(calls.len(), 2, "sent at once");
    let quote = calls[1].json("reply_parameters").expect("still quoting");
    assert_eq!(
        quote["allow_sending_without_reply"],
        serde_json::json!(true)
    );
    assert_eq!(calls[1].status, Some(200));
}

#[tokio::test]
async fn topics_route_sends_and_a_vanished_topic_falls_back_to_the_chat() {
    let fake = FakeTelegram::start().await;
    let adapter = adapter(&fake).await;
    let in_thread = |thread: &str| Outbound {
        thread_id: Some(thread.into()),
        ..text("-300", "hi")
    };

    assert!(send(&adapter, in_thread("5")).await.is_ok());
    assert_eq!(fake.sent_messages().pop().unwrap().thread_id, Some(5));
    assert!(send(&adapter, in_thread("1")).await.is_ok());
    assert_eq!(
        fake.sent_messages().pop().unwrap().thread_id,
        None,
        "the General topic is addressed without an id"
    );

    fake.close_thread(-300, 6);
    assert!(send(&adapter, in_thread("6")).await.is_ok());
    let threads: Vec<_> = fake
        .calls_of("sendMessage")
        .iter()
        .skip(2)
        .map(|c| c.i64("message_thread_id"))
        .collect();
    assert_eq!(
        threads,
        vec![Some(6), Some(6), None],
        "retried once, then sent without the topic"
    );
}

#[tokio::test]
async fn edits_deletes_and_typing() {
    let fake = FakeTelegram::start().await;
    let adapter = adapter(&fake).await;
    let sent = send(&adapter, text("42", "draft"))
        .await
        .message_id
        .unwrap();
    let edit = |t: &str| Outbound {
        kind: OutboundKind::Edit {
            message_id: sent.clone(),
            text: t.into(),
        },
        ..text("42", "")
    };
    assert!(send(&adapter, edit("final v1.0")).await.is_ok());
    assert_eq!(
        fake.message(42, sent.parse().unwrap()).unwrap().text,
        r"final v1\.0"
    );
    assert!(
        send(&adapter, edit("final v1.0")).await.is_ok(),
        "not modified counts as success"
    );

    fake.fail_next("editMessageText", Fault::CantParseEntities, 1);
    assert!(
        send(&adapter, edit("**final** v2")).await.is_ok(),
        "a rejected edit is redone as plain text"
    );
    let redo = fake.calls_of("editMessageText").pop().unwrap();
    assert_eq!(
        (redo.str("text").as_deref(), redo.str("parse_mode")),
        (Some("final v2"), None)
    );

    let missing = Outbound {
        kind: OutboundKind::Edit {
            message_id: "5".into(),
            text: "x".into(),
        },
        ..text("42", "")
    };
    assert_eq!(
        send(&adapter, missing).await.kind(),
        Some(SendErrorKind::NotFound)
    );

    let delete = Outbound {
        kind: OutboundKind::Delete {
            message_id: sent.clone(),
        },
        ..text("42", "")
    };
    assert!(send(&adapter, delete.clone()).await.is_ok());
    assert_eq!(
        send(&adapter, delete).await.kind(),
        Some(SendErrorKind::NotFound)
    );

    let typing = Outbound {
        thread_id: Some("1".into()),
        kind: OutboundKind::Typing,
        ..text("-300", "")
    };
    assert!(send(&adapter, typing).await.is_ok());
    let action = fake.calls_of("sendChatAction").pop().unwrap();
    assert_eq!(
        (
            action.str("action").as_deref(),
            action.i64("message_thread_id")
        ),
        (Some("typing"), Some(1))
    );
}

#[tokio::test]
async fn prompts_carry_inline_keyboards_and_refuse_oversized_data() {
    let fake = FakeTelegram::start().await;
    let adapter = adapter(&fake).await;
    let buttons = [
        ("✅ Allow once", "/approve once"),
        ("✅ Session", "/approve session"),
        ("❌ Deny", "/deny"),
    ];
    support::send_prompt(&adapter, "42", "Run `ls`?", &buttons).await;
    let markup = fake.sent_messages().pop().unwrap().reply_markup.unwrap();
    assert_eq!(
        markup["inline_keyboard"][0][0],
        json!({"text": "✅ Allow once", "callback_data": "/approve once"})
    );
    assert_eq!(markup["inline_keyboard"][1][0]["callback_data"], "/deny");

    let oversized = vec![hermes_adapter::Button {
        label: "x".into(),
        data: "d".repeat(65),
    }];
    let prompt = Outbound {
        kind: OutboundKind::Prompt {
            text: "?".into(),
            buttons: oversized,
        },
        ..text("42", "")
    };
    assert!(!send(&adapter, prompt).await.is_ok());
}

#[tokio::test]
async fn media_is_sent_natively_by_extension() {
    let fake = FakeTelegram::start().await;
    let adapter = adapter(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    let photo = dir.path().join("chart.png");
    let report = dir.path().join("report.pdf");
    std::fs::write(&photo, vec![1u8; 2048]).unwrap();
    std::fs::write(&report, vec![2u8; 1000]).unwrap();
    let media = |path: &std::path::Path, caption: Option<&str>| Outbound {
        kind: OutboundKind::Media {
            path: path.to_string_lossy().into_owned(),
            caption: caption.map(str::to_owned),
        },
        ..text("42", "")
    };

    assert!(
        send(&adapter, media(&photo, Some("the chart.")))
            .await
            .is_ok()
    );
    let call = fake.calls_of("sendPhoto").pop().expect("sendPhoto");
    assert_eq!(call.files[0].bytes, 2048);
    assert_eq!(call.files[0].file_name.as_deref(), Some("chart.png"));
    assert_eq!(call.str("caption").as_deref(), Some(r"the chart\."));
    assert_eq!(call.i64("chat_id"), Some(42));

    assert!(send(&adapter, media(&report, None)).await.is_ok());
    assert_eq!(
        fake.calls_of("sendDocument").pop().unwrap().files[0].bytes,
        1000
    );

    let missing = media(&dir.path().join("nope.png"), None);
    assert_eq!(
        send(&adapter, missing).await.kind(),
        Some(SendErrorKind::NotFound)
    );
}
