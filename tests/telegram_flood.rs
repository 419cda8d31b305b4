//! Telegram flood control end to end: the real `hermesd run` binary against the fake Bot API
//! answering 429 with `retry_after` (and refusing again any send before the wait is over).
//! Fifty users under random flood control each get their reply exactly once, no retry comes
//! early and nobody gets a failure notice; a chat held in a 60 s flood-wait does not stop
//! other chats, and a shutdown during its wait leaves the reply owed: it is sent after the
//! restart, as a new message (no recovered marker), exactly once. So does a `kill -9`
//! during the wait: the 429 proved nothing went out, so the ledger row waits as `pending`,
//! not as an ambiguous `attempting` one.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::collections::BTreeMap;
use std::time::Duration;

use fake_telegram::{Chat, FloodEvent, FloodOutcome, User};
use hermesd::gateway::delivery::FAILURE_NOTICE;
use hermesd::state::{ObligationState, RECOVERED_MARKER, Store};
use rand::{Rng, SeedableRng};

/// Every retry to a limited chat came at least `retry_after` after its 429, and none was
/// refused as early; returns how many 429s were given.
fn assert_no_early_retry(log: &[FloodEvent]) -> usize {
    let mut by_chat: BTreeMap<i64, Vec<&FloodEvent>> = BTreeMap::new();
    for event in log {
        by_chat.entry(event.chat_id).or_default().push(event);
    }
    let mut limited = 0;
    for (chat, events) in by_chat {
        for pair in events.windows(2) {
            if let FloodOutcome::Limited { retry_after } = pair[0].outcome {
                let waited = pair[1].at - pair[0].at;
                assert!(
                    waited >= Duration::from_secs(retry_after),
                    "chat {chat}: retried after {waited:?}, asked {retry_after} s: {events:#?}"
                );
            }
        }
        for event in &events {
            assert!(
                !matches!(event.outcome, FloodOutcome::Early { .. }),
                "chat {chat}: a send inside the flood-wait: {events:#?}"
            );
            limited += usize::from(matches!(event.outcome, FloodOutcome::Limited { .. }));
        }
    }
    limited
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_users_under_flood_control_each_get_one_reply_none_early() {
    let seed: u64 = rand::random();
    println!("seed = {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let share = rng.random_range(0.3..=0.5);
    println!("share of sends answered 429 = {share:.2}");
    let users: Vec<i64> = (1001..=1050).collect();
    let allowed = users
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let rig = telegram_support::start("", "", &[("TELEGRAM_ALLOWED_USERS", &allowed)]).await;
    rig.telegram.flood_randomly(seed, share, 1..=2);
    for &user in &users {
        rig.telegram.push_text(
            Chat::private(user),
            User::new(user, "User"),
            &format!("hello {user}"),
        );
    }
    for &user in &users {
        rig.wait_for(&format!("the reply to {user}"), |rig| {
            (!rig.sent_to(user).is_empty()).then_some(())
        })
        .await;
    }
    // Stopped (cleanly) before counting, so a late duplicate could not slip past.
    let mut rig = rig;
    let logs = rig.stop_daemon().await;
    let telegram_log = rig.telegram.flood_log();
    let sent = rig.telegram.sent_messages();
    for &user in &users {
        let texts: Vec<&str> = sent
            .iter()
            .filter(|m| m.chat_id == user)
            .map(|m| m.text.as_str())
            .collect();
        assert_eq!(texts, [format!("echo: hello {user}")], "seed {seed}");
    }
    assert!(
        !sent.iter().any(|m| m.text == FAILURE_NOTICE),
        "seed {seed}"
    );
    let limited = assert_no_early_retry(&telegram_log);
    assert!(limited >= 10, "seed {seed}: only {limited} 429s were given");
    assert!(
        !logs.iter().any(|l| l.contains("after retries")),
        "nothing was given up: {logs:#?}"
    );
}

/// A daemon whose reply to `text` from chat 9001 sits in a 60 s flood-wait (the deadline
/// is longer than the wait: the daemon really sits in it).
async fn in_a_flood_wait(text: &str) -> (telegram_support::Rig, i64) {
    let rig = telegram_support::start("", "delivery:\n  rate_limit_deadline: 120\n", &[]).await;
    let held = 9001;
    rig.telegram.flood_chat(held, 60, 1);
    rig.telegram
        .push_text(Chat::private(held), User::new(held, "Ada"), text);
    rig.wait_for("the 60 s flood-wait", |rig| {
        rig.telegram
            .flood_log()
            .iter()
            .any(|e| e.chat_id == held)
            .then_some(())
    })
    .await;
    (rig, held)
}

/// Waits for `held`'s reply, stops the daemon, and asserts the chat got `expected` once,
/// without the recovered marker, and nobody a failure notice.
async fn answered_once_as_new(rig: &mut telegram_support::Rig, held: i64, expected: &str) {
    rig.wait_sent_to(held, 1).await;
    let logs = rig.stop_daemon().await;
    let telegram = rig.telegram.sent_messages();
    let texts: Vec<&str> = telegram
        .iter()
        .filter(|m| m.chat_id == held)
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(texts, [expected], "{logs:#?}");
    assert!(!texts[0].starts_with(RECOVERED_MARKER));
    assert!(!telegram.iter().any(|m| m.text == FAILURE_NOTICE));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_in_a_long_flood_wait_stops_nobody_and_is_answered_after_a_restart() {
    let (mut rig, held) = in_a_flood_wait("wait for me").await;

    // Meanwhile the others are answered.
    for user in [7, 8] {
        rig.telegram.push_text(
            Chat::private(user),
            User::new(user, "Other"),
            &format!("hi from {user}"),
        );
    }
    for user in [7, 8] {
        let texts = rig.wait_sent_to(user, 1).await;
        assert_eq!(texts[0].text, format!("echo: hi from {user}"));
    }
    assert!(rig.sent_to(held).is_empty(), "still waiting");

    // A restart during the wait: the reply is owed, not attempted, failed or abandoned.
    let logs_before = rig.stop_daemon().await;
    let flood = rig.telegram.flood_log();
    assert_eq!(flood.len(), 1, "no retry inside the wait: {flood:#?}");
    let store = Store::open(&rig.home.path().join("state.db")).unwrap();
    store.ensure_gateway_schema().await.unwrap();
    let owed = store
        .undelivered(hermesd::state::now_epoch())
        .await
        .unwrap();
    store.close().await;
    assert_eq!(owed.len(), 1, "{owed:#?}\n{logs_before:#?}");
    assert_eq!(owed[0].chat_id, held.to_string());
    assert_eq!(owed[0].state, ObligationState::Pending);
    assert_eq!(owed[0].attempts, 0);

    // The wait is over by the time the daemon is back.
    rig.telegram.end_flood(held);
    rig.start_daemon().await;
    // Exactly once, as a new message: nothing of it had gone out before the restart.
    answered_once_as_new(&mut rig, held, "echo: wait for me").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_a_flood_wait_leaves_a_plain_owed_reply_sent_without_the_marker() {
    let (mut rig, held) = in_a_flood_wait("still owed").await;
    // The row is released for the wait (pending, the claim uncounted) before the kill.
    let path = rig.home.path().join("state.db");
    let owed = rig
        .wait_for("the reply owed as pending during the wait", |_| {
            let db = rusqlite::Connection::open_with_flags(
                &path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .ok()?;
            let (state, attempts): (String, i64) = db
                .query_row(
                    "SELECT state, attempts FROM delivery_obligations WHERE chat_id = ?1",
                    [held.to_string()],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .ok()?;
            (state == "pending").then_some(attempts)
        })
        .await;
    assert_eq!(owed, 0);

    let daemon = rig.daemon.take().expect("daemon running");
    tokio::task::spawn_blocking(move || daemon.kill9())
        .await
        .expect("kill -9");
    rig.telegram.end_flood(held);
    rig.start_daemon().await;
    // Exactly once, as a new message: the 429 had proved nothing went out.
    answered_once_as_new(&mut rig, held, "echo: still owed").await;
}
