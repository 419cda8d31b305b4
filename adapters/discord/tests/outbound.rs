//! Outbound against the fake: text at the 2000-character limit (the fake enforces it),
//! replies, plain text, edits, deletes, typing, button prompts and clicks, slash commands,
//! attachments out, and the error mapping (429 with retry_after, 5xx, not found).

mod support;

use std::time::Duration;

use fake_discord::{Fault, Incoming};
use hermes_adapter::{
    Adapter, Button, MessageType, Outbound, OutboundKind, SendErrorKind, SendResult,
};
use hermes_discord::SlashCommand;
use serde_json::json;
use support::Harness;

async fn send(
    h: &Harness,
    chat_id: &str,
    thread_id: Option<&str>,
    kind: OutboundKind,
) -> SendResult {
    h.adapter
        .send(Outbound {
            chat_id: chat_id.into(),
            thread_id: thread_id.map(Into::into),
            kind,
        })
        .await
}

fn media(path: &std::path::Path, caption: Option<&str>) -> OutboundKind {
    OutboundKind::Media {
        path: path.to_string_lossy().into(),
        caption: caption.map(Into::into),
    }
}

fn text(text: &str, reply_to: Option<&str>, plain: bool) -> OutboundKind {
    OutboundKind::Text {
        text: text.into(),
        reply_to: reply_to.map(Into::into),
        plain,
    }
}

#[tokio::test]
async fn text_up_to_2000_characters_replies_and_plain_text() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    let question = h.fake.push_message(Incoming::new(&dm, &alice, "question"));
    h.next_event().await;

    let full = "é".repeat(2000);
    let result = send(&h, &dm, None, text(&full, Some(&question), false)).await;
    assert!(result.is_ok(), "{result:?}");
    let calls = h.fake.calls_to("POST /channels/{id}/messages");
    assert_eq!(
        calls[0].body["content"].as_str().unwrap().chars().count(),
        2000
    );
    assert_eq!(
        calls[0].body["message_reference"]["message_id"],
        question.as_str()
    );
    assert_eq!(calls[0].body["allowed_mentions"]["parse"], json!(["users"]));
    let stored = h.fake.read(|s| s.history[&dm].last().cloned().unwrap());
    assert_eq!(stored["id"].as_str(), result.message_id.as_deref());
    assert_eq!(stored["message_reference"]["message_id"], question.as_str());

    let too_long = send(&h, &dm, None, text(&"x".repeat(2001), None, false)).await;
    assert_eq!(too_long.kind(), Some(SendErrorKind::TooLong));

    let plain = send(&h, &dm, None, text("**bold** _it_", None, true)).await;
    assert!(plain.is_ok());
    let last = h
        .fake
        .calls_to("POST /channels/{id}/messages")
        .pop()
        .unwrap();
    assert_eq!(last.body["content"], "\\*\\*bold\\*\\* \\_it\\_");

    // A reply to a deleted message goes out without the reference.
    let result = send(&h, &dm, None, text("reply to nothing", Some("1"), false)).await;
    assert!(
        result.is_ok(),
        "fail_if_not_exists=false lets Discord drop the reference: {result:?}"
    );
    let stored = h.fake.read(|s| s.history[&dm].last().cloned().unwrap());
    assert!(stored.get("message_reference").is_none());
    h.stop().await.unwrap();
}

