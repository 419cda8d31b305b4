//! Start-up and configuration: the command menu (sanitised to Telegram's rules, checked by
//! the fake), webhook mode (setWebhook, 401 without the secret, 200 only once recorded),
//! settings errors, and tokens never shown in Debug output or errors.

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use fake_telegram::{FakeTelegram, TOKEN};
use hermes_adapter::{Adapter, Outbound, OutboundKind, RecordOutcome};
use hermes_telegram::{SECRET_HEADER, Settings, TelegramAdapter};
use serde_json::json;
use support::{TestCore, WAIT, settings, settings_with_env, start};
use tower::ServiceExt;

#[tokio::test]
async fn the_command_menu_is_sanitised_and_registered() {
    let fake = FakeTelegram::start().await;
    let core = TestCore::new();
    let mut settings = settings(&fake, json!({}));
    settings.commands = vec![
        ("New".into(), "Start a new session".into()),
        ("reload-mcp".into(), "Reload MCP servers".into()),
        ("/Status".into(), "".into()),
        ("new".into(), "duplicate".into()),
        ("???".into(), "nothing usable".into()),
        (
            "a_very_long_command_name_that_goes_past_32".into(),
            "d".repeat(300),
        ),
    ];
    let running = start(settings, &core);
    fake.wait_for_calls("setMyCommands", 1, WAIT).await.unwrap();
    let names: Vec<String> = fake
        .commands()
        .iter()
        .map(|c| c["command"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "new",
            "reload_mcp",
            "status",
            "a_very_long_command_name_that_go"
        ]
    );
    assert_eq!(fake.commands()[2]["description"], "status");
    assert_eq!(
        fake.commands()[3]["description"]
            .as_str()
            .unwrap()
            .chars()
            .count(),
        256
    );
    running.stop().await.unwrap();
}

fn webhook_env() -> [(&'static str, &'static str); 2] {
    [
        (
            "TELEGRAM_WEBHOOK_URL",
            "https://bot.example.com/telegram/webhook",
        ),
        ("TELEGRAM_WEBHOOK_SECRET", "s3cret-hook"),
    ]
}

fn post(secret: Option<&str>, body: serde_json::Value) -> Request<Body> {
    let mut request = Request::post("/telegram/webhook").header("content-type", "application/json");
    if let Some(secret) = secret {
        request = request.header(SECRET_HEADER, secret);
    }
    request.body(Body::from(body.to_string())).unwrap()
}

fn dm_update(update_id: i64, text: &str) -> serde_json::Value {
    json!({"update_id": update_id, "message": {"message_id": 5, "date": 1_700_000_000,
        "chat": {"id": 42, "type": "private", "first_name": "A"},
        "from": {"id": 42, "is_bot": false, "first_name": "A"}, "text": text,
        "entities": [{"type": "bot_command", "offset": 0, "length": text.len()}]}})
}

#[tokio::test]
async fn webhook_mode_checks_the_secret_and_answers_200_only_once_recorded() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    let running = start(settings_with_env(&fake, json!({}), &webhook_env()), &core);
    let router = running.adapter.webhook_router().expect("webhook mode");
    fake.wait_for_calls("setWebhook", 1, WAIT).await.unwrap();
    assert_eq!(
        fake.webhook(),
        (
            "https://bot.example.com/telegram/webhook".into(),
            Some("s3cret-hook".into())
        )
    );
    assert!(
        fake.calls_of("getUpdates").is_empty(),
        "no polling in webhook mode"
    );

    let missing = router
        .clone()
        .oneshot(post(None, dm_update(1, "/a")))
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
    let wrong = router
        .clone()
        .oneshot(post(Some("nope"), dm_update(1, "/a")))
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);

    let ok = router
        .clone()
        .oneshot(post(Some("s3cret-hook"), dm_update(2, "/b")))
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    assert_eq!(core.next_event().await.event_id, "2");

    core.answer_next(RecordOutcome::Failed, 1);
    let failed = router
        .clone()
        .oneshot(post(Some("s3cret-hook"), dm_update(3, "/c")))
        .await
        .unwrap();
    assert_eq!(
        failed.status(),
        StatusCode::INTERNAL_SERVER_ERROR,
        "Telegram must retry"
    );
    assert_eq!(core.next().await.1, RecordOutcome::Failed);
    running.stop().await.unwrap();

    let stopped = router
        .oneshot(post(Some("s3cret-hook"), dm_update(4, "/d")))
        .await
        .unwrap();
    assert_eq!(stopped.status(), StatusCode::SERVICE_UNAVAILABLE);
}

