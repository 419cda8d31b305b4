//! The adapter against the fake's documented Bot API rules: a local Bot API server in
//! `--local` mode (files read from disk, no 20 MB cap), uploads Telegram would refuse
//! (photos as documents, oversized files refused with a word to the user), refusals that no
//! retry changes mapped to `Forbidden`, quotes of deleted messages sent in one round trip,
//! link previews off when configured, and the privacy-mode warning at start-up.

mod support;

use fake_telegram::{Attachment, Chat, FakeTelegram, Fault, MessageSpec, User};
use hermes_adapter::{Adapter, Outbound, OutboundKind, SendErrorKind};
use hermes_telegram::{Settings, TelegramAdapter};
use serde_json::json;
use support::{Captured, TestCore, settings, start};

const MB: usize = 1024 * 1024;

fn text(chat: i64, body: &str, reply_to: Option<&str>) -> Outbound {
    Outbound {
        chat_id: chat.to_string(),
        thread_id: None,
        kind: OutboundKind::Text {
            text: body.into(),
            reply_to: reply_to.map(str::to_owned),
            plain: false,
        },
    }
}

fn media(chat: i64, path: &std::path::Path) -> Outbound {
    Outbound {
        chat_id: chat.to_string(),
        thread_id: None,
        kind: OutboundKind::Media {
            path: path.display().to_string(),
            caption: None,
        },
    }
}

#[tokio::test]
async fn local_mode_reads_get_file_paths_from_disk() {
    let fake = FakeTelegram::start().await;
    let server_disk = tempfile::tempdir().unwrap();
    fake.enable_local_mode(server_disk.path());
    let mut core = TestCore::new();
    let cache = tempfile::tempdir().unwrap();
    let extra = json!({"cache_dir": cache.path(), "local_mode": true});
    let running = start(settings(&fake, extra), &core);
    let bytes = vec![5u8; 3000];
    let spec = MessageSpec::text(Chat::private(42), User::new(42, "A"), "see file")
        .with_attachment(Attachment::Document {
            bytes: bytes.clone(),
            file_name: "local.bin".into(),
            mime_type: "application/octet-stream".into(),
        });
    fake.push_message(spec);
    let mut event = core.next_event().await;
    running.adapter.fetch_pending_media(&mut event).await;
    let path = event.media_paths.first().expect("the attachment was saved");
    assert_eq!(std::fs::read(path).unwrap(), bytes);
    assert!(
        path.starts_with(&cache.path().display().to_string()),
        "{path}"
    );
    assert!(
        fake.calls_of("(download)").is_empty(),
        "nothing is downloaded over HTTP in local mode"
    );
    running.stop().await.unwrap();
}

#[test]
fn the_20_mb_get_file_cap_holds_without_local_mode() {
    let env = Default::default();
    let custom = json!({"base_url": "http://localhost:8081/bot"});
    let settings = Settings::from_config("1:x", custom.as_object().unwrap(), &env).unwrap();
    assert_eq!(
        settings.max_media_bytes,
        20 * MB as u64,
        "a custom base_url alone"
    );
    let local = json!({"base_url": "http://localhost:8081/bot", "local_mode": true});
    let settings = Settings::from_config("1:x", local.as_object().unwrap(), &env).unwrap();
    assert_eq!(
        settings.max_media_bytes,
        128 * MB as u64,
        "local mode: only our own cap"
    );
    let bad = json!({"local_mode": "sometimes"});
    let errors = Settings::from_config("1:x", bad.as_object().unwrap(), &env).unwrap_err();
    assert!(errors.join("\n").contains("extra.local_mode"), "{errors:?}");
}

