//! A group upgraded to a supergroup, through the real binary: Telegram refuses sends to the
//! old chat id with `migrate_to_chat_id`; the reply is sent once more to the supergroup (and
//! only there), and the conversation moves with it, so the next message in the supergroup
//! continues the same session.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, User};
use support::fake_model::{Reply, Step};
use telegram_support::{WAIT, start};

const GROUP: i64 = -42;
const SUPERGROUP: i64 = -1_000_000_042;
const USER: i64 = 7;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reply_follows_the_group_into_its_supergroup_and_so_does_the_session() {
    let rig = start("", "", &[]).await;
    rig.telegram.migrate_chat(GROUP, SUPERGROUP);
    rig.model.push_all([
        Step::Reply(Reply::text("noted: the password is swordfish")),
        Step::Reply(Reply::text("you said swordfish")),
    ]);
    let user = User::new(USER, "Ada");
    rig.telegram
        .push_text(Chat::group(GROUP), user.clone(), "remember swordfish");
    let sent = rig.wait_sent_to(SUPERGROUP, 1).await;
    assert_eq!(sent[0].text, "noted: the password is swordfish");
    let refused = rig
        .telegram
        .calls_of("sendMessage")
        .into_iter()
        .filter(|c| c.i64("chat_id") == Some(GROUP))
        .count();
    assert!(refused <= 1, "tried the old group at most once: {refused}");
    assert!(rig.sent_to(GROUP).is_empty());
    let daemon = rig.daemon();
    tokio::task::block_in_place(|| daemon.wait_for_line("its conversations follow", WAIT))
        .unwrap_or_else(|| panic!("the session never moved: {:#?}", daemon.logs()));

    rig.telegram
        .push_text(Chat::supergroup(SUPERGROUP), user, "what did I ask you?");
    rig.wait_sent_to(SUPERGROUP, 2).await;
    let transcripts = rig.model_transcripts();
    assert_eq!(transcripts.len(), 2);
    assert!(
        transcripts[1].contains("remember swordfish"),
        "the supergroup continues the group's session: {}",
        transcripts[1]
    );
    rig.stop().await;
}