#[tokio::test]
async fn edits_deletes_typing_and_threads_as_targets() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    let general = h.fake.add_text_channel("general");
    let thread = h.fake.add_thread(&general, "t");
    let sent = send(&h, &general, Some(&thread), text("draft", None, false)).await;
    let id = sent.message_id.clone().unwrap();
    assert!(
        h.fake
            .read(|s| s.history[&thread].iter().any(|m| m["id"] == id.as_str())),
        "sent into the thread"
    );

    let edited = send(
        &h,
        &general,
        Some(&thread),
        OutboundKind::Edit {
            message_id: id.clone(),
            text: "final".into(),
        },
    )
    .await;
    assert!(edited.is_ok(), "{edited:?}");
    assert!(
        h.fake
            .read(|s| s.history[&thread].iter().any(|m| m["content"] == "final"))
    );
    assert!(send(&h, &thread, None, OutboundKind::Typing).await.is_ok());
    assert_eq!(h.fake.calls_to("POST /channels/{id}/typing").len(), 1);
    assert!(
        send(
            &h,
            &thread,
            None,
            OutboundKind::Delete {
                message_id: id.clone()
            }
        )
        .await
        .is_ok()
    );
    let gone = send(
        &h,
        &thread,
        None,
        OutboundKind::Edit {
            message_id: id,
            text: "x".into(),
        },
    )
    .await;
    assert_eq!(gone.kind(), Some(SendErrorKind::NotFound));
    let no_channel = send(&h, "12345", None, text("x", None, false)).await;
    assert_eq!(no_channel.kind(), Some(SendErrorKind::NotFound));
    h.stop().await.unwrap();
}

#[tokio::test]
async fn rate_limits_and_server_errors_map_to_their_kinds() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    let general = h.fake.add_text_channel("general");
    h.fake.fail_next(
        "POST /channels/{id}/messages",
        Fault::RateLimited { retry_after: 2.5 },
        1,
    );
    let limited = send(&h, &general, None, text("hi", None, false)).await;
    assert_eq!(limited.kind(), Some(SendErrorKind::RateLimited));
    assert_eq!(limited.retry_after, Some(Duration::from_millis(2500)));
    h.fake
        .fail_next("POST /channels/{id}/messages", Fault::Status(502), 1);
    let failed = send(&h, &general, None, text("hi", None, false)).await;
    assert_eq!(failed.kind(), Some(SendErrorKind::Transient));
    let ok = send(&h, &general, None, text("hi", None, false)).await;
    assert!(ok.is_ok(), "one attempt per send: the faults were consumed");
    assert_eq!(h.fake.calls_to("POST /channels/{id}/messages").len(), 3);
    h.stop().await.unwrap();
}

#[tokio::test]
async fn a_button_click_becomes_a_command_and_the_buttons_disappear() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    let alice = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&alice);
    let buttons = vec![
        Button {
            label: "Allow once".into(),
            data: "/approve".into(),
        },
        Button {
            label: "Allow for session".into(),
            data: "/approve session".into(),
        },
        Button {
            label: "Deny".into(),
            data: "/deny".into(),
        },
    ];
    let prompt = send(
        &h,
        &dm,
        None,
        OutboundKind::Prompt {
            text: "Run rm -rf build?".into(),
            buttons,
        },
    )
    .await;
    let prompt_id = prompt.message_id.unwrap();
    let call = h
        .fake
        .calls_to("POST /channels/{id}/messages")
        .pop()
        .unwrap();
    let row = &call.body["components"][0];
    assert_eq!(row["type"], 1);
    assert_eq!(row["components"][1]["custom_id"], "/approve session");
    assert_eq!(row["components"][2]["label"], "Deny");

    h.fake.duplicate_next_dispatches(1);
    let interaction = h
        .fake
        .push_button_click(&dm, &prompt_id, &alice, "/approve session");
    let event = h.next_event().await;
    assert_eq!(event.event_id, format!("cb:{interaction}"));
    assert_eq!(event.text, "/approve session");
    assert_eq!(event.message_type, MessageType::Command);
    assert_eq!(event.source.user_id.as_deref(), Some(alice.id.as_str()));
    assert_eq!(event.source.chat_id, dm);
    assert_eq!(
        event.reply_to_message_id.as_deref(),
        Some(prompt_id.as_str())
    );
    // Everything dispatched before this message has been handled once it arrives.
    h.fake
        .push_message(Incoming::new(&dm, &alice, "after the click"));
    assert_eq!(h.next_event().await.text, "after the click");
    let callbacks = h.fake.calls_to("POST /interactions/{id}/{token}/callback");
    assert_eq!(callbacks.len(), 1, "a duplicated click is answered once");
    assert_eq!(h.deliveries_of(&event.event_id), 1);
    // Acknowledged at once (deferred), then the accepted click removes the buttons.
    let callback = &callbacks[0];
    assert_eq!(callback.body, json!({"type": 6}));
    assert_eq!(callback.status, 204, "within Discord's 3 seconds");
    assert!(callback.path.contains(&interaction));
    let edits = h
        .fake
        .wait_for_calls("PATCH /webhooks/{id}/{token}/messages/@original", 1)
        .await;
    assert_eq!(edits[0].body, json!({"components": []}));
    assert_eq!(edits[0].status, 200);
    let components = h.fake.read(|s| {
        s.history[&dm]
            .iter()
            .find(|m| m["id"] == prompt_id.as_str())
            .unwrap()["components"]
            .clone()
    });
    assert_eq!(components, json!([]), "the prompt's buttons are gone");
    h.stop().await.unwrap();
}