#[tokio::test]
async fn photos_telegram_would_refuse_go_as_documents_and_huge_files_are_refused() {
    let fake = FakeTelegram::start().await;
    let adapter = TelegramAdapter::new(settings(&fake, json!({})));
    let dir = tempfile::tempdir().unwrap();

    let big_photo = dir.path().join("big.jpg");
    std::fs::write(&big_photo, vec![0u8; 11 * MB]).unwrap();
    let sent = adapter.send(media(42, &big_photo)).await;
    assert!(sent.is_ok(), "{sent:?}");
    assert!(
        fake.calls_of("sendPhoto").is_empty(),
        "not tried as a photo"
    );
    assert_eq!(fake.calls_of("sendDocument").len(), 1);

    let mut banner = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    banner.extend(4000u32.to_be_bytes());
    banner.extend(100u32.to_be_bytes());
    let banner_path = dir.path().join("banner.png");
    std::fs::write(&banner_path, banner).unwrap();
    assert!(adapter.send(media(42, &banner_path)).await.is_ok());
    assert!(
        fake.calls_of("sendPhoto").is_empty(),
        "ratio 40 is not a photo"
    );
    assert_eq!(fake.calls_of("sendDocument").len(), 2);

    let huge = dir.path().join("huge.zip");
    std::fs::write(&huge, vec![0u8; 51 * MB]).unwrap();
    let refused = adapter.send(media(42, &huge)).await;
    assert!(!refused.is_ok(), "{refused:?}");
    assert_eq!(fake.calls_of("sendDocument").len(), 2, "never uploaded");
    let told = fake.sent_messages();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(
        told[0].text.contains("huge.zip") && told[0].text.contains("50 MB"),
        "{told:?}"
    );
}

#[tokio::test]
async fn refusals_no_retry_changes_are_forbidden() {
    let fake = FakeTelegram::start().await;
    let adapter = TelegramAdapter::new(settings(&fake, json!({})));
    for description in [
        "Bad Request: not enough rights to send text messages to the chat",
        "Bad Request: TOPIC_CLOSED",
        "Bad Request: bot was blocked by the user",
    ] {
        fake.fail_next("sendMessage", Fault::BadRequest(description.into()), 1);
        let result = adapter.send(text(42, "hi", None)).await;
        assert_eq!(
            result.kind(),
            Some(SendErrorKind::Forbidden),
            "{description}"
        );
    }
    assert_eq!(fake.calls_of("sendMessage").len(), 3, "one attempt each");
}

#[tokio::test]
async fn a_deleted_quote_costs_no_extra_round_trip_and_previews_follow_config() {
    let fake = FakeTelegram::start().await;
    let extra = json!({"disable_link_previews": true});
    let adapter = TelegramAdapter::new(settings(&fake, extra));
    let result = adapter
        .send(text(42, "see https://example.com", Some("999")))
        .await;
    assert!(result.is_ok(), "{result:?}");
    let calls = fake.calls_of("sendMessage");
    assert_eq!(calls.len(), 1, "sent at once despite the missing quote");
    let reply = calls[0].json("reply_parameters").unwrap();
    assert_eq!(reply["allow_sending_without_reply"], json!(true));
    assert_eq!(
        calls[0].json("link_preview_options"),
        Some(json!({"is_disabled": true}))
    );
    let edit = Outbound {
        chat_id: "42".into(),
        thread_id: None,
        kind: OutboundKind::Edit {
            message_id: result.message_id.unwrap(),
            text: "see https://example.org".into(),
        },
    };
    assert!(adapter.send(edit).await.is_ok());
    let edits = fake.calls_of("editMessageText");
    assert_eq!(
        edits[0].json("link_preview_options"),
        Some(json!({"is_disabled": true}))
    );
}

/// Privacy mode on and gating that needs to see unmentioned group messages: warned once at
/// start-up; with `require_mention` (nothing else needing them) no warning.
#[tokio::test(flavor = "current_thread")]
async fn privacy_mode_is_warned_about_when_group_gating_needs_all_messages() {
    for (require_mention, warned) in [(false, true), (true, false)] {
        let logs = Captured::default();
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let fake = FakeTelegram::start().await;
        fake.set_privacy_mode(true);
        let core = TestCore::new();
        let extra = json!({"require_mention": require_mention});
        let running = start(settings(&fake, extra), &core);
        fake.wait_for_calls("getUpdates", 1, support::WAIT)
            .await
            .unwrap();
        running.stop().await.unwrap();
        let text = logs.text();
        assert_eq!(
            text.contains("privacy mode on"),
            warned,
            "require_mention={require_mention}:\n{text}"
        );
    }
}
