//! Outbound operations against the fake: what each call sends, and how every failure maps
//! onto the core's `SendErrorKind`s. One attempt per send.

mod support;

use std::time::Duration;

use fake_slack::{Fault, events};
use hermes_adapter::{Adapter, Button, Outbound, OutboundKind, SendErrorKind, SendResult};
use serde_json::json;
use support::{CHANNEL, DM, Harness, USER};

fn text(chat: &str, thread: Option<&str>, body: &str) -> Outbound {
    Outbound {
        chat_id: chat.into(),
        thread_id: thread.map(str::to_owned),
        kind: OutboundKind::Text {
            text: body.into(),
            reply_to: None,
            plain: false,
        },
    }
}

#[tokio::test]
async fn text_is_converted_to_mrkdwn_and_posted_in_the_thread() {
    let h = Harness::start(json!({})).await;
    let sent = h
        .adapter
        .send(text(CHANNEL, Some("1.1"), "**bold** [x](https://e.x) a<b"))
        .await;
    assert!(sent.is_ok(), "{sent:?}");
    let call = &h.fake.calls("chat.postMessage")[0];
    assert_eq!(call.str("text"), Some("*bold* <https://e.x|x> a&lt;b"));
    assert_eq!(call.str("thread_ts"), Some("1.1"));
    assert_eq!(call.str("channel"), Some(CHANNEL));
    assert_eq!(call.body["mrkdwn"], json!(true));
    assert_eq!(call.token.as_deref(), Some(h.fake.tokens().bot.as_str()));
    assert!(call.content_type.starts_with("application/json"));
    assert!(sent.message_id.is_some());
    h.stop().await.unwrap();
}

