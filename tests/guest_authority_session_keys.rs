//! Group session keys use Telegram's stable user id, not the username, through the real
//! binary (issue 27). A conversation stored under the username key an older version (or
//! Python Hermes) wrote is continued by the same user id, and moved to the id key; someone
//! who later took over that username starts afresh instead of inheriting it.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, MessageSpec, User};
use hermesd::state::Store;
use telegram_support::{Rig, start};

const GROUP: i64 = -100_500;
const LEGACY_KEY: &str = "agent:main:telegram:group:-100500:alice";
const ID_KEY: &str = "agent:main:telegram:group:-100500:7";

/// Sends `text` in the group from `user`; waits for its answer; returns the whole message
/// list of the model request that answered it.
async fn ask(rig: &Rig, user: User, text: &str) -> String {
    let before = rig.sent_to(GROUP).len();
    rig.telegram
        .push_message(MessageSpec::text(Chat::group(GROUP), user, text));
    rig.wait_sent_to(GROUP, before + 1).await;
    rig.model_transcripts()
        .into_iter()
        .rev()
        .find(|t| t.contains(text))
        .expect("the model saw the message")
}

fn scope(rig: &Rig) -> String {
    let sessions = rig.home.path().join("sessions");
    std::fs::canonicalize(&sessions)
        .unwrap_or(sessions)
        .display()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recycled_username_never_inherits_a_group_session_and_its_owner_keeps_it() {
    let mut rig = start("", "", &[]).await;
    let alice = || User::new(7, "Alice").with_username("alice");
    ask(&rig, alice(), "remember the word pineapple").await;

    // As an older version stored it: the group conversation under the username key.
    rig.stop_daemon().await;
    let store = Store::open(&rig.home.path().join("state.db")).unwrap();
    let scope = scope(&rig);
    let routing = store.load_routing(&scope).await.unwrap();
    let (key, mut entry) = routing
        .into_iter()
        .find(|(key, _)| key.contains(":group:-100500:"))
        .expect("the group conversation is routed");
    let session_id = entry["session_id"].as_str().unwrap().to_owned();
    entry["session_key"] = LEGACY_KEY.into();
    store.delete_routing_entry(&scope, &key).await.unwrap();
    store
        .save_routing_entry(&scope, LEGACY_KEY, &entry)
        .await
        .unwrap();
    store.close().await;
    rig.start_daemon().await;

    // User 9001 has taken the username since: a fresh conversation, nothing inherited.
    let newcomer = User::new(9001, "Mallory").with_username("alice");
    let seen = ask(&rig, newcomer, "what word did I ask you to remember?").await;
    assert!(
        !seen.contains("pineapple"),
        "a recycled username inherited the session: {seen}"
    );

    // The same user id continues the stored conversation, now under its id key.
    let seen = ask(&rig, alice(), "and which word was it?").await;
    assert!(
        seen.contains("pineapple"),
        "the owner lost the session: {seen}"
    );
    rig.stop_daemon().await;
    let store = Store::open(&rig.home.path().join("state.db")).unwrap();
    let routing = store.load_routing(&scope).await.unwrap();
    store.close().await;
    assert_eq!(routing[ID_KEY]["session_id"], session_id.as_str());
    assert!(
        !routing.contains_key(LEGACY_KEY),
        "the username key was moved: {:?}",
        routing.keys().collect::<Vec<_>>()
    );
}
