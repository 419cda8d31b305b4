//! Webhook mode through the real binary: with `TELEGRAM_WEBHOOK_URL` and its secret set,
//! the daemon registers the webhook (setWebhook with the secret) instead of polling, serves
//! the URL's path, refuses updates without the right secret (401), answers an update posted
//! with it, answers a redelivered update only once, and keeps an undecodable one as a dead
//! letter, telling the user.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use serde_json::{Value, json};
use telegram_support::{WAIT, start};

const CHAT: i64 = 9001;
const SECRET: &str = "webhook-secret-0123456789";
const URL: &str = "https://bot.example.com/telegram/hook";

fn update(update_id: i64, message_id: i64, text: &str) -> Value {
    json!({"update_id": update_id, "message": {
        "message_id": message_id, "date": 1_700_000_000,
        "chat": {"id": CHAT, "type": "private", "first_name": "Ada"},
        "from": {"id": CHAT, "is_bot": false, "first_name": "Ada"},
        "text": text}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_updates_need_the_secret_and_are_answered_once() {
    let rig = start(
        "",
        "",
        &[
            ("TELEGRAM_WEBHOOK_URL", URL),
            ("TELEGRAM_WEBHOOK_SECRET", SECRET),
            ("TELEGRAM_WEBHOOK_HOST", "127.0.0.1"),
            ("TELEGRAM_WEBHOOK_PORT", "0"),
        ],
    )
    .await;
    let daemon = rig.daemon();
    let line =
        tokio::task::block_in_place(|| daemon.wait_for_line("webhook endpoint listening", WAIT))
            .expect("webhook endpoint served");
    let port: String = line
        .split("127.0.0.1:")
        .nth(1)
        .expect("bound address in the log")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let endpoint = format!("http://127.0.0.1:{port}/telegram/hook");
    rig.wait_for("setWebhook", |rig| {
        (rig.telegram.webhook().0 == URL).then_some(())
    })
    .await;
    assert_eq!(
        rig.telegram.webhook(),
        (URL.to_owned(), Some(SECRET.to_owned()))
    );
    assert!(rig.telegram.calls_of("getUpdates").is_empty(), "no polling");

    let http = reqwest::Client::new();
    let post = |body: Value, secret: Option<&str>| {
        let mut request = http.post(&endpoint).json(&body);
        if let Some(secret) = secret {
            request = request.header("X-Telegram-Bot-Api-Secret-Token", secret);
        }
        async move { request.send().await.expect("POST").status().as_u16() }
    };
    assert_eq!(post(update(1, 501, "no secret"), None).await, 401);
    assert_eq!(
        post(update(2, 502, "wrong secret"), Some("guess-0123456789")).await,
        401
    );
    assert_eq!(
        post(update(3, 503, "hi via webhook"), Some(SECRET)).await,
        200
    );
    assert_eq!(
        post(update(3, 503, "hi via webhook"), Some(SECRET)).await,
        200,
        "a redelivery is acknowledged"
    );
    rig.wait_sent_to(CHAT, 1).await;
    // An update that does not decode (`message_id` must be an integer) is kept as a dead
    // letter before the 200, and the user is told.
    let mut broken = update(5, 505, "garbled");
    broken["message"]["message_id"] = json!("garbled");
    assert_eq!(post(broken, Some(SECRET)).await, 200);
    let sent = rig.wait_sent_to(CHAT, 2).await;
    assert_eq!(
        sent[1].text.replace('\\', ""),
        hermesd::gateway::router::DEAD_LETTER_NOTICE
    );
    assert_eq!(post(update(4, 504, "second"), Some(SECRET)).await, 200);

    let sent = rig.wait_sent_to(CHAT, 3).await;
    let texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(
        (texts[0], texts[2]),
        ("echo: hi via webhook", "echo: second")
    );
    let saw = rig.model_saw();
    assert_eq!(
        saw,
        ["hi via webhook", "second"],
        "refused updates never reach the model"
    );
    let logs = rig.stop().await;
    assert!(
        !logs.join("\n").contains(SECRET),
        "the webhook secret never reaches the logs"
    );
}
