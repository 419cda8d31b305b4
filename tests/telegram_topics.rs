//! Forum topics through the real binary: two topics of one supergroup are two sessions (what
//! is said in one never reaches the model's view of the other), replies carry the topic's
//! `message_thread_id`, and the General topic (no thread id on the wire, "1" inside) is a
//! session of its own whose replies go out without a thread id, as the reference does.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, MessageSpec, User};
use telegram_support::{Rig, start};

const FORUM: i64 = -100_500;

/// Pushes `text` into `topic` (None: General); waits for the one reply; returns it.
async fn say(rig: &Rig, topic: Option<i64>, text: &str) -> fake_telegram::SentMessage {
    let mut spec = MessageSpec::text(Chat::forum(FORUM), User::new(7, "Bob"), text);
    if let Some(topic) = topic {
        spec = spec.in_topic(topic);
    }
    let before = rig.sent_to(FORUM).len();
    let requests = rig.model.requests().len();
    rig.telegram.push_message(spec);
    let sent = rig.wait_sent_to(FORUM, before + 1).await;
    assert_eq!(rig.model.requests().len(), requests + 1, "one model call");
    sent[before].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_forum_topic_is_its_own_session() {
    let seed: u64 = rand::random();
    println!("seed = {seed}");
    let secret = format!("PINEAPPLE{seed}");
    let rig = start("", "", &[]).await;

    let reply = say(&rig, Some(11), &format!("remember {secret}")).await;
    assert_eq!(reply.thread_id, Some(11));
    assert_eq!(reply.text, format!("echo: remember {secret}"));

    let reply = say(&rig, Some(22), "what did I ask you to remember?").await;
    assert_eq!(reply.thread_id, Some(22));
    let topic_b = rig.model_transcripts().pop().unwrap();
    assert!(
        !topic_b.contains(&secret),
        "topic 22 saw topic 11: {topic_b}"
    );

    let reply = say(&rig, None, "hello from General").await;
    assert_eq!(
        reply.thread_id, None,
        "General is addressed without a thread id"
    );
    assert_eq!(reply.text, "echo: hello from General");
    let general = rig.model_transcripts().pop().unwrap();
    assert!(
        !general.contains(&secret),
        "General saw topic 11: {general}"
    );
    assert!(!general.contains("what did I ask"), "General saw topic 22");

    // Back in topic 11: its own history is there, the other topics' is not.
    let reply = say(&rig, Some(11), "and again").await;
    assert_eq!(reply.thread_id, Some(11));
    let topic_a = rig.model_transcripts().pop().unwrap();
    assert!(
        topic_a.contains(&secret),
        "topic 11 kept its history: {topic_a}"
    );
    assert!(!topic_a.contains("what did I ask") && !topic_a.contains("hello from General"));

    // General again: still its own session, and still no thread id on the wire.
    let reply = say(&rig, None, "General once more").await;
    assert_eq!(reply.thread_id, None);
    let general = rig.model_transcripts().pop().unwrap();
    assert!(general.contains("hello from General") && !general.contains(&secret));

    let threads: Vec<Option<i64>> = rig.sent_to(FORUM).iter().map(|m| m.thread_id).collect();
    assert_eq!(threads, [Some(11), Some(22), None, Some(11), None]);
    rig.stop().await;
}