#[test]
fn settings_errors_name_their_keys_and_come_all_at_once() {
    let env = [
        ("TELEGRAM_WEBHOOK_URL", "https://x/hook"),
        ("TELEGRAM_REQUIRE_MENTION", "maybe"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let extra = json!({"mention_patterns": ["(unclosed"], "ignored_threads": "12,abc", "reply_to_mode": "sometimes"});
    let errors = Settings::from_config("", extra.as_object().unwrap(), &env).unwrap_err();
    let joined = errors.join("\n");
    for needle in [
        "TELEGRAM_BOT_TOKEN",
        "TELEGRAM_WEBHOOK_SECRET",
        "TELEGRAM_REQUIRE_MENTION",
        "mention_patterns",
        "ignored_threads",
        "reply_to_mode",
    ] {
        assert!(joined.contains(needle), "{needle} missing from:\n{joined}");
    }
}

#[test]
fn env_wins_over_extra_when_set_and_non_empty() {
    let extra =
        json!({"require_mention": false, "allowed_chats": ["-1"], "exclusive_bot_mentions": false});
    let env = [
        ("TELEGRAM_REQUIRE_MENTION", "true"),
        ("TELEGRAM_ALLOWED_CHATS", ""),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let settings = Settings::from_config("1:abc", extra.as_object().unwrap(), &env).unwrap();
    assert!(settings.require_mention);
    assert_eq!(
        settings.allowed_chats.iter().collect::<Vec<_>>(),
        ["-1"],
        "an empty env value does not override"
    );
    assert!(!settings.exclusive_bot_mentions);
    assert_eq!(settings.endpoints, hermes_telegram::Endpoints::default());
    assert_eq!(
        settings.max_media_bytes,
        20 * 1024 * 1024,
        "cloud getFile cap"
    );
}

#[tokio::test]
async fn tokens_never_appear_in_debug_output_or_errors() {
    let fake = FakeTelegram::start().await;
    let settings = settings_with_env(&fake, json!({}), &webhook_env());
    let adapter = TelegramAdapter::new(settings.clone());
    let mut shown = vec![format!("{settings:?}"), format!("{adapter:?}")];

    fake.fail_next("sendMessage", fake_telegram::Fault::Unauthorized, 1);
    let outbound = Outbound {
        chat_id: "42".into(),
        thread_id: None,
        kind: OutboundKind::Text {
            text: "x".into(),
            reply_to: None,
            plain: false,
        },
    };
    shown.push(format!("{:?}", adapter.send(outbound.clone()).await));
    let url = fake.url();
    drop(fake);
    let gone = Settings::from_config(
        TOKEN,
        json!({"base_url": url}).as_object().unwrap(),
        &Default::default(),
    )
    .unwrap();
    let gone = TelegramAdapter::new(gone);
    let result = gone.send(outbound).await;
    shown.push(format!("{result:?}"));
    let core = TestCore::new();
    shown.push(format!("{:?}", gone.run(core.ctx.clone()).await));
    for text in shown {
        assert!(!text.contains(TOKEN), "token leaked: {text}");
        assert!(
            !text.contains("s3cret-hook"),
            "webhook secret leaked: {text}"
        );
    }
}
