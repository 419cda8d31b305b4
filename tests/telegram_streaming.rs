//! Edit-in-place streaming through the real binary: with `streaming.enabled`, a slowly
//! streamed answer opens a preview message once `buffer_threshold` characters arrived and
//! edits that same message as more text comes (each edit a longer prefix of the answer, with
//! the cursor). The final reply goes through the delivery ledger (exactly once, across
//! crashes), so the preview is then deleted and the chat is left holding exactly one
//! message: the full answer.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::time::Duration;

use fake_telegram::{Chat, User};
use support::fake_model::{Reply, Step};
use telegram_support::start;

const CHAT: i64 = 9001;
const CURSOR: &str = " ▉";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_is_previewed_by_edits_and_delivered_once() {
    let tail = "streaming:\n  enabled: true\n  edit_interval: 0.1\n  buffer_threshold: 10\n";
    let rig = start("", tail, &[]).await;
    let answer = "The quick brown fox jumps over the lazy dog and then naps";
    rig.model.push(Step::Slow {
        reply: Reply::text(answer),
        delay: Duration::from_millis(300),
    });
    rig.telegram.push_text(
        Chat::private(CHAT),
        User::new(CHAT, "Ada"),
        "tell me a story",
    );

    let sent = rig
        .wait_for("the final answer", |rig| {
            let sent = rig.sent_to(CHAT);
            sent.iter().any(|m| m.text == answer).then_some(sent)
        })
        .await;
    assert!(rig.model.requests()[0].is_stream(), "the turn streams");

    // The preview: the first message, plain text, a prefix of the answer with the cursor.
    assert_eq!(sent.len(), 2, "a preview and the final reply: {sent:#?}");
    let preview = &sent[0];
    assert!(preview.parse_mode.is_none(), "{preview:?}");
    let shown = preview
        .text
        .strip_suffix(CURSOR)
        .expect("cursor on the preview");
    assert!(answer.starts_with(shown) && shown.len() >= 10, "{shown:?}");
    let preview_id = rig.telegram.sent_log_from(0)[0].message_id;

    // Edits of that message only, each showing more of the answer.
    let edits = rig.telegram.calls_of("editMessageText");
    assert!(!edits.is_empty(), "the preview was edited as text arrived");
    let mut shown_len = shown.len();
    for edit in &edits {
        assert_eq!(edit.i64("message_id"), Some(preview_id), "{edit:?}");
        assert_eq!(edit.status, Some(200), "{edit:?}");
        let text = edit.str("text").unwrap();
        let text = text.strip_suffix(CURSOR).expect("cursor while streaming");
        assert!(answer.starts_with(text), "{text:?} is not a prefix");
        assert!(text.len() > shown_len, "each edit shows more: {text:?}");
        shown_len = text.len();
    }

    // The preview made way for the ledger's reply: one message left, the full answer.
    let deleted = rig
        .wait_for("the preview deleted", |rig| {
            let calls = rig.telegram.calls_of("deleteMessage");
            (!calls.is_empty()).then_some(calls)
        })
        .await;
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0].i64("message_id"), Some(preview_id));
    let left: Vec<String> = rig
        .telegram
        .bot_messages(CHAT)
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(left, [answer], "exactly one message remains");
    assert_eq!(sent[1].text, answer);
    assert_eq!(rig.model.requests().len(), 1);
    rig.stop().await;
}
