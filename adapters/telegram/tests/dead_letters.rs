//! An update the adapter cannot decode reaches the core as a dead letter (raw payload, id,
//! chat) and the offset moves past it only once the core has kept it; the next message flows.

mod support;

use fake_telegram::{Chat, FakeTelegram, User};
use serde_json::json;
use support::{TestCore, settings, start_with_ctx, wait_confirmed};

#[tokio::test]
async fn an_undecodable_update_becomes_a_dead_letter_and_the_offset_moves_on() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    let running = start_with_ctx(settings(&fake, json!({})), core.ctx.clone());
    // A message whose message_id is not the integer the Bot API documents: not decodable.
    let broken = fake.push_update(json!({"message": {"message_id": "not-a-number", "date": 0,
        "chat": {"id": 42, "type": "private"}, "from": {"id": 42, "is_bot": false,
        "first_name": "Alice"}, "text": "hello"}}));

    let letter = core.next_dead_letter().await;
    assert_eq!(letter.platform, "telegram");
    assert_eq!(letter.item_id, broken.to_string());
    let source = letter.source.expect("the chat is known");
    assert_eq!(source.chat_id, "42");
    assert!(
        letter.raw.contains("not-a-number"),
        "raw kept: {}",
        letter.raw
    );
    assert!(!letter.error.is_empty());
    wait_confirmed(&fake, broken).await;

    let next = fake.push_text(Chat::private(42), User::new(42, "Alice"), "still there?");
    assert_eq!(core.next_event().await.event_id, next.to_string());
    running.stop().await.unwrap();
}
