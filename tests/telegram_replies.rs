//! Reply quoting through the real binary: `reply_to_mode: first` (the default) quotes the
//! user's message on the first chunk of a long reply only, `all` on every chunk; and when
//! Telegram answers "message to be replied not found" the reply goes out once more without
//! the quote instead of being lost.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, Fault, MessageSpec, SentMessage, User};
use support::fake_model::Step;
use telegram_support::{Rig, start};

const CHAT: i64 = 9001;

/// "(i/n)" at the end of a chunk, MarkdownV2 escapes removed.
fn part(text: &str) -> Option<(usize, usize)> {
    let plain = text.replace('\\', "");
    let (_, tail) = plain.rsplit_once('(')?;
    let (i, n) = tail.strip_suffix(')')?.split_once('/')?;
    Some((i.parse().ok()?, n.parse().ok()?))
}

/// Asks for a reply of about 9,000 characters; returns the message id and every chunk.
async fn long_reply(rig: &Rig) -> (i64, Vec<SentMessage>) {
    let words: String = (0..1500).map(|i| format!("word{i} ")).collect();
    rig.model.push(Step::text(words.trim_end()));
    let spec = MessageSpec::text(Chat::private(CHAT), User::new(CHAT, "Ada"), "write a lot");
    let (_, message_id) = rig.telegram.push_message(spec);
    let chunks = rig
        .wait_for("the last chunk", |rig| {
            let sent = rig.sent_to(CHAT);
            let done = sent
                .last()
                .and_then(|m| part(&m.text))
                .is_some_and(|(i, n)| i == n);
            done.then_some(sent)
        })
        .await;
    let parts: Vec<_> = chunks.iter().map(|m| part(&m.text)).collect();
    let n = chunks.len();
    assert!(n >= 3, "{parts:?}");
    assert_eq!(parts, (1..=n).map(|i| Some((i, n))).collect::<Vec<_>>());
    (message_id, chunks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_quotes_the_first_chunk_and_all_quotes_every_chunk() {
    let rig = start("", "", &[]).await;
    let (message_id, chunks) = long_reply(&rig).await;
    let quoted: Vec<Option<i64>> = chunks.iter().map(|m| m.reply_to).collect();
    let mut expected = vec![None; chunks.len()];
    expected[0] = Some(message_id);
    assert_eq!(quoted, expected, "first: only the first chunk quotes");
    rig.stop().await;

    let rig = start("", "", &[("TELEGRAM_REPLY_TO_MODE", "all")]).await;
    let (message_id, chunks) = long_reply(&rig).await;
    assert!(
        chunks.iter().all(|m| m.reply_to == Some(message_id)),
        "all: every chunk quotes {message_id}: {:?}",
        chunks.iter().map(|m| m.reply_to).collect::<Vec<_>>()
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_quote_target_does_not_lose_the_reply() {
    let rig = start("", "", &[]).await;
    rig.telegram.fail_next(
        "sendMessage",
        Fault::BadRequest("Bad Request: message to be replied not found".into()),
        1,
    );
    rig.telegram
        .push_text(Chat::private(CHAT), User::new(CHAT, "Ada"), "still there?");
    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].text, "echo: still there?");
    assert_eq!(sent[0].reply_to, None, "sent again without the quote");
    let attempts = rig.telegram.calls_of("sendMessage");
    assert_eq!(attempts.len(), 2, "one refused attempt, one resend");
    assert!(attempts[0].json("reply_parameters").is_some());
    assert_eq!(attempts[0].status, Some(400));
    rig.stop().await;
}
