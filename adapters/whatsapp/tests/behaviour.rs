//! What the WhatsApp Cloud adapter does beyond the shared contract, against the fake Meta:
//! the subscription handshake, signature refusals, a redelivered notification recorded once,
//! the 24-hour window named in the error, Meta's rate-limit codes as waits, a broken
//! connection told apart from a refused one, an attachment in
//! both directions, and a button tap arriving as the command it stands for.

mod support;

use std::time::Duration;

use hermes_adapter::testing::TestCore;
use hermes_adapter::{
    Adapter, Button, MessageType, Outbound, OutboundKind, RecordOutcome, SendErrorKind,
};
use serde_json::json;
use support::USER;
use support::fake_whatsapp::{self, FakeMeta, Fault};

fn to_user(kind: OutboundKind) -> Outbound {
    Outbound {
        chat_id: USER.into(),
        thread_id: None,
        kind,
    }
}

fn text(text: &str) -> OutboundKind {
    OutboundKind::Text {
        text: text.into(),
        reply_to: None,
        plain: false,
    }
}

#[tokio::test]
async fn the_handshake_and_signatures_keep_strangers_out() {
    let core = TestCore::new();
    let running = support::start(core.context()).await;
    let client = reqwest::Client::new();
    let verify = |token: &str| {
        format!(
            "{}/whatsapp/webhook?hub.mode=subscribe&hub.verify_token={token}&hub.challenge=1158201444",
            running.base
        )
    };
    let ok = client
        .get(verify(fake_whatsapp::VERIFY_TOKEN))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(
        ok.text().await.unwrap(),
        "1158201444",
        "the challenge is echoed"
    );
    let wrong = client.get(verify("guess")).send().await.unwrap();
    assert_eq!(wrong.status(), 403);

    let body = FakeMeta::notification(
        USER,
        json!([{"from": USER, "id": "wamid.forged",
        "type": "text", "text": {"body": "run rm -rf /"}}]),
    );
    let forged = fake_whatsapp::hub_signature("not-the-app-secret", &body);
    assert_eq!(
        running.meta.post_once(body.clone(), Some(&forged)).await,
        401
    );
    assert_eq!(running.meta.post_once(body.clone(), None).await, 401);
    let mut tampered = body.clone();
    tampered.extend_from_slice(b" ");
    let signed = fake_whatsapp::hub_signature(fake_whatsapp::APP_SECRET, &body);
    assert_eq!(running.meta.post_once(tampered, Some(&signed)).await, 401);
    assert!(
        core.deliveries().is_empty(),
        "nothing unsigned reached the core"
    );
    running.stop().await;
}

#[tokio::test]
async fn a_redelivery_is_a_duplicate_and_statuses_are_no_messages() {
    let mut core = TestCore::new();
    let running = support::start(core.context()).await;
    let wamid = running.meta.push_text(USER, "hello once");
    assert_eq!(running.meta.wait_answered(&wamid).await, 200);
    let first = core.next_recorded().await;
    assert_eq!(
        (first.event_id.as_str(), first.text.as_str()),
        (wamid.as_str(), "hello once")
    );
    assert_eq!(first.source.platform, "whatsapp_cloud");
    // Meta delivers the same notification again.
    let again = FakeMeta::notification(
        USER,
        json!([{"from": USER, "id": wamid, "type": "text",
        "text": {"body": "hello once"}}]),
    );
    let signature = fake_whatsapp::hub_signature(fake_whatsapp::APP_SECRET, &again);
    assert_eq!(running.meta.post_once(again, Some(&signature)).await, 200);
    assert_eq!(core.next().await.1, RecordOutcome::Duplicate);
    // A status update is answered 200 and handed to nobody.
    let status = serde_json::to_vec(
        &json!({"object": "whatsapp_business_account", "entry": [{"id": "1",
        "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp",
        "metadata": {"phone_number_id": fake_whatsapp::PHONE_NUMBER_ID},
        "statuses": [{"id": "wamid.out.1", "status": "read", "recipient_id": USER}]}}]}]}),
    )
    .unwrap();
    let signature = fake_whatsapp::hub_signature(fake_whatsapp::APP_SECRET, &status);
    assert_eq!(running.meta.post_once(status, Some(&signature)).await, 200);
    assert_eq!(core.deliveries_of(&wamid), 2);
    assert_eq!(core.deliveries().len(), 2, "the status became no event");
    running.stop().await;
}

#[tokio::test]
async fn outside_the_window_the_error_says_so_and_rate_limits_are_waits() {
    let core = TestCore::new();
    let running = support::start(core.context()).await;
    running.meta.user_wrote(USER, 25 * 60 * 60);
    let refused = running.adapter.send(to_user(text("late answer"))).await;
    assert_eq!(
        refused.kind(),
        Some(SendErrorKind::Forbidden),
        "{refused:?}"
    );
    let message = refused.error.unwrap().1;
    assert!(
        message.contains("24-hour") && message.contains(USER),
        "{message}"
    );
    assert!(running.meta.sent().is_empty());

    running.meta.user_wrote(USER, 60);
    running.meta.fail_next(Fault::PairRate);
    let paced = running.adapter.send(to_user(text("too quick"))).await;
    assert_eq!(paced.kind(), Some(SendErrorKind::RateLimited));
    assert_eq!(
        paced.retry_after,
        Some(Duration::from_secs(6)),
        "Meta's pair pace"
    );
    running.meta.fail_next(Fault::Throughput(None));
    let throughput = running.adapter.send(to_user(text("busy"))).await;
    assert_eq!(throughput.retry_after, Some(Duration::from_secs(1)));
    running.meta.fail_next(Fault::Internal);
    let internal = running.adapter.send(to_user(text("later"))).await;
    assert_eq!(internal.kind(), Some(SendErrorKind::Transient));
    let sent = running.adapter.send(to_user(text("**now** it goes"))).await;
    assert!(sent.is_ok(), "{sent:?}");
    assert_eq!(
        running.meta.sent()[0].text,
        "*now* it goes",
        "WhatsApp's bold"
    );
    running.stop().await;
}

