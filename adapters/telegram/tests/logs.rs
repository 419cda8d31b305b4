//! What the adapter logs: a 409 Conflict is named once (another poller on the token), and
//! neither the bot token nor the webhook secret ever reaches a log line, whatever fails.

mod support;

use fake_telegram::{Chat, FakeTelegram, Fault, TOKEN, User};
use serde_json::json;
use support::{Captured, TestCore, settings, start};

// A current-thread runtime: every adapter task runs on this thread, under the test's
// thread-local subscriber.
#[tokio::test(flavor = "current_thread")]
async fn a_conflict_is_logged_once_and_secrets_never_are() {
    let logs = Captured::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    fake.fail_next("getUpdates", Fault::Conflict, 3);
    fake.fail_next("getUpdates", Fault::DropConnection, 1);
    let update_id = fake.push_text(Chat::private(42), User::new(42, "A"), "/after_conflict");
    let running = start(settings(&fake, json!({})), &core);
    assert_eq!(core.next_event().await.event_id, update_id.to_string());
    running.stop().await.unwrap();

    let text = logs.text();
    let conflict_lines = text
        .lines()
        .filter(|l| l.contains("409 Conflict") && l.contains("another poller"))
        .count();
    assert_eq!(
        conflict_lines, 1,
        "one clear line for a run of conflicts:\n{text}"
    );
    assert!(
        text.contains("getUpdates failed"),
        "the dropped poll is logged:\n{text}"
    );
    assert!(
        !text.contains("did not complete within its window"),
        "a drop is not a stall:\n{text}"
    );
    assert!(!text.contains(TOKEN), "token in logs:\n{text}");
}
