//! Crash-safe long polling against the fake: the offset never passes an update whose record
//! failed, redeliveries and duplicates reach the core by the same event id, stalled polls
//! are abandoned, 409 / 5xx / dropped connections are retried, a bad token is fatal.

mod support;

use fake_telegram::{Chat, FakeTelegram, Fault, User};
use hermes_adapter::{AdapterError, RecordOutcome};
use hermes_telegram::{Settings, TelegramAdapter};
use serde_json::json;
use support::{
    ManualCore, TestCore, WAIT, settings, start, start_with_ctx, wait_backlog_taken, wait_confirmed,
};

fn alice() -> User {
    User::new(42, "Alice")
}

#[tokio::test]
async fn the_offset_never_passes_an_update_whose_record_failed() {
    let fake = FakeTelegram::start().await;
    let mut core = ManualCore::new();
    let running = start_with_ctx(settings(&fake, json!({})), core.ctx.clone());
    let update_id = fake.push_text(Chat::private(42), alice(), "/remember this");

    let first = core.next().await;
    assert_eq!(first.event.event_id, update_id.to_string());
    assert!(fake.confirmed_offset() <= update_id);
    first.recorded.send(RecordOutcome::Failed).unwrap();

    let again = core.next().await;
    assert_eq!(
        again.event.event_id,
        update_id.to_string(),
        "handed over again; the core dedupes"
    );
    let offsets: Vec<i64> = fake
        .calls_of("getUpdates")
        .iter()
        .filter_map(|c| c.i64("offset"))
        .collect();
    assert!(
        offsets.iter().all(|o| *o <= update_id),
        "no poll confirmed the failed update: {offsets:?}"
    );
    again.recorded.send(RecordOutcome::Recorded).unwrap();
    wait_confirmed(&fake, update_id).await;
    assert_eq!(fake.pending_updates(), 0);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_failed_merged_paste_is_retried_whole() {
    let fake = FakeTelegram::start().await;
    let mut core = ManualCore::new();
    let running = start_with_ctx(
        settings(&fake, json!({"text_batch_delay_seconds": 2.0})),
        core.ctx.clone(),
    );
    wait_backlog_taken(&fake).await;
    let first = fake.push_text(Chat::private(42), alice(), "part one");
    let second = fake.push_text(Chat::private(42), alice(), "part two");

    let merged = core.next().await;
    assert_eq!(merged.event.text, "part one\npart two");
    merged.recorded.send(RecordOutcome::Failed).unwrap();
    let again = core.next().await;
    assert_eq!(
        (again.event.event_id.clone(), again.event.text.clone()),
        (first.to_string(), "part one\npart two".to_owned())
    );
    assert!(fake.confirmed_offset() <= first);
    again.recorded.send(RecordOutcome::Recorded).unwrap();
    wait_confirmed(&fake, second).await;
    running.stop().await.unwrap();
}

#[tokio::test]
async fn new_updates_are_fetched_while_an_earlier_one_waits_in_flight() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    // A paste-length text waits out the 4 s split window: in flight all that time.
    let running = start(
        settings(&fake, json!({"text_batch_split_delay_seconds": 4.0})),
        &core,
    );
    wait_backlog_taken(&fake).await;
    let polls = fake.calls_of("getUpdates").len();
    let paste = fake.push_text(Chat::private(42), alice(), &"p".repeat(4050));
    // The poll after the one that brought the paste: it is in flight now.
    fake.wait_for_calls("getUpdates", polls + 2, WAIT)
        .await
        .expect("the adapter polls on");
    let command = fake.push_text(Chat::private(7), User::new(7, "Bob"), "/status");

    let (first, _) = core.next().await;
    assert_eq!(
        first.event_id,
        command.to_string(),
        "the command must not wait for the paste's window to close"
    );
    let (second, _) = core.next().await;
    assert_eq!(second.event_id, paste.to_string());
    wait_confirmed(&fake, command).await;
    running.stop().await.unwrap();
}

#[tokio::test]
async fn duplicate_updates_in_one_answer_reach_the_core_once() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    let update_id = fake.push_text(Chat::private(42), alice(), "/once");
    fake.fail_next("getUpdates", Fault::DuplicateUpdates, 1);
    let running = start(settings(&fake, json!({})), &core);
    let (event, outcome) = core.next().await;
    assert_eq!(
        (event.event_id, outcome),
        (update_id.to_string(), RecordOutcome::Recorded)
    );
    wait_confirmed(&fake, update_id).await;
    assert!(core.drain().is_empty());
    running.stop().await.unwrap();
}

