//! Edit-in-place streaming through the real binary: with `streaming.enabled`, a slowly
//! streamed answer opens a preview message once `buffer_threshold` characters arrived and
//! edits that same message as more text comes (each edit a longer prefix of the answer, with
//! the cursor). The final reply goes through the delivery ledger as one more edit of the
//! preview, so the chat is left holding exactly one message, the full answer, and that
//! holds across a crash during the final edit (the recovered reply edits the preview again
//! instead of sending a second message). An answer longer than one message is sent as new
//! messages and the preview removed.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::time::Duration;

use fake_telegram::{Chat, Fault, User};
use support::fake_model::{Reply, Step};
use telegram_support::start;

const CHAT: i64 = 9001;
const CURSOR: &str = " ▉";

fn ask(rig: &telegram_support::Rig) {
    rig.telegram.push_text(
        Chat::private(CHAT),
        User::new(CHAT, "Ada"),
        "tell me a story",
    );
}

fn left_in_chat(rig: &telegram_support::Rig) -> Vec<String> {
    rig.telegram
        .bot_messages(CHAT)
        .into_iter()
        .map(|m| m.text)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_is_previewed_by_edits_and_finished_in_place() {
    let tail = "streaming:\n  enabled: true\n  edit_interval: 0.1\n  buffer_threshold: 10\n";
    let rig = start("", tail, &[]).await;
    let answer = "The quick brown fox jumps over the lazy dog and then naps";
    rig.model.push(Step::Slow {
        reply: Reply::text(answer),
        delay: Duration::from_millis(300),
    });
    ask(&rig);

    rig.wait_for("the preview edited into the answer", |rig| {
        (left_in_chat(rig) == [answer]).then_some(())
    })
    .await;
    assert!(rig.model.requests()[0].is_stream(), "the turn streams");

    // The preview: the only message sent, plain text, a prefix of the answer with the cursor.
    let sent = rig.sent_to(CHAT);
    assert_eq!(sent.len(), 1, "only the preview is sent: {sent:#?}");
    let preview = &sent[0];
    assert!(preview.parse_mode.is_none(), "{preview:?}");
    let shown = preview
        .text
        .strip_suffix(CURSOR)
        .expect("cursor on the preview");
    assert!(answer.starts_with(shown) && shown.len() >= 10, "{shown:?}");
    let preview_id = rig.telegram.sent_log_from(0)[0].message_id;

    // Edits of that message only, each showing more of the answer; the last one is the
    // answer itself, without the cursor.
    let edits = rig.telegram.calls_of("editMessageText");
    let (last, streaming) = edits.split_last().expect("the final edit");
    assert!(
        !streaming.is_empty(),
        "the preview was edited as text arrived"
    );
    let mut shown_len = shown.len();
    for edit in &edits {
        assert_eq!(edit.i64("message_id"), Some(preview_id), "{edit:?}");
        assert_eq!(edit.status, Some(200), "{edit:?}");
    }
    for edit in streaming {
        let text = edit.str("text").unwrap();
        let text = text.strip_suffix(CURSOR).expect("cursor while streaming");
        assert!(answer.starts_with(text), "{text:?} is not a prefix");
        assert!(text.len() > shown_len, "each edit shows more: {text:?}");
        shown_len = text.len();
    }
    assert_eq!(last.str("text").as_deref(), Some(answer));
    assert!(rig.telegram.calls_of("deleteMessage").is_empty());
    assert_eq!(rig.model.requests().len(), 1);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_during_the_final_edit_still_leaves_one_message_with_the_answer() {
    // A long edit interval: the preview is sent, then not edited until the final reply.
    let tail = "streaming:\n  enabled: true\n  edit_interval: 600\n  buffer_threshold: 10\n";
    let mut rig = start("", tail, &[]).await;
    let answer = "Once upon a time a gateway crashed and still answered once";
    rig.model.push(Step::Slow {
        reply: Reply::text(answer),
        delay: Duration::from_millis(100),
    });
    // The final edit reaches Telegram but its answer never comes back.
    rig.telegram.fail_next("editMessageText", Fault::Stall, 1);
    ask(&rig);
    rig.wait_for("the final edit in flight", |rig| {
        let edits = rig.telegram.calls_of("editMessageText");
        (!edits.is_empty()).then_some(())
    })
    .await;

    rig.crash_and_restart().await;
    rig.wait_for(
        "the preview edited into the answer after the restart",
        |rig| (left_in_chat(rig) == [answer]).then_some(()),
    )
    .await;
    let sent = rig.sent_to(CHAT);
    assert_eq!(
        sent.len(),
        1,
        "no second message, no recovered marker: {sent:#?}"
    );
    assert!(rig.telegram.calls_of("deleteMessage").is_empty());
    assert_eq!(rig.model.requests().len(), 1, "the turn was not run again");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_longer_than_one_message_replaces_the_preview_with_new_messages() {
    let tail = "streaming:\n  enabled: true\n  edit_interval: 0.1\n  buffer_threshold: 10\n";
    let rig = start("", tail, &[]).await;
    let answer = format!("{}end", format!("{} ", "x".repeat(99)).repeat(50));
    rig.model.push(Step::Slow {
        reply: Reply::text(answer.clone()),
        delay: Duration::from_millis(50),
    });
    ask(&rig);
    let deleted = rig
        .wait_for("the preview deleted", |rig| {
            let calls = rig.telegram.calls_of("deleteMessage");
            (!calls.is_empty()).then_some(calls)
        })
        .await;
    let preview_id = rig.telegram.sent_log_from(0)[0].message_id;
    assert_eq!(deleted[0].i64("message_id"), Some(preview_id));
    let left = rig
        .wait_for("the answer in two messages", |rig| {
            let left = left_in_chat(rig);
            (left.len() >= 2).then_some(left)
        })
        .await;
    let joined: String = left.concat();
    assert!(joined.contains("end"), "{left:?}");
    assert_eq!(left.len(), 2, "{left:?}");
    rig.stop().await;
}
