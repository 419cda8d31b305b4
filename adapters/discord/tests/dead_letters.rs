//! A MESSAGE_CREATE dispatch the adapter cannot decode reaches the core as a dead letter
//! (raw payload, id, channel and author) and the dispatches after it still flow.

mod support;

use fake_discord::Incoming;
use serde_json::json;
use support::Harness;

#[tokio::test]
async fn an_undecodable_message_create_becomes_a_dead_letter() {
    let mut h = Harness::start(json!({}), &[]).await;
    h.ready(1).await;
    let user = h.fake.new_user("alice", false, &[]);
    let dm = h.fake.add_dm_channel(&user);
    // `content` is documented as a string; a number does not decode.
    h.fake.dispatch(
        "MESSAGE_CREATE",
        json!({"id": "777", "channel_id": dm, "content": 7, "type": 0,
            "author": {"id": user.id, "username": user.name}}),
    );
    let letter = h.core.next_dead_letter().await;
    assert_eq!(letter.platform, "discord");
    assert_eq!(letter.item_id, "MESSAGE_CREATE:777");
    let source = letter.source.expect("the channel is known");
    assert_eq!(source.chat_id, dm);
    assert_eq!(source.user_id.as_deref(), Some(user.id.as_str()));
    assert!(letter.raw.contains("777"));

    let id = h
        .fake
        .push_message(Incoming::new(&dm, &user, "still there?"));
    assert_eq!(h.next_event().await.event_id, id);
}