#[tokio::test]
async fn an_update_redelivered_after_a_restart_keeps_its_event_id() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    let first_run = start(settings(&fake, json!({})), &core);
    let update_id = fake.push_text(Chat::private(42), alice(), "/status");
    assert_eq!(core.next().await.1, RecordOutcome::Recorded);
    wait_confirmed(&fake, update_id).await;
    first_run.stop().await.unwrap();

    fake.redeliver(update_id);
    let second_run = start(settings(&fake, json!({})), &core);
    let (event, outcome) = core.next().await;
    assert_eq!(
        (event.event_id, outcome),
        (update_id.to_string(), RecordOutcome::Duplicate)
    );
    wait_confirmed(&fake, update_id).await;
    second_run.stop().await.unwrap();
}

/// kill -9 between the journal and the offset: an earlier process recorded (and answered)
/// `answered`, then died before a poll confirmed it; the user's next message `fresh` came in
/// meanwhile. Both wait in the backlog. Merged into one event they would carry `answered`'s
/// id, the core would call the whole event a duplicate, and `fresh` would be confirmed
/// without ever being recorded.
#[tokio::test]
async fn a_backlog_update_already_journaled_never_swallows_the_next_message() {
    let fake = FakeTelegram::start().await;
    let answered = fake.push_text(Chat::private(42), alice(), "hello m0");
    let fresh = fake.push_text(Chat::private(42), alice(), "hello m1");
    let mut core = TestCore::with_journal(&[answered]);
    let running = start(settings(&fake, json!({})), &core);

    // Telegram forgets `fresh` once it is confirmed: by then it must be in the journal.
    wait_confirmed(&fake, fresh).await;
    let events = core.drain();
    let texts: Vec<(String, String)> = events
        .iter()
        .map(|e| (e.event_id.clone(), e.text.clone()))
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e.event_id == fresh.to_string() && e.text == "hello m1"),
        "update {fresh} was confirmed but never recorded; the core saw {texts:?}"
    );
    assert!(
        events
            .iter()
            .all(|e| e.event_id != answered.to_string() || e.text == "hello m0"),
        "the journaled update is handed over as it was: {texts:?}"
    );
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_stalled_poll_is_abandoned_and_progress_resumes() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    fake.fail_next("getUpdates", Fault::Stall, 1);
    let running = start(
        settings(
            &fake,
            json!({"poll_timeout_seconds": 1, "poll_margin_seconds": 1}),
        ),
        &core,
    );
    fake.wait_for_calls("getUpdates", 2, WAIT)
        .await
        .expect("a new poll after the stalled one");
    assert_eq!(fake.calls_of("getUpdates")[0].fault, Some(Fault::Stall));
    fake.push_text(Chat::private(42), alice(), "/after_stall");
    assert_eq!(core.next_event().await.text, "/after_stall");
    assert!(core.ctx.progress.reports() > 0);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn conflict_server_errors_and_dropped_connections_are_retried() {
    for fault in [
        Fault::Conflict,
        Fault::ServerError,
        Fault::BadGateway,
        Fault::DropConnection,
    ] {
        let fake = FakeTelegram::start().await;
        let mut core = TestCore::new();
        fake.fail_next("getUpdates", fault.clone(), 2);
        let update_id = fake.push_text(Chat::private(42), alice(), "/hello");
        let running = start(settings(&fake, json!({})), &core);
        assert_eq!(
            core.next_event().await.event_id,
            update_id.to_string(),
            "{fault:?}"
        );
        let polls = fake.calls_of("getUpdates");
        assert_eq!(polls[0].fault.as_ref(), Some(&fault));
        assert_eq!(polls[1].fault.as_ref(), Some(&fault));
        running.stop().await.unwrap();
    }
}

#[tokio::test]
async fn a_rejected_token_is_fatal_at_start_and_never_shown() {
    let fake = FakeTelegram::start().await;
    let core = TestCore::new();
    let wrong = "999999:WRONG-secret-token-value";
    let extra = json!({"base_url": fake.url()});
    let settings =
        Settings::from_config(wrong, extra.as_object().unwrap(), &Default::default()).unwrap();
    let running = start(settings, &core);
    let result = tokio::time::timeout(WAIT, running.task)
        .await
        .expect("run ends")
        .expect("task");
    match result {
        Err(AdapterError::Fatal(message)) => {
            assert!(message.contains("rejected"), "{message}");
            assert!(!message.contains("WRONG-secret"), "token leaked: {message}");
        }
        other => panic!("expected Fatal, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unreachable_api_is_retryable_at_start() {
    let fake = FakeTelegram::start().await;
    let url = fake.url();
    drop(fake);
    let extra = json!({"base_url": url});
    let settings =
        Settings::from_config("1:abc", extra.as_object().unwrap(), &Default::default()).unwrap();
    let core = TestCore::new();
    let adapter = TelegramAdapter::new(settings);
    let result = tokio::time::timeout(
        WAIT,
        hermes_adapter::Adapter::run(&adapter, core.ctx.clone()),
    )
    .await
    .expect("run ends");
    assert!(
        matches!(result, Err(AdapterError::Retryable(_))),
        "{result:?}"
    );
}
