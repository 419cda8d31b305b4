//! Streaming on Slack through the real `hermesd run` binary: with `streaming.enabled`, a
//! streamed answer opens a preview message (`chat.postMessage`) and edits it as text comes
//! (`chat.update`); the answer itself is the preview's last edit, so the channel holds one
//! message, the answer, with no second post and no `chat.delete`. That final edit is a
//! delivery obligation recorded in the ledger with its target (`hermesd_reply_edits`): a
//! crash while it is in flight redoes the edit after the restart (still one message), and
//! a restart after it was delivered redoes nothing. An answer too long for one Slack
//! message cannot be an edit: the preview goes and the answer comes as new messages.

mod slack_support;
mod support;

use std::time::Duration;

use fake_slack::Fault;
use slack_support::{OWNER, SlackRun, WAIT};
use support::fake_model::{Reply, Step};

const CURSOR: &str = " ▉";

/// Streaming on, with `edit_interval` seconds between edits and a 10-character buffer.
async fn start(edit_interval: &str) -> SlackRun {
    SlackRun::start(
        &[],
        &[
            ("HERMES__STREAMING__ENABLED", "true"),
            ("HERMES__STREAMING__EDIT_INTERVAL", edit_interval),
            ("HERMES__STREAMING__BUFFER_THRESHOLD", "10"),
            ("RUST_LOG", "info,hermesd::gateway::router::respond=debug"),
        ],
    )
    .await
}

/// Waits until the app's messages in `channel`, as they stand now, are `expected`.
async fn wait_for_left(run: &SlackRun, channel: &str, expected: &[&str]) {
    run.slack
        .wait_for_bot_messages(WAIT, channel, expected)
        .await;
}

/// The `chat.update` calls on message `ts`, in order.
fn updates_of(run: &SlackRun, ts: &str) -> Vec<String> {
    run.slack
        .calls("chat.update")
        .iter()
        .filter(|c| c.str("ts") == Some(ts))
        .map(|c| c.str("text").unwrap_or("").to_owned())
        .collect()
}