#[tokio::test]
async fn plain_text_is_only_escaped() {
    let h = Harness::start(json!({})).await;
    let mut outbound = text(DM, None, "**not bold** <x>");
    outbound.kind = OutboundKind::Text {
        text: "**not bold** <x>".into(),
        reply_to: Some("2.2".into()),
        plain: true,
    };
    assert!(h.adapter.send(outbound).await.is_ok());
    let call = &h.fake.calls("chat.postMessage")[0];
    assert_eq!(call.str("text"), Some("**not bold** &lt;x&gt;"));
    assert_eq!(call.body["mrkdwn"], json!(false));
    assert_eq!(
        call.str("thread_ts"),
        Some("2.2"),
        "reply_to threads the reply"
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_message_at_the_limit_is_accepted() {
    let h = Harness::start(json!({})).await;
    let caps = h.adapter.capabilities();
    assert_eq!(caps.message_limit, 39_000);
    assert_eq!(caps.command_prefix, '!');
    assert!(caps.edits && caps.buttons && caps.threads && caps.typing);
    let long = "é".repeat(caps.message_limit);
    let sent = h.adapter.send(text(CHANNEL, None, &long)).await;
    assert!(sent.is_ok(), "{sent:?}");
    let call = &h.fake.calls("chat.postMessage")[0];
    assert_eq!(call.str("text").unwrap().chars().count(), 39_000);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn rate_limits_carry_retry_after() {
    let h = Harness::start(json!({})).await;
    h.fake.fail_next(
        "chat.postMessage",
        Fault::RateLimited {
            retry_after_secs: 7,
        },
    );
    let sent = h.adapter.send(text(CHANNEL, None, "hi")).await;
    assert_eq!(sent.kind(), Some(SendErrorKind::RateLimited));
    assert_eq!(sent.retry_after, Some(Duration::from_secs(7)));
    assert_eq!(
        h.fake.calls("chat.postMessage").len(),
        1,
        "exactly one attempt"
    );
    h.stop().await.unwrap();
}

#[tokio::test]
async fn failures_map_to_send_error_kinds() {
    let h = Harness::start(json!({})).await;
    let table = [
        (Fault::Error("msg_too_long".into()), SendErrorKind::TooLong),
        (
            Fault::Error("channel_not_found".into()),
            SendErrorKind::NotFound,
        ),
        (
            Fault::Error("thread_not_found".into()),
            SendErrorKind::NotFound,
        ),
        (
            Fault::Error("not_in_channel".into()),
            SendErrorKind::Forbidden,
        ),
        (Fault::Error("is_archived".into()), SendErrorKind::Forbidden),
        (
            Fault::Error("ratelimited".into()),
            SendErrorKind::RateLimited,
        ),
        (
            Fault::Error("invalid_blocks".into()),
            SendErrorKind::BadFormat,
        ),
        (
            Fault::Error("invalid_auth".into()),
            SendErrorKind::Forbidden,
        ),
        (Fault::Status(503), SendErrorKind::Transient),
        (
            Fault::Error("brand_new_error".into()),
            SendErrorKind::Unknown,
        ),
    ];
    for (fault, kind) in table {
        h.fake.fail_next("chat.postMessage", fault.clone());
        let sent = h.adapter.send(text(CHANNEL, None, "hi")).await;
        assert_eq!(sent.kind(), Some(kind), "{fault:?}: {sent:?}");
    }
    h.stop().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_api_is_transient() {
    // A port nothing listens on: the request never left.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/api", listener.local_addr().unwrap());
    drop(listener);
    let fake = fake_slack::FakeSlack::start().await;
    let cache = tempfile::tempdir().unwrap();
    let mut settings = support::settings(&fake, json!({}), &[], cache.path());
    settings.api_base_url = dead;
    let adapter = hermes_slack::SlackAdapter::new(settings);
    let sent = adapter.send(text(CHANNEL, None, "hi")).await;
    assert_eq!(sent.kind(), Some(SendErrorKind::Transient), "{sent:?}");
}

#[tokio::test]
async fn edits_deletes_and_typing() {
    let h = Harness::start(json!({})).await;
    let posted = h.adapter.send(text(CHANNEL, None, "old")).await;
    let ts = posted.message_id.clone().expect("posted with a ts");
    let edit = Outbound {
        chat_id: CHANNEL.into(),
        thread_id: None,
        kind: OutboundKind::Edit {
            message_id: ts.clone(),
            text: "~~old~~ new".into(),
        },
    };
    assert_eq!(
        h.adapter.send(edit).await,
        SendResult::sent(Some(ts.clone()))
    );
    let update = &h.fake.calls("chat.update")[0];
    assert_eq!(
        (update.str("ts"), update.str("text")),
        (Some(ts.as_str()), Some("~old~ new"))
    );
    assert_eq!(h.fake.bot_messages_in(CHANNEL), ["~old~ new"]);

    let delete = Outbound {
        chat_id: CHANNEL.into(),
        thread_id: None,
        kind: OutboundKind::Delete {
            message_id: ts.clone(),
        },
    };
    assert!(h.adapter.send(delete).await.is_ok());
    assert_eq!(h.fake.calls("chat.delete")[0].str("ts"), Some(ts.as_str()));
    assert!(h.fake.bot_messages_in(CHANNEL).is_empty());

    let typing = |thread: Option<&str>| Outbound {
        chat_id: CHANNEL.into(),
        thread_id: thread.map(str::to_owned),
        kind: OutboundKind::Typing,
    };
    assert!(h.adapter.send(typing(None)).await.is_ok());
    assert!(
        h.fake.calls("assistant.threads.setStatus").is_empty(),
        "no status outside a thread"
    );
    assert!(h.adapter.send(typing(Some("6.6"))).await.is_ok());
    let status = &h.fake.calls("assistant.threads.setStatus")[0];
    assert_eq!(status.str("thread_ts"), Some("6.6"));
    assert_eq!(status.str("status"), Some("is thinking..."));
    // The reply clears the status.
    assert!(
        h.adapter
            .send(text(CHANNEL, Some("6.6"), "done"))
            .await
            .is_ok()
    );
    let cleared = h
        .fake
        .wait_for_calls("assistant.threads.setStatus", 2)
        .await;
    assert_eq!(cleared[1].str("status"), Some(""));
    h.stop().await.unwrap();
}

#[tokio::test]
async fn an_addressed_dm_wears_eyes_while_typing_and_a_check_mark_when_answered() {
    let mut h = Harness::start(json!({})).await;
    let (_, ts) = h.push_dm("hi");
    let event = h.record().await;
    let thread = event.source.thread_id.clone();
    let typing = Outbound {
        chat_id: DM.into(),
        thread_id: thread.clone(),
        kind: OutboundKind::Typing,
    };
    assert!(h.adapter.send(typing).await.is_ok());
    let eyes = h.fake.wait_for_calls("reactions.add", 1).await;
    assert_eq!(
        (eyes[0].str("name"), eyes[0].str("timestamp")),
        (Some("eyes"), Some(ts.as_str()))
    );
    assert!(
        h.adapter
            .send(text(DM, thread.as_deref(), "hello"))
            .await
            .is_ok()
    );
    let removed = h.fake.wait_for_calls("reactions.remove", 1).await;
    assert_eq!(removed[0].str("name"), Some("eyes"));
    let added = h.fake.wait_for_calls("reactions.add", 2).await;
    assert_eq!(added[1].str("name"), Some("white_check_mark"));
    h.stop().await.unwrap();
}

#[tokio::test]
async fn prompts_have_buttons_and_a_click_becomes_a_command_that_removes_them() {
    let mut h = Harness::start(json!({})).await;
    let prompt = Outbound {
        chat_id: CHANNEL.into(),
        thread_id: Some("7.7".into()),
        kind: OutboundKind::Prompt {
            text: "Run **rm -rf build**?".into(),
            buttons: vec![
                Button {
                    label: "Allow once".into(),
                    data: "/approve".into(),
                },
                Button {
                    label: "Deny".into(),
                    data: "/deny".into(),
                },
            ],
        },
    };
    let sent = h.adapter.send(prompt).await;
    let prompt_ts = sent.message_id.clone().expect("prompt ts");
    let call = &h.fake.calls("chat.postMessage")[0];
    assert_eq!(call.str("thread_ts"), Some("7.7"));
    let buttons = &call.body["blocks"][1]["elements"];
    assert_eq!(buttons[0]["action_id"], "/approve");
    assert_eq!(buttons[1]["value"], "/deny");
    assert_eq!(
        call.body["blocks"][0]["text"]["text"],
        "Run *rm -rf build*?"
    );

    let click = fake_slack::events::Click {
        user: USER,
        channel: CHANNEL,
        message_ts: &prompt_ts,
        thread_ts: Some("7.7"),
        action_id: "/deny",
        value: "/deny",
        label: "Deny",
        prompt_text: "Run *rm -rf build*?",
    };
    let pushed = h.fake.push_block_actions(click.clone());
    let event = h.record().await;
    assert_eq!(event.text, "/deny");
    assert_eq!(event.message_type, hermes_adapter::MessageType::Command);
    assert_eq!(event.event_id, format!("cb:{}", pushed.event_id));
    assert_eq!(event.source.user_id.as_deref(), Some(USER));
    assert_eq!(event.source.thread_id.as_deref(), Some("7.7"));
    h.fake.wait_for_ack(&pushed.envelope_id).await;
    let update = h.fake.wait_for_calls("chat.update", 1).await;
    assert_eq!(update[0].str("ts"), Some(prompt_ts.as_str()));
    let blocks = update[0].body["blocks"].as_array().unwrap();
    assert!(
        blocks.iter().all(|b| b["type"] != "actions"),
        "buttons still there: {blocks:?}"
    );
    assert!(update[0].str("text").unwrap().contains("Deny"));
    // A second click on the answered prompt starts nothing.
    let again = h.fake.push_block_actions(click);
    h.fake.wait_for_ack(&again.envelope_id).await;
    h.expect_only_marker("after the second click").await;
    h.stop().await.unwrap();
}

#[tokio::test]
async fn files_are_uploaded_with_the_external_upload_flow() {
    let h = Harness::start(json!({})).await;
    let path = h.cache.path().join("report.txt");
    std::fs::write(&path, b"quarterly numbers").unwrap();
    let media = Outbound {
        chat_id: CHANNEL.into(),
        thread_id: Some("8.8".into()),
        kind: OutboundKind::Media {
            path: path.to_string_lossy().into(),
            caption: Some("here".into()),
        },
    };
    let sent = h.adapter.send(media).await;
    assert!(sent.is_ok(), "{sent:?}");
    let ticket = &h.fake.calls("files.getUploadURLExternal")[0];
    assert_eq!(ticket.str("filename"), Some("report.txt"));
    assert_eq!(ticket.str("length"), Some("17"));
    assert!(
        ticket
            .content_type
            .starts_with("application/x-www-form-urlencoded")
    );
    let complete = &h.fake.calls("files.completeUploadExternal")[0];
    assert_eq!(complete.str("channel_id"), Some(CHANNEL));
    assert_eq!(complete.str("thread_ts"), Some("8.8"));
    assert_eq!(complete.str("initial_comment"), Some("here"));
    let file_id = complete.body["files"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(h.fake.records().uploads[&file_id], b"quarterly numbers");

    let missing = Outbound {
        chat_id: CHANNEL.into(),
        thread_id: None,
        kind: OutboundKind::Media {
            path: "/nonexistent/file.bin".into(),
            caption: None,
        },
    };
    assert_eq!(
        h.adapter.send(missing).await.kind(),
        Some(SendErrorKind::NotFound)
    );
    h.stop().await.unwrap();
}

/// Slack has no voice bubbles: a voice note is an uploaded audio file whose message
/// (`initial_comment`) is the reply's text, so the answer reads in the channel.
#[tokio::test]
async fn a_voice_note_is_an_audio_file_with_the_text_as_its_message() {
    let h = Harness::start(json!({})).await;
    let path = h.cache.path().join("reply_ab12.ogg");
    std::fs::write(&path, b"OggS voice").unwrap();
    let voice = Outbound {
        chat_id: CHANNEL.into(),
        thread_id: None,
        kind: OutboundKind::Voice {
            path: path.to_string_lossy().into(),
            caption: Some("The answer, also spoken.".into()),
            duration_secs: 1.5,
            waveform: vec![0, 128, 255],
        },
    };
    let sent = h.adapter.send(voice).await;
    assert!(sent.is_ok(), "{sent:?}");
    let ticket = &h.fake.calls("files.getUploadURLExternal")[0];
    assert_eq!(ticket.str("filename"), Some("reply_ab12.ogg"));
    let complete = &h.fake.calls("files.completeUploadExternal")[0];
    assert_eq!(
        complete.str("initial_comment"),
        Some("The answer, also spoken.")
    );
    let file_id = complete.body["files"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(h.fake.records().uploads[&file_id], b"OggS voice");
    h.stop().await.unwrap();
}

#[tokio::test]
async fn events_pushed_to_the_fake_use_the_dm_helpers() {
    // Guards the harness itself: a DM built by the fake's helpers is a DM to the adapter.
    let mut h = Harness::start(json!({})).await;
    h.fake
        .push_event(events::dm(DM, USER, "ping", &h.fake.next_ts()));
    assert_eq!(h.record().await.source.chat_id, DM);
    h.stop().await.unwrap();
}
