//! Telegram end to end: the real `hermesd run` binary polls a wire-level fake Bot API and
//! answers through the fake model. An unknown user gets a pairing code and `hermesd pairing
//! approve` unlocks them; a 10,000-character reply arrives in chunks within Telegram's
//! 4096 UTF-16 units; a MarkdownV2 rejection falls back to plain text; flood control
//! delays a reply without losing or doubling it.

mod support;

use std::time::Duration;

use fake_telegram::{Chat, FakeTelegram, Fault, TOKEN, User};
use support::daemon::{Daemon, base_env};
use support::fake_model::{FakeModel, Step};

const WAIT: Duration = Duration::from_secs(60);

/// Waits until `chat` has received at least `n` messages; returns their texts.
async fn texts_to(telegram: &FakeTelegram, chat: i64, n: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        // Subscribed before reading, so an answer landing in between is not missed.
        let change =
            telegram.next_change(deadline.saturating_duration_since(tokio::time::Instant::now()));
        let texts: Vec<String> = telegram
            .sent_messages()
            .into_iter()
            .filter(|m| m.chat_id == chat)
            .map(|m| m.text)
            .collect();
        if texts.len() >= n {
            return texts;
        }
        assert!(
            change.await,
            "chat {chat} got {} of {n} messages: {texts:#?}",
            texts.len()
        );
    }
}

fn seeded_long_text(seed: u64) -> String {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let words = ["hello", "世界", "😀", "naïve", "données", "🇺🇳", "text"];
    let mut text = String::new();
    while text.chars().count() < 10_000 {
        text.push_str(words[rng.random_range(0..words.len())]);
        text.push(if rng.random_ratio(1, 15) { '\n' } else { ' ' });
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_long_replies_markdown_fallback_and_flood_control() {
    let seed: u64 = rand::random();
    println!("seed = {seed}");
    let telegram = FakeTelegram::start().await;
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "telegram:\n  enabled: true\n  extra:\n    base_url: {}\n    poll_timeout_seconds: 2\n",
            telegram.url()
        ),
    )
    .unwrap();
    let mut env = base_env(home.path());
    env.extend(
        [
            ("TELEGRAM_BOT_TOKEN", TOKEN.to_owned()),
            ("API_SERVER_ENABLED", "false".to_owned()),
            ("OPENAI_BASE_URL", model.base_url()),
            ("OPENAI_API_KEY", "sk-test".to_owned()),
            ("HERMES__MODEL__PROVIDER", "openai".to_owned()),
            ("HERMES__MODEL__DEFAULT", "fake-model".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let (h, e) = (home.path().to_path_buf(), env.clone());
    let daemon = tokio::task::spawn_blocking(move || Daemon::start(&h, &e))
        .await
        .unwrap();
    let (chat, user) = (Chat::private(9001), User::new(9001, "Ada"));

    // An unknown user: a pairing code, nothing reaches the model.
    telegram.push_text(chat.clone(), user.clone(), "hi there");
    let first =
        match tokio::time::timeout(Duration::from_secs(20), texts_to(&telegram, 9001, 1)).await {
            Ok(texts) => texts,
            Err(_) => panic!(
                "no pairing reply; sent {:?}; daemon log {:#?}",
                telegram
                    .calls_of("sendMessage")
                    .iter()
                    .map(|c| c.params.clone())
                    .collect::<Vec<_>>(),
                daemon.logs()
            ),
        };
    assert!(first[0].contains("pairing code"), "{first:?}");
    let code = first[0]
        .split('`')
        .nth(1)
        .expect("code in backticks")
        .to_owned();
    assert!(model.requests().is_empty());
    let approve = std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["pairing", "approve", "telegram", &code])
        .env("HERMES_HOME", home.path())
        .env("HERMES_TEST_ISOLATION", "1")
        .output()
        .unwrap();
    assert!(approve.status.success(), "{approve:?}");

    // Now a conversation.
    telegram.push_text(chat.clone(), user.clone(), "hello again");
    let texts = texts_to(&telegram, 9001, 2).await;
    assert_eq!(texts[1], "echo: hello again");

    // A long reply in chunks, each within the limit (the fake enforces it too).
    let long = seeded_long_text(seed);
    model.push(Step::text(long.clone()));
    telegram.push_text(chat.clone(), user.clone(), "write a lot");
    let before = texts.len();
    let texts = loop {
        let texts = texts_to(&telegram, 9001, before + 1).await;
        // MarkdownV2 escapes the parentheses of the " (i/N)" suffix.
        let last = texts.last().unwrap().replace('\\', "");
        let done = last
            .rsplit_once('(')
            .and_then(|(_, s)| s.strip_suffix(')'))
            .and_then(|s| s.split_once('/'))
            .is_some_and(|(i, n)| i == n);
        if done {
            break texts;
        }
        texts_to(&telegram, 9001, texts.len() + 1).await;
    };
    let chunks = &texts[before..];
    assert!(chunks.len() >= 3, "seed {seed}: {} chunks", chunks.len());
    for (i, chunk) in chunks.iter().enumerate() {
        let units = fake_telegram::visible_utf16_len(chunk).unwrap_or(usize::MAX);
        assert!(
            units <= 4096,
            "seed {seed}: chunk {i} has {units} UTF-16 units"
        );
    }

    // Telegram refuses the formatting once: the same reply goes out as plain text.
    telegram.fail_next("sendMessage", Fault::CantParseEntities, 1);
    telegram.push_text(chat.clone(), user.clone(), "format me");
    let texts = texts_to(&telegram, 9001, texts.len() + 1).await;
    let fallback = telegram
        .sent_messages()
        .into_iter()
        .rfind(|m| m.chat_id == 9001)
        .unwrap();
    assert!(fallback.parse_mode.is_none(), "{fallback:?}");
    assert!(
        texts.last().unwrap().contains("echo: format me"),
        "{texts:?}"
    );

    // Flood control: the reply waits out retry_after and arrives exactly once.
    telegram.fail_next("sendMessage", Fault::TooManyRequests { retry_after: 1 }, 1);
    telegram.push_text(chat.clone(), user.clone(), "after the flood");
    let texts = texts_to(&telegram, 9001, texts.len() + 1).await;
    let (status, logs) = tokio::task::spawn_blocking(move || daemon.terminate())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0), "{logs:#?}");
    let copies = telegram
        .sent_messages()
        .iter()
        .filter(|m| m.text.contains("after the flood"))
        .count();
    assert_eq!(copies, 1, "{texts:?}");
    assert!(
        !logs.join("\n").contains(TOKEN),
        "the token never reaches the logs"
    );
}
