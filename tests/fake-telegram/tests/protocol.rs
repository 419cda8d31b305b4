//! The fake speaks the Bot API as clients see it: case-insensitive methods, JSON, form and
//! multipart bodies, the `{"ok":..}` envelope, getMe's fields, offsets confirmed on arrival,
//! long polls that wait for `timeout` or an update, 401 for a wrong token, file downloads.

use std::time::Duration;

use fake_telegram::{Attachment, BOT_USERNAME, Chat, FakeTelegram, MessageSpec, TOKEN, User};
use serde_json::{Value, json};

async fn call(
    client: &reqwest::Client,
    fake: &FakeTelegram,
    method: &str,
    body: Value,
) -> (u16, Value) {
    let url = format!("{}/bot{TOKEN}/{method}", fake.url());
    let response = client.post(url).json(&body).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test]
async fn methods_bodies_and_envelopes() {
    let fake = FakeTelegram::start().await;
    let client = reqwest::Client::new();
    let (status, me) = call(&client, &fake, "GetMe", json!({})).await;
    assert_eq!(status, 200);
    for field in [
        "id",
        "is_bot",
        "username",
        "can_join_groups",
        "can_read_all_group_messages",
        "supports_inline_queries",
        "has_main_web_app",
    ] {
        assert!(me["result"].get(field).is_some(), "getMe lacks {field}");
    }
    assert_eq!(me["result"]["username"], BOT_USERNAME);

    let form = client
        .post(format!("{}/bot{TOKEN}/sendmessage", fake.url()))
        .form(&[("chat_id", "42"), ("text", "from a form")])
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 200);
    let part = reqwest::multipart::Part::bytes(vec![1u8; 10]).file_name("a.png");
    let multipart = reqwest::multipart::Form::new()
        .text("chat_id", "42")
        .part("photo", part);
    let upload = client
        .post(format!("{}/bot{TOKEN}/SENDPHOTO", fake.url()))
        .multipart(multipart)
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status(), 200);
    assert_eq!(fake.calls_of("sendPhoto")[0].files[0].bytes, 10);
    assert_eq!(fake.sent_messages()[0].text, "from a form");

    let (status, error) = call(&client, &fake, "noSuchMethod", json!({})).await;
    assert_eq!((status, error["ok"].clone()), (404, json!(false)));
    let wrong = client
        .post(format!("{}/botWRONG/getMe", fake.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
}

#[tokio::test]
async fn updates_stay_until_an_offset_confirms_them_and_long_polls_wait() {
    let fake = FakeTelegram::start().await;
    let client = reqwest::Client::new();
    let first = fake.push_text(Chat::private(1), User::new(1, "a"), "one");
    let (_, answer) = call(&client, &fake, "getUpdates", json!({"offset": 0})).await;
    assert_eq!(answer["result"][0]["update_id"], first);
    let (_, again) = call(&client, &fake, "getUpdates", json!({"offset": 0})).await;
    assert_eq!(
        again["result"].as_array().unwrap().len(),
        1,
        "unconfirmed updates are delivered again"
    );
    let (_, empty) = call(
        &client,
        &fake,
        "getUpdates",
        json!({"offset": first + 1, "timeout": 0}),
    )
    .await;
    assert_eq!(empty["result"], json!([]));
    assert_eq!(fake.pending_updates(), 0, "the offset confirmed it");

    // A long poll returns as soon as an update arrives, well before its timeout.
    let poll = call(
        &client,
        &fake,
        "getUpdates",
        json!({"offset": first + 1, "timeout": 50}),
    );
    let push = async {
        fake.wait_for_calls("getUpdates", 4, Duration::from_secs(30))
            .await
            .unwrap();
        fake.push_text(Chat::private(1), User::new(1, "a"), "two")
    };
    let ((_, answer), second) =
        tokio::time::timeout(Duration::from_secs(30), async { tokio::join!(poll, push) })
            .await
            .unwrap();
    assert_eq!(answer["result"][0]["update_id"], second);
}

#[tokio::test]
async fn pushed_files_are_served_through_get_file() {
    let fake = FakeTelegram::start().await;
    let client = reqwest::Client::new();
    let spec = MessageSpec::text(Chat::private(1), User::new(1, "a"), "")
        .with_attachment(Attachment::Voice { bytes: vec![5; 64] });
    fake.push_message(spec);
    let (_, updates) = call(&client, &fake, "getUpdates", json!({})).await;
    let file_id = updates["result"][0]["message"]["voice"]["file_id"].clone();
    let (_, file) = call(&client, &fake, "getFile", json!({"file_id": file_id})).await;
    let path = file["result"]["file_path"].as_str().unwrap();
    let bytes = client
        .get(format!("{}/file/bot{TOKEN}/{path}", fake.url()))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(bytes.to_vec(), vec![5; 64]);
}

/// The documented rules the fake holds clients to: setWebhook's URL and secret, group →
/// supergroup migration, upload size limits, flood control on getUpdates, 404 elsewhere.
#[tokio::test]
async fn documented_refusals() {
    let fake = FakeTelegram::start().await;
    let client = reqwest::Client::new();
    for (params, ok) in [
        (
            json!({"url": "https://h.example/hook", "secret_token": "a-Z_9"}),
            true,
        ),
        (json!({"url": "http://h.example/hook"}), false),
        (json!({"url": "https://h.example:8080/hook"}), false),
        (json!({"url": "https://h.example:8443/hook"}), true),
        (
            json!({"url": "https://h.example/hook", "secret_token": "no spaces"}),
            false,
        ),
        (
            json!({"url": "https://h.example/hook", "secret_token": "x".repeat(257)}),
            false,
        ),
    ] {
        let (status, _) = call(&client, &fake, "setWebhook", params.clone()).await;
        assert_eq!(status == 200, ok, "{params}");
    }

    fake.migrate_chat(-5, -1005);
    let (status, moved) = call(
        &client,
        &fake,
        "sendMessage",
        json!({"chat_id": -5, "text": "x"}),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(moved["parameters"]["migrate_to_chat_id"], -1005);

    let part = reqwest::multipart::Part::bytes(vec![0u8; 10 * 1024 * 1024 + 1]).file_name("a.jpg");
    let form = reqwest::multipart::Form::new()
        .text("chat_id", "42")
        .part("photo", part);
    let big_photo = client
        .post(format!("{}/bot{TOKEN}/sendPhoto", fake.url()))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(big_photo.status(), 400, "photos are capped at 10 MB");

    fake.limit_get_updates(2);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(
            call(&client, &fake, "getUpdates", json!({"timeout": 0}))
                .await
                .0,
        );
    }
    assert_eq!(statuses, [200, 200, 429]);
    assert_eq!(fake.get_updates_times().len(), 3, "every call is counted");

    let stray = client
        .get(format!("{}/api/bot{TOKEN}/getMe", fake.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(stray.status(), 404);
    assert_eq!(fake.calls_of("(unrouted)").len(), 1);
}

/// Two callers polling one bot: the request that was waiting is ended with 409 Conflict as
/// soon as another arrives, and the newer one is served.
#[tokio::test]
async fn a_second_get_updates_ends_the_waiting_one_with_409() {
    let fake = FakeTelegram::start().await;
    let client = reqwest::Client::new();
    let waiting = call(&client, &fake, "getUpdates", json!({"timeout": 50}));
    let overtaking = async {
        fake.wait_for_calls("getUpdates", 1, Duration::from_secs(30))
            .await
            .unwrap();
        call(&client, &fake, "getUpdates", json!({"timeout": 0})).await
    };
    let ((status, answer), (newer_status, newer)) =
        tokio::time::timeout(Duration::from_secs(30), async {
            tokio::join!(waiting, overtaking)
        })
        .await
        .unwrap();
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["ok"], false);
    assert!(
        answer["description"]
            .as_str()
            .unwrap()
            .starts_with("Conflict: terminated by other getUpdates request"),
        "{answer}"
    );
    assert_eq!((newer_status, newer["result"].clone()), (200, json!([])));
}