#[tokio::test]
async fn slash_commands_are_registered_and_become_command_events() {
    let mut h = Harness::start_with(Duration::from_secs(30), json!({}), &[], |s| {
        s.slash_commands = vec![
            SlashCommand {
                name: "new".into(),
                description: "Start a new session".into(),
                takes_args: false,
            },
            SlashCommand {
                name: "model".into(),
                description: "Switch model".into(),
                takes_args: true,
            },
        ];
    })
    .await;
    h.ready(1).await;
    let calls = h
        .fake
        .wait_for_calls("PUT /applications/{id}/commands", 1)
        .await;
    assert!(calls[0].path.contains(&h.fake.application_id()));
    assert_eq!(calls[0].body[0]["name"], "new");
    assert_eq!(calls[0].body[1]["options"][0]["name"], "args");
    let general = h.fake.add_text_channel("general");
    let alice = h.fake.new_user("alice", false, &[]);
    let id = h
        .fake
        .push_slash_command(&general, &alice, "model", &[("args", "gpt-5 --global")]);
    let event = h.next_event().await;
    assert_eq!(event.event_id, format!("slash:{id}"));
    assert_eq!(event.text, "/model gpt-5 --global");
    assert_eq!(event.command().as_deref(), Some("model"));
    // Subcommands and groups arrive as nested options; their names are part of the text.
    h.fake.push_command_options(
        &general,
        &alice,
        "config",
        json!([{"name": "set", "type": 1, "options": [
            {"name": "key", "type": 3, "value": "display.tool_progress"},
            {"name": "value", "type": 3, "value": "off"},
        ]}]),
    );
    let event = h.next_event().await;
    assert_eq!(event.text, "/config set display.tool_progress off");
    let deferred = h
        .fake
        .calls_to("POST /interactions/{id}/{token}/callback")
        .pop()
        .unwrap();
    assert_eq!(deferred.body["type"], 5);
    h.fake
        .wait_for_calls("DELETE /webhooks/{id}/{token}/messages/@original", 1)
        .await;
    h.stop().await.unwrap();
}

#[tokio::test]
async fn files_go_out_as_multipart_attachments() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    let general = h.fake.add_text_channel("general");
    let file = h.cache.path().join("report.txt");
    std::fs::write(&file, b"quarterly numbers").unwrap();
    let result = send(&h, &general, None, media(&file, Some("the report"))).await;
    assert!(result.is_ok(), "{result:?}");
    let call = h
        .fake
        .calls_to("POST /channels/{id}/messages")
        .pop()
        .unwrap();
    assert_eq!(call.files, vec!["report.txt".to_owned()]);
    assert_eq!(call.body["content"], "the report");
    let stored = h
        .fake
        .read(|s| s.history[&general].last().cloned().unwrap());
    let key = stored["attachments"][0]["url"]
        .as_str()
        .unwrap()
        .split("/attachments/")
        .nth(1)
        .unwrap()
        .to_owned();
    assert_eq!(
        h.fake.read(|s| s.attachments[&key].clone()),
        b"quarterly numbers"
    );
    let missing = send(
        &h,
        &general,
        None,
        OutboundKind::Media {
            path: "/nonexistent/x".into(),
            caption: None,
        },
    )
    .await;
    assert!(!missing.is_ok());
    h.stop().await.unwrap();
}