/// A send whose connection broke before Meta's answer may have reached the user (here it
/// did): ambiguous, so the gateway never resends it silently. A Graph API that refuses the
/// connection never saw the message: transient, so it is sent again.
#[tokio::test]
async fn a_broken_connection_is_ambiguous_and_a_refused_one_is_transient() {
    let core = TestCore::new();
    let running = support::start(core.context()).await;
    running.meta.user_wrote(USER, 60);
    running.meta.fail_next(Fault::Disconnect);
    let broken = running.adapter.send(to_user(text("did it go?"))).await;
    assert_eq!(broken.kind(), Some(SendErrorKind::Ambiguous), "{broken:?}");
    let sent = running.meta.sent();
    assert_eq!(sent.len(), 1, "Meta accepted it before the break");
    assert_eq!(sent[0].text, "did it go?");

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let extra = json!({"phone_number_id": fake_whatsapp::PHONE_NUMBER_ID,
        "access_token": fake_whatsapp::TOKEN, "app_secret": fake_whatsapp::APP_SECRET,
        "verify_token": fake_whatsapp::VERIFY_TOKEN, "graph_api_url": url});
    let cache = tempfile::tempdir().unwrap();
    let settings = hermes_whatsapp::Settings::from_config(
        extra.as_object().unwrap(),
        &Default::default(),
        cache.path().to_path_buf(),
        hermes_adapter::net::Net::direct(),
    )
    .unwrap();
    let unreachable = hermes_whatsapp::WhatsAppAdapter::new(settings);
    let refused = unreachable.send(to_user(text("anyone there?"))).await;
    assert_eq!(
        refused.kind(),
        Some(SendErrorKind::Transient),
        "{refused:?}"
    );
    running.stop().await;
}

#[tokio::test]
async fn attachments_travel_both_ways_and_a_tap_is_the_command() {
    let mut core = TestCore::new();
    let running = support::start(core.context()).await;
    let png = b"\x89PNG\r\n\x1a\nfake image bytes".to_vec();
    let media_id = running.meta.add_user_media("image/png", &png);
    running.meta.push_image(USER, &media_id, "what is this?");
    let mut event = core.next_recorded().await;
    assert_eq!(event.message_type, MessageType::Photo);
    assert_eq!(
        event.pending_media.len(),
        1,
        "fetched later, not before the ack"
    );
    running.adapter.fetch_pending_media(&mut event).await;
    assert_eq!(event.media_types, ["image/png"]);
    assert_eq!(std::fs::read(&event.media_paths[0]).unwrap(), png);

    let out = running.cache.path().join("answer.pdf");
    std::fs::write(&out, b"%PDF-1.4 answer").unwrap();
    let sent = running
        .adapter
        .send(to_user(OutboundKind::Media {
            path: out.to_string_lossy().into(),
            caption: Some("here".into()),
        }))
        .await;
    assert!(sent.is_ok(), "{sent:?}");
    let shown = running.meta.find(&sent.message_id.unwrap()).unwrap();
    assert_eq!(
        (shown.kind.as_str(), shown.text.as_str()),
        ("document", "here")
    );
    assert_eq!(shown.media.as_deref(), Some(&b"%PDF-1.4 answer"[..]));

    let buttons = vec![
        Button {
            label: "Approve".into(),
            data: "/approve".into(),
        },
        Button {
            label: "Deny".into(),
            data: "/deny".into(),
        },
    ];
    let prompt = running
        .adapter
        .send(to_user(OutboundKind::Prompt {
            text: "Run `ls`?".into(),
            buttons,
        }))
        .await;
    assert!(prompt.is_ok(), "{prompt:?}");
    running.meta.push_tap(USER, "/approve", "Approve");
    let tap = core.next_recorded().await;
    assert_eq!(
        (tap.text.as_str(), tap.message_type),
        ("/approve", MessageType::Command)
    );
    assert_eq!(tap.command().as_deref(), Some("approve"));

    // Typing attaches to the newest message: it is marked read.
    assert!(
        running
            .adapter
            .send(to_user(OutboundKind::Typing))
            .await
            .is_ok()
    );
    assert_eq!(running.meta.read(), std::slice::from_ref(&tap.event_id));
    let edit = running
        .adapter
        .send(to_user(OutboundKind::Edit {
            message_id: "x".into(),
            text: "y".into(),
        }))
        .await;
    assert!(!edit.is_ok(), "WhatsApp has no edits");
    running.stop().await;
}