/// Rows of `hermesd_reply_edits` naming `ts` as the message a reply is delivered by editing.
fn recorded_edits(run: &SlackRun, ts: &str) -> i64 {
    let db = rusqlite::Connection::open_with_flags(
        run.home.path().join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open state.db");
    db.query_row(
        "SELECT COUNT(*) FROM hermesd_reply_edits WHERE message_id = ?1",
        [ts],
        |row| row.get(0),
    )
    .expect("query hermesd_reply_edits")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_finishes_as_the_last_edit_of_its_preview() {
    let run = start("0.1").await;
    let dm = "D0STREAM";
    let answer = "The quick brown fox jumps over the lazy dog and then naps";
    run.model.push(Step::Slow {
        reply: Reply::text(answer),
        delay: Duration::from_millis(300),
    });
    let (pushed, _) = run.dm(dm, OWNER, "tell me a story");
    wait_for_left(&run, dm, &[answer]).await;
    run.wait_until_delivered(&pushed).await;
    assert!(run.model_requests()[0].is_stream(), "the turn streams");

    // One post: the preview, a prefix of the answer with the cursor.
    let posts = run.posts(dm);
    assert_eq!(posts.len(), 1, "only the preview is posted: {posts:#?}");
    let preview = &posts[0];
    let shown = preview
        .text
        .strip_suffix(CURSOR)
        .expect("cursor on the preview");
    assert!(answer.starts_with(shown) && shown.len() >= 10, "{shown:?}");

    // Edits of that message only, each showing more; the last is the answer itself.
    let updates = updates_of(&run, &preview.ts);
    assert_eq!(updates.len(), run.slack.calls("chat.update").len());
    let (last, streaming) = updates.split_last().expect("the final edit");
    assert!(!streaming.is_empty(), "the preview was edited as text came");
    let mut shown_len = shown.len();
    for text in streaming {
        let text = text.strip_suffix(CURSOR).expect("cursor while streaming");
        assert!(answer.starts_with(text), "{text:?} is not a prefix");
        assert!(text.len() > shown_len, "each edit shows more: {text:?}");
        shown_len = text.len();
    }
    assert_eq!(last, answer);
    assert!(run.slack.calls("chat.delete").is_empty());
    assert_eq!(
        recorded_edits(&run, &preview.ts),
        1,
        "the final edit is in the ledger"
    );
    assert_eq!(run.model_requests().len(), 1);
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_final_edit_survives_a_crash_and_is_not_redone_after_delivery() {
    // A long edit interval: the preview is posted, then edited only into the answer.
    let mut run = start("600").await;
    let dm = "D0CRASH";
    let answer = "Once upon a time a gateway crashed and still answered once";
    run.model.push(Step::Slow {
        reply: Reply::text(answer),
        delay: Duration::from_millis(100),
    });
    // The final edit reaches Slack, but its answer does not come back before the crash.
    run.slack
        .fail_next("chat.update", Fault::Delay(Duration::from_secs(600)));
    run.dm(dm, OWNER, "tell me a story");
    run.wait_for_call("chat.update").await;
    let preview_ts = run.posts(dm)[0].ts.clone();
    let daemon = run.daemon.take().unwrap();
    tokio::task::spawn_blocking(move || daemon.kill9())
        .await
        .unwrap();

    run.launch(2).await;
    wait_for_left(&run, dm, &[answer]).await;
    // A recovered reply is logged without its event id.
    let daemon = run.daemon();
    let delivered = tokio::task::block_in_place(|| {
        daemon.wait_for_line_where(|l| l.contains("reply delivered"), WAIT)
    });
    assert!(
        delivered.is_some(),
        "the recovered edit was never marked delivered"
    );
    assert_eq!(
        run.posts(dm).len(),
        1,
        "no second message: {:#?}",
        run.posts(dm)
    );
    assert_eq!(
        updates_of(&run, &preview_ts),
        [answer, answer],
        "the edit redone once"
    );
    assert_eq!(recorded_edits(&run, &preview_ts), 1);

    // Delivered and recorded: a restart now redoes nothing.
    let daemon = run.daemon.take().unwrap();
    tokio::task::spawn_blocking(move || daemon.kill9())
        .await
        .unwrap();
    run.launch(3).await;
    let (barrier, _) = run.dm(dm, OWNER, "barrier");
    run.wait_until_delivered(&barrier).await;
    assert_eq!(run.posts(dm).len(), 2, "{:#?}", run.posts(dm));
    assert_eq!(
        updates_of(&run, &preview_ts).len(),
        2,
        "the delivered edit was redone"
    );
    assert!(run.slack.calls("chat.delete").is_empty());
    assert_eq!(
        run.model_requests().len(),
        2,
        "the first turn was not run again"
    );
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_longer_than_one_message_comes_as_new_messages() {
    let run = start("0.1").await;
    let dm = "D0LONG";
    // 400 words of 100 characters: more than one Slack message (39,000 characters here).
    let answer = format!("{}end", format!("{} ", "y".repeat(99)).repeat(400));
    run.model.push(Step::Slow {
        reply: Reply::text(answer.clone()),
        delay: Duration::from_millis(10),
    });
    let (pushed, _) = run.dm(dm, OWNER, "tell me everything");
    run.wait_until_delivered(&pushed).await;
    let left = run.slack.bot_messages_in(dm);
    assert_eq!(left.len(), 2, "the answer in two messages: {left:#?}");
    // Split at a space, each part marked with its place: the words, in order, are the
    // answer's.
    let parts = [
        left[0].strip_suffix(" (1/2)").expect("part 1 marked"),
        left[1].strip_suffix(" (2/2)").expect("part 2 marked"),
    ];
    let words = parts.join(" ");
    assert!(
        words.split_whitespace().eq(answer.split_whitespace()),
        "not the whole answer once: {} words",
        words.split_whitespace().count()
    );
    // The preview could not hold the answer: it was removed, not left behind.
    let preview = &run.posts(dm)[0];
    let deleted = run.slack.calls("chat.delete");
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert_eq!(deleted[0].str("ts"), Some(preview.ts.as_str()));
    assert!(
        left.iter().all(|m| !m.ends_with(CURSOR)),
        "a preview was left behind"
    );
    run.stop().await;
}
