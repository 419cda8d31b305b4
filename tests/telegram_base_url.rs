//! `telegram.extra.base_url` as Hermes users write it, through the real binary: the
//! python-telegram-bot prefix that already ends in `/bot` (what a local Bot API server
//! config holds: `http://localhost:8081/bot`), the `{token}` placeholder, and the bare
//! address hermesd used to require all answer messages; a prefix where no Bot API answers
//! stops the adapter for good at getMe with a log line naming the URL it tried (the token
//! masked), instead of restarting forever.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, TOKEN, User};
use support::fake_model::{Reply, Step};
use telegram_support::{WAIT, start_at};

const CHAT: i64 = 9001;

async fn answers_with_base_url(base_url: impl FnOnce(&str) -> String) {
    let rig = start_at(base_url, "", "", &[]).await;
    rig.model.push(Step::Reply(Reply::text("pong")));
    rig.telegram
        .push_text(Chat::private(CHAT), User::new(CHAT, "Ada"), "ping");
    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert_eq!(sent[0].text, "pong");
    let unrouted = rig.telegram.calls_of("(unrouted)");
    assert!(
        unrouted.is_empty(),
        "every call found the Bot API: {unrouted:?}"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_ending_in_bot_gets_the_token_appended() {
    answers_with_base_url(|url| format!("{url}/bot")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_placeholder_is_filled_in() {
    answers_with_base_url(|url| format!("{url}/bot{{token}}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_server_address_still_works() {
    answers_with_base_url(|url| url.to_owned()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_at_get_me_is_fatal_and_names_the_url_tried() {
    let rig = start_at(|url| format!("{url}/api/bot"), "", "", &[]).await;
    let daemon = rig.daemon();
    let line = tokio::task::block_in_place(|| daemon.wait_for_line("will not be restarted", WAIT))
        .unwrap_or_else(|| panic!("no fatal line: {:#?}", daemon.logs()));
    let shape = format!("{}/api/bot<token>/getMe", rig.telegram.url());
    assert!(line.contains(&shape), "{line}");
    assert!(line.contains("404"), "{line}");
    assert!(!line.contains(TOKEN), "{line}");
    let tried = rig.telegram.calls_of("(unrouted)");
    assert_eq!(tried.len(), 1, "getMe once, no restart loop: {tried:?}");
    assert_eq!(
        tried[0].str("path").as_deref(),
        Some(format!("/api/bot{TOKEN}/getMe").as_str())
    );
    let ready = reqwest::get(format!("{}/ready", rig.daemon().admin_url()))
        .await
        .expect("GET /ready");
    assert_eq!(ready.status().as_u16(), 503, "the gateway is not ready");
    rig.stop().await;
}