#[tokio::test]
async fn what_discord_would_refuse_is_refused_before_sending_with_a_clear_reason() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    let general = h.fake.add_text_channel("general");
    // A button whose data exceeds a custom_id's 100 characters: refused, not cut.
    let long_data = format!("/approve {}", "x".repeat(95));
    let result = send(
        &h,
        &general,
        None,
        OutboundKind::Prompt {
            text: "Run it?".into(),
            buttons: vec![hermes_adapter::Button {
                label: "Approve".into(),
                data: long_data,
            }],
        },
    )
    .await;
    let (kind, reason) = result.error.clone().expect("refused");
    assert_eq!(kind, hermes_adapter::SendErrorKind::BadFormat);
    assert!(reason.contains("100"), "{reason}");
    // A file over the guild's upload limit (10 MiB without boosts): refused with the sizes.
    let file = h.cache.path().join("big.bin");
    std::fs::write(&file, vec![0u8; 10 * 1024 * 1024 + 1]).unwrap();
    let result = send(&h, &general, None, media(&file, None)).await;
    let (kind, reason) = result.error.clone().expect("refused");
    assert_eq!(kind, hermes_adapter::SendErrorKind::BadFormat);
    assert!(reason.contains("at most 10 MiB"), "{reason}");
    assert!(
        h.fake.calls_to("POST /channels/{id}/messages").is_empty(),
        "nothing was sent"
    );
    h.stop().await.unwrap();
}

/// A voice message is flagged 8192 with one `audio/ogg` attachment carrying its length and
/// base64 waveform, and no content (the fake enforces Discord's rules); where voice messages
/// are refused (50173) the audio goes as an ordinary file with the caption as content.
#[tokio::test]
async fn voice_messages_and_the_plain_file_where_they_are_refused() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    let general = h.fake.add_text_channel("general");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reply_1.ogg");
    std::fs::write(&path, b"OggS voice note").unwrap();
    let voice = |caption: Option<&str>| OutboundKind::Voice {
        path: path.to_string_lossy().into(),
        caption: caption.map(Into::into),
        duration_secs: 2.5,
        waveform: vec![0, 64, 255],
    };
    let sent = send(&h, &general, None, voice(None)).await;
    assert!(sent.is_ok(), "{sent:?}");
    let call = h.fake.calls_to("POST /channels/{id}/messages").remove(0);
    assert_eq!(call.body["flags"], 8192);
    assert_eq!(call.files, ["voice-message.ogg"]);
    assert_eq!(call.body["attachments"][0]["duration_secs"], 2.5);
    assert_eq!(call.body["attachments"][0]["waveform"], "AED/");
    assert!(call.body.get("content").is_none());
    let stored = h
        .fake
        .read(|s| s.history[&general].last().cloned().unwrap());
    assert_eq!(stored["flags"], 8192);
    assert_eq!(stored["attachments"][0]["content_type"], "audio/ogg");

    h.fake.forbid_voice_messages();
    let sent = send(&h, &general, None, voice(Some("The text."))).await;
    assert!(sent.is_ok(), "{sent:?}");
    let calls = h.fake.calls_to("POST /channels/{id}/messages");
    assert_eq!(calls[1].status, 403);
    assert_eq!(calls[2].body["content"], "The text.");
    assert!(calls[2].body.get("flags").is_none());
    assert_eq!(calls[2].files, ["voice.ogg"]);
    h.stop().await.unwrap();
}
