//! A Telegram update hermesd cannot decode, through the real binary on the fake Bot API:
//! its raw payload is kept in state.db (`hermesd_dead_letters`), `/metrics` counts it, the
//! log names it, the user is told in one line, the offset moves past it and the next
//! message is answered. It used to be skipped with a warning and nothing else.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, User};
use serde_json::json;
use telegram_support::{WAIT, start};

const CHAT: i64 = 9001;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_update_is_kept_counted_and_the_user_told() {
    let rig = start("", "", &[]).await;
    // `message_id` must be an integer (https://core.telegram.org/bots/api#message).
    let broken = rig
        .telegram
        .push_update(json!({"message": {"message_id": "garbled",
        "date": 0, "chat": {"id": CHAT, "type": "private"},
        "from": {"id": CHAT, "is_bot": false, "first_name": "Ada"}, "text": "hello"}}));

    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert_eq!(
        sent[0].text.replace('\\', ""),
        hermesd::gateway::router::DEAD_LETTER_NOTICE
    );
    rig.wait_confirmed(broken).await;

    let conn = rusqlite::Connection::open(rig.home.path().join("state.db")).unwrap();
    let (item, chat, raw): (String, Option<String>, String) = conn
        .query_row(
            "SELECT item_id, chat_id, raw FROM hermesd_dead_letters WHERE platform = 'telegram'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("the dead letter row");
    assert_eq!(item, broken.to_string());
    assert_eq!(chat.as_deref(), Some("9001"));
    assert!(raw.contains("garbled"), "{raw}");

    let metrics = reqwest::get(format!("{}/metrics", rig.daemon().admin_url()))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics text");
    assert!(
        metrics.lines().any(|l| l == "hermesd_dead_letters_total 1"),
        "{metrics}"
    );
    let logged = rig.daemon().wait_for_line_where(
        |l| {
            l.contains("ERROR")
                && l.contains("could not be decoded")
                && l.contains(&broken.to_string())
        },
        WAIT,
    );
    assert!(logged.is_some(), "{:#?}", rig.daemon().logs());

    rig.telegram
        .push_text(Chat::private(CHAT), User::new(CHAT, "Ada"), "hello again");
    let sent = rig.wait_sent_to(CHAT, 2).await;
    assert_eq!(sent[1].text.replace('\\', ""), "echo: hello again");
    rig.stop().await;
}
