//! Failures inside hermesd, seen from outside through the real binary on the fake Bot API:
//! a turn that panics is answered, counted and leaves its session answering (it used to kill
//! the session's worker with the slot still "running", so every later message waited
//! forever); a state.db error reaches the user as one sentence with an incident id while
//! the log holds the details under that id.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, User};
use telegram_support::{Rig, WAIT, start};

const CHAT: i64 = 9001;

/// A sent text without MarkdownV2 escapes.
fn plain(text: &str) -> String {
    text.replace('\\', "")
}

/// The id in "... (incident 0123abcd)."; `None` when the text has none.
fn incident_id(text: &str) -> Option<String> {
    let (_, tail) = text.split_once("(incident ")?;
    let id: String = tail.chars().take_while(char::is_ascii_hexdigit).collect();
    (id.len() == 8).then_some(id)
}

/// The one sentence a user reads for an internal failure: nothing from the error itself.
fn incident_text(id: &str) -> String {
    format!(
        "⚠️ Something went wrong on my side and I couldn't finish that; please try again (incident {id})."
    )
}

fn say(rig: &Rig, text: &str) {
    rig.telegram
        .push_text(Chat::private(CHAT), User::new(CHAT, "Ada"), text);
}

async fn metrics(rig: &Rig) -> String {
    reqwest::get(format!("{}/metrics", rig.daemon().admin_url()))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics text")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_turn_is_answered_counted_and_its_session_keeps_answering() {
    let rig = start("", "", &[("HERMESD_TEST_PANIC_ON", "trip the fault")]).await;
    say(&rig, "please trip the fault");
    let sent = rig.wait_sent_to(CHAT, 1).await;
    let answer = plain(&sent[0].text);
    let id = incident_id(&answer).unwrap_or_else(|| panic!("no incident id in {answer:?}"));
    assert_eq!(answer, incident_text(&id));
    let logged = rig
        .daemon()
        .wait_for_line_where(|line| line.contains(&id) && line.contains("panicked"), WAIT);
    assert!(logged.is_some(), "{:#?}", rig.daemon().logs());

    // The session is free: the next message is an ordinary turn.
    say(&rig, "still there?");
    let sent = rig.wait_sent_to(CHAT, 2).await;
    assert_eq!(plain(&sent[1].text), "echo: still there?");
    assert_eq!(sent.len(), 2, "{sent:#?}");
    let text = metrics(&rig).await;
    assert!(text.contains("hermesd_turn_panics_total 1\n"), "{text}");
    // Nothing is left running, so shutdown does not wait out the drain timeout.
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_db_error_reaches_the_user_as_an_incident_id_and_the_log_has_the_details() {
    let rig = start("", "", &[]).await;
    say(&rig, "hello");
    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert_eq!(plain(&sent[0].text), "echo: hello");

    // A trigger makes every message insert fail.
    let db = rusqlite::Connection::open(rig.home.path().join("state.db")).expect("open state.db");
    db.busy_timeout(WAIT).expect("busy timeout");
    db.execute_batch(
        "CREATE TRIGGER test_refuse_messages BEFORE INSERT ON messages \
         BEGIN SELECT RAISE(ABORT, 'disk on fire'); END;",
    )
    .expect("create trigger");
    say(&rig, "and now?");
    let sent = rig.wait_sent_to(CHAT, 2).await;
    let answer = plain(&sent[1].text);
    let id = incident_id(&answer).unwrap_or_else(|| panic!("no incident id in {answer:?}"));
    assert_eq!(answer, incident_text(&id));
    // The log has the store's error under the same id.
    let logged = rig.daemon().wait_for_line_where(
        |line| line.contains(&id) && line.contains("\"error\""),
        WAIT,
    );
    assert!(logged.is_some(), "{:#?}", rig.daemon().logs());

    db.execute_batch("DROP TRIGGER test_refuse_messages;")
        .expect("drop trigger");
    say(&rig, "better?");
    let sent = rig.wait_sent_to(CHAT, 3).await;
    assert_eq!(plain(&sent[2].text), "echo: better?");
    rig.stop().await;
}
