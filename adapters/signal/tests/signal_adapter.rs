//! The Signal adapter against the fake signal-cli daemon, beyond the compliance suite:
//! group gating, approvals by reaction, attachments both ways, quotes and styles, and a
//! dropped event stream.

use std::time::Duration;

use fake_signal::FakeSignal;
use hermes_adapter::testing::TestCore;
use hermes_adapter::{
    Adapter, AdapterError, Button, ChatType, MessageType, Outbound, OutboundKind,
};
use hermes_signal::{CHOICES, Settings, SignalAdapter};
use serde_json::json;
use tokio::task::JoinHandle;

const BOT: &str = "+15550000001";
const USER: &str = "+15551112222";

struct Running {
    fake: FakeSignal,
    adapter: SignalAdapter,
    core: TestCore,
    run: JoinHandle<Result<(), AdapterError>>,
    cache: tempfile::TempDir,
}

async fn start(extra: serde_json::Value) -> Running {
    let fake = FakeSignal::start(BOT).await;
    let cache = tempfile::tempdir().unwrap();
    let mut config = json!({"http_url": fake.url(), "account": BOT, "cache_dir": cache.path()});
    config
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let settings = Settings::from_config(config.as_object().unwrap(), &Default::default()).unwrap();
    let adapter = SignalAdapter::new(settings);
    let core = TestCore::new();
    let (runner, ctx) = (adapter.clone(), core.ctx.clone());
    let run = tokio::spawn(async move { runner.run(ctx).await });
    fake.wait_listeners(1).await;
    Running {
        fake,
        adapter,
        core,
        run,
        cache,
    }
}

impl Running {
    async fn send(&self, chat: &str, kind: OutboundKind) -> hermes_adapter::SendResult {
        let outbound = Outbound {
            chat_id: chat.into(),
            thread_id: None,
            kind,
        };
        tokio::time::timeout(Duration::from_secs(30), self.adapter.send(outbound))
            .await
            .expect("a send finishes")
    }

    async fn stop(self) {
        self.core.ctx.shutdown.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(30), self.run).await;
        assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
        assert_eq!(self.fake.unexpected(), Vec::<String>::new());
    }
}

#[tokio::test]
async fn groups_answer_only_when_allowed_and_mentioned() {
    let mut r = start(json!({"group_allowed_users": "GOOD==", "require_mention": true})).await;
    let mention = json!([{"start": 0, "length": 1, "number": BOT, "uuid": "uuid-bot"}]);
    r.fake
        .push_group(USER, "OTHER==", "\u{FFFC} not this group", mention.clone());
    r.fake
        .push_group(USER, "GOOD==", "no mention here", json!([]));
    r.fake
        .push_group(USER, "GOOD==", "\u{FFFC} what time is it?", mention);
    r.fake.push_dm(USER, "and a direct one");
    let first = r.core.next_recorded().await;
    assert_eq!(first.text, "what time is it?");
    assert_eq!(first.source.chat_id, "group:GOOD==");
    assert_eq!(first.source.chat_type, ChatType::Group);
    let second = r.core.next_recorded().await;
    assert_eq!(
        (second.text.as_str(), second.source.chat_type),
        ("and a direct one", ChatType::Dm)
    );
    r.stop().await;
}

#[tokio::test]
async fn a_numbered_reaction_on_a_prompt_answers_it_and_others_do_not() {
    let mut r = start(json!({})).await;
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
    let prompt = r
        .send(
            USER,
            OutboundKind::Prompt {
                text: "Run **rm**?".into(),
                buttons,
            },
        )
        .await;
    let id = prompt.message_id.expect("the prompt has an id");
    let ts: i64 = id.split_once(':').unwrap().0.parse().unwrap();
    let shown = r.fake.sent_at(ts).unwrap();
    assert!(shown.message.starts_with("Run rm?"), "{shown:?}");
    assert!(
        shown.message.contains(&format!("{} Deny", CHOICES[1])),
        "{shown:?}"
    );
    assert_eq!(shown.styles, ["4:2:BOLD"]);
    // A thumbs-up is not a choice, and a reaction to another message answers nothing.
    r.fake.push_reaction(USER, USER, "👍", ts);
    r.fake.push_reaction(USER, USER, CHOICES[0], ts - 1000);
    r.fake.push_reaction(USER, USER, CHOICES[1], ts);
    let answer = r.core.next_recorded().await;
    assert_eq!(answer.text, "/deny");
    assert_eq!(answer.message_type, MessageType::Command);
    assert_eq!(answer.source.user_id.as_deref(), Some(USER));
    assert!(r.core.drain().is_empty());
    r.stop().await;
}

#[tokio::test]
async fn attachments_travel_both_ways_and_replies_quote() {
    let mut r = start(json!({})).await;
    r.fake
        .add_attachment("att-1", b"\x89PNG fake image".to_vec());
    r.fake.push_attachment(USER, "look", "att-1", "image/png");
    let mut event = r.core.next_recorded().await;
    assert_eq!(event.message_type, MessageType::Photo);
    assert_eq!(event.pending_media.len(), 1, "fetched only before the turn");
    r.adapter.fetch_pending_media(&mut event).await;
    assert_eq!(event.media_types, ["image/png"]);
    assert_eq!(
        std::fs::read(&event.media_paths[0]).unwrap(),
        b"\x89PNG fake image"
    );
    assert!(event.media_paths[0].starts_with(r.cache.path().to_str().unwrap()));

    let file = r.cache.path().join("report.pdf");
    std::fs::write(&file, b"%PDF-1.4 tiny").unwrap();
    let media = OutboundKind::Media {
        path: file.to_string_lossy().into_owned(),
        caption: Some("the _report_".into()),
    };
    assert!(r.send(USER, media).await.is_ok());
    let reply = OutboundKind::Text {
        text: "got it".into(),
        reply_to: event.message_id.clone(),
        plain: false,
    };
    assert!(r.send(USER, reply).await.is_ok());
    let sent = r.fake.wait_sent(2).await;
    assert_eq!(
        sent[0].attachments,
        [(
            "application/pdf".into(),
            "report.pdf".into(),
            b"%PDF-1.4 tiny".to_vec()
        )]
    );
    assert_eq!(
        (sent[0].message.as_str(), sent[0].styles.as_slice()),
        ("the report", &["4:6:ITALIC".to_owned()][..])
    );
    let quoted: i64 = event
        .message_id
        .unwrap()
        .split_once(':')
        .unwrap()
        .0
        .parse()
        .unwrap();
    assert_eq!(sent[1].quote, Some(quoted));
    r.stop().await;
}

#[tokio::test]
async fn a_dropped_event_stream_is_reopened_and_messages_flow_again() {
    let mut r = start(json!({})).await;
    r.fake.push_dm(USER, "before");
    assert_eq!(r.core.next_recorded().await.text, "before");
    r.fake.drop_streams();
    r.fake.wait_listeners(1).await;
    r.fake.push_dm(USER, "after");
    assert_eq!(r.core.next_recorded().await.text, "after");
    r.stop().await;
}
