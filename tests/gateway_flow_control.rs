//! Flow control is not failure. On a paused clock: rate-limit answers are waited out in full
//! with no attempt cap and no failure notice, until the reply's deadline defers it; the
//! ledger keeps a deferred reply `pending` without counting the attempt. In process, with the
//! real runner and router: a chat in a long flood-wait or a slow attachment download holds no
//! turn permit (with a single permit, another chat is answered meanwhile), a later reply to the same chat never
//! overtakes an earlier one, and shutdown during the wait leaves the reply owed, unsent.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Capabilities, LengthUnit, MessageEvent, Outbound,
    PendingMedia, RecordOutcome, SendErrorKind, SendResult,
};
use hermesd::agent::provider::ApiMode;
use hermesd::config::ReplyToMode;
use hermesd::gateway::delivery::{
    Deliverer, DeliveryOutcome, FAILURE_NOTICE, Jitter, ObligationDelivery, RetryPolicy,
};
use hermesd::gateway::runner::{GatewayRunner, RunnerOptions};
use hermesd::home::HermesHome;
use hermesd::state::{NewObligation, ObligationState, Store};
use support::fake_model::FakeModel;
use support::scripted_adapter::ScriptedAdapter;
use support::test_platform::{TestPlatform, dm, group};
use tokio::sync::watch;

fn policy(deadline: Duration) -> RetryPolicy {
    RetryPolicy {
        jitter: Jitter::Fixed(Duration::from_millis(200)),
        rate_limit_deadline: deadline,
        ..RetryPolicy::default()
    }
}

#[tokio::test(start_paused = true)]
async fn rate_limits_are_waited_out_in_full_however_many_come() {
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    // Ten refusals in a row (Hermes gave up after three), one of them group flood control
    // asking for minutes.
    let waits = [1, 1, 2, 3, 1, 300, 1, 1, 5, 1];
    for seconds in waits {
        adapter.answer(SendResult::rate_limited(Duration::from_secs(seconds)));
    }
    let report = Deliverer::new(adapter.clone(), policy(Duration::from_secs(3600)))
        .deliver("42", None, "hi", None, ReplyToMode::Off)
        .await;
    assert_eq!(report.outcome, DeliveryOutcome::Delivered);
    let times = adapter.send_times();
    assert_eq!(times.len(), waits.len() + 1);
    for (i, seconds) in waits.iter().enumerate() {
        assert_eq!(
            times[i + 1] - times[i],
            Duration::from_secs(*seconds) + Duration::from_millis(200),
            "retry {i} waits exactly what was asked plus the jitter"
        );
    }
    assert!(adapter.texts().iter().all(|t| t.0 == "hi"), "no notice");

    // Ordinary failures keep Hermes's cap of two retries, rate limits in between or not.
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    adapter
        .answer(SendResult::failed(SendErrorKind::Transient, "502"))
        .answer(SendResult::rate_limited(Duration::from_secs(4)))
        .answer(SendResult::failed(SendErrorKind::Transient, "502"))
        .answer(SendResult::rate_limited(Duration::from_secs(4)))
        .answer(SendResult::failed(SendErrorKind::Transient, "503"));
    let report = Deliverer::new(adapter.clone(), policy(Duration::from_secs(3600)))
        .deliver("42", None, "hi", None, ReplyToMode::Off)
        .await;
    assert!(
        matches!(&report.outcome, DeliveryOutcome::Failed { error } if error.kind == SendErrorKind::Transient),
        "{report:?}"
    );
    assert_eq!(adapter.texts().last().unwrap().0, FAILURE_NOTICE);
}

#[tokio::test(start_paused = true)]
async fn a_wait_past_the_deadline_defers_the_reply_without_a_notice() {
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    adapter
        .answer(SendResult::rate_limited(Duration::from_secs(60)))
        .answer(SendResult::rate_limited(Duration::from_secs(60)));
    let started = tokio::time::Instant::now();
    let report = Deliverer::new(adapter.clone(), policy(Duration::from_secs(100)))
        .deliver("42", None, "hi", None, ReplyToMode::Off)
        .await;
    // The first wait fits (60.2 s), the second would end at 120.4 s: deferred at once.
    assert!(
        matches!(&report.outcome, DeliveryOutcome::Deferred { after_chunk: 0, error } if error.kind == SendErrorKind::RateLimited),
        "{report:?}"
    );
    assert_eq!(started.elapsed(), Duration::from_millis(60_200));
    assert_eq!(adapter.texts().len(), 2, "two tries, no notice");
    assert!(report.sent_message_ids.is_empty());

    // A notice (acks, progress lines) is best effort: its rate limits count as retries.
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    for _ in 0..3 {
        adapter.answer(SendResult::rate_limited(Duration::from_secs(1)));
    }
    let report = Deliverer::new(adapter.clone(), policy(Duration::from_secs(3600)))
        .deliver_notice("42", None, "⏳ Queued")
        .await;
    assert!(matches!(report.outcome, DeliveryOutcome::Failed { .. }));
}

#[tokio::test(start_paused = true)]
async fn a_deferred_reply_stays_pending_and_its_claim_is_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state.db")).unwrap();
    store.ensure_gateway_schema().await.unwrap();
    let adapter = Arc::new(ScriptedAdapter::new(4096, LengthUnit::Utf16));
    let deliverer = Deliverer::new(adapter.clone(), policy(Duration::from_secs(30)));
    let id = store
        .create_obligation(NewObligation {
            session_key: "agent:main:telegram:dm:42".into(),
            message_ref: "e1".into(),
            platform: "telegram".into(),
            chat_id: "42".into(),
            thread_id: None,
            content: "hello".into(),
        })
        .await
        .unwrap();
    // More deferrals than the ledger's attempt cap (3): none of them may abandon the reply.
    for round in 0..4 {
        adapter.answer(SendResult::rate_limited(Duration::from_secs(45)));
        let row = store.get_obligation(&id).await.unwrap().unwrap();
        let result = deliverer.deliver_obligation(&store, &row).await.unwrap();
        let ObligationDelivery::Attempted(report) = result else {
            panic!("round {round}: not claimed");
        };
        assert!(matches!(
            report.outcome,
            DeliveryOutcome::Deferred { after_chunk: 0, .. }
        ));
        let row = store.get_obligation(&id).await.unwrap().unwrap();
        assert_eq!(row.state, ObligationState::Pending, "round {round}");
        assert_eq!(row.attempts, 0, "round {round}");
        assert!(!row.ambiguous, "nothing went out: no recovered marker");
        assert!(row.last_error.unwrap_or_default().contains("deferred"));
    }
    let row = store.get_obligation(&id).await.unwrap().unwrap();
    let result = deliverer.deliver_obligation(&store, &row).await.unwrap();
    assert!(
        matches!(result, ObligationDelivery::Attempted(r) if r.outcome == DeliveryOutcome::Delivered)
    );
    let row = store.get_obligation(&id).await.unwrap().unwrap();
    assert_eq!(row.state, ObligationState::Delivered);
    assert_eq!(adapter.texts().last().unwrap().0, "hello");
    store.close().await;
}

/// The in-process platform with flood control on chosen chats: their next sends are
/// answered "rate limited, retry after N" (each attempt is recorded with its time).
#[derive(Debug)]
struct Flooded {
    inner: TestPlatform,
    /// chat → (retry_after, sends still to refuse).
    held: Mutex<BTreeMap<String, (Duration, usize)>>,
    refused: watch::Sender<Vec<(String, tokio::time::Instant)>>,
    /// Attachment downloads wait while this is false (a download slowed by the platform).
    downloads_open: watch::Sender<bool>,
    /// Downloads started so far.
    downloads: watch::Sender<usize>,
}

impl Flooded {
    fn new() -> Self {
        Self {
            inner: TestPlatform::new("telegram", 4096, LengthUnit::Utf16),
            held: Mutex::new(BTreeMap::new()),
            refused: watch::channel(Vec::new()).0,
            downloads_open: watch::channel(true).0,
            downloads: watch::channel(0).0,
        }
    }

    fn hold(&self, chat: &str, retry_after: Duration, sends: usize) {
        self.held
            .lock()
            .unwrap()
            .insert(chat.to_owned(), (retry_after, sends));
    }

    /// Waits until `n` sends to `chat` were refused.
    async fn wait_refused(&self, chat: &str, n: usize) {
        let mut refused = self.refused.subscribe();
        let wait = refused.wait_for(|r| r.iter().filter(|(c, _)| c == chat).count() >= n);
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .expect("the refused send in time")
            .expect("platform alive");
    }
}

impl Adapter for Flooded {
    fn platform(&self) -> &'static str {
        self.inner.platform()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn liveness_window(&self) -> Duration {
        self.inner.liveness_window()
    }

    fn run(&self, ctx: AdapterContext) -> BoxFuture<'_, Result<(), AdapterError>> {
        self.inner.run(ctx)
    }

    fn fetch_pending_media<'a>(&'a self, event: &'a mut MessageEvent) -> BoxFuture<'a, ()> {
        self.downloads.send_modify(|n| *n += 1);
        let mut open = self.downloads_open.subscribe();
        Box::pin(async move {
            let _ = open.wait_for(|open| *open).await;
            // Fetched: what was pending is now the event's text, for the model to echo.
            for pending in event.pending_media.drain(..) {
                event.text.push_str(&format!(" [{}]", pending.label));
            }
        })
    }

    fn send(&self, outbound: Outbound) -> BoxFuture<'_, SendResult> {
        let refuse = {
            let mut held = self.held.lock().unwrap();
            let typing = matches!(outbound.kind, hermes_adapter::OutboundKind::Typing);
            match held.get_mut(&outbound.chat_id).filter(|_| !typing) {
                Some((retry_after, left)) => {
                    let retry_after = *retry_after;
                    *left -= 1;
                    if *left == 0 {
                        held.remove(&outbound.chat_id);
                    }
                    Some(retry_after)
                }
                None => None,
            }
        };
        match refuse {
            Some(retry_after) => {
                let chat = outbound.chat_id.clone();
                self.refused
                    .send_modify(|r| r.push((chat, tokio::time::Instant::now())));
                Box::pin(async move { SendResult::rate_limited(retry_after) })
            }
            None => self.inner.send(outbound),
        }
    }
}

struct Rig {
    _dir: tempfile::TempDir,
    _model: FakeModel,
    store: Store,
    platform: Arc<Flooded>,
    runner: Option<GatewayRunner>,
}

/// The real runner with `permits` turn permits.
async fn start(permits: usize) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let home = HermesHome::at(dir.path());
    std::fs::write(home.config_yaml(), "admin:\n  port: 0\n").unwrap();
    let env: BTreeMap<String, String> = [
        ("HOME".to_owned(), dir.path().display().to_string()),
        (
            "TELEGRAM_ALLOWED_USERS".to_owned(),
            "42,43,44,45".to_owned(),
        ),
    ]
    .into();
    let model = FakeModel::start().await;
    let store = Store::open(&home.state_db()).unwrap();
    let platform = Arc::new(Flooded::new());
    let runner = GatewayRunner::start(
        &home,
        hermesd::config::load(&home, &env).expect("config"),
        store.clone(),
        RunnerOptions {
            adapters: vec![platform.clone()],
            client: Some(support::providers::client(&model, ApiMode::ChatCompletions)),
            retry: RetryPolicy::seeded(7),
            drain_timeout: Duration::from_secs(1),
            max_concurrent_turns: permits,
            ..RunnerOptions::default()
        },
    )
    .await
    .expect("runner starts");
    Rig {
        _dir: dir,
        _model: model,
        store,
        platform,
        runner: Some(runner),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_flood_wait_holds_no_permit_and_shutdown_leaves_the_reply_owed() {
    // One permit: a turn that kept it through a flood-wait would stop every other chat.
    let mut rig = start(1).await;
    // Chat 42 is under flood control for ten minutes (within the 1 h deadline: it waits).
    rig.platform
        .hold("42", Duration::from_secs(600), usize::MAX);
    let outcome = rig.platform.inner.inject(dm("e1", "42", "first")).await;
    assert!(matches!(outcome, RecordOutcome::Recorded), "{outcome:?}");
    rig.platform.wait_refused("42", 1).await;

    // With the only permit, another chat is answered while 42 waits.
    rig.platform.inner.inject(dm("e2", "43", "second")).await;
    let texts = rig.platform.inner.wait_texts("43", 1).await;
    assert_eq!(texts, ["echo: second"]);
    rig.platform.inner.inject(dm("e3", "43", "third")).await;
    rig.platform.inner.wait_texts("43", 2).await;

    let ids = rig
        .store
        .get_inbound("telegram", "e1")
        .await
        .unwrap()
        .expect("journaled")
        .reply_obligation_ids;
    assert_eq!(ids.len(), 1);
    // Waiting, and owed as a plain reply: the 429 proved nothing went out, so a crash now
    // would resend it as new, not with the recovered marker.
    let row = rig.store.get_obligation(&ids[0]).await.unwrap().unwrap();
    assert_eq!(row.state, ObligationState::Pending, "released for the wait");
    assert_eq!(row.attempts, 0);

    // Shutdown cuts the wait: the reply stays owed, never sent, never noticed as failed.
    rig.runner.take().unwrap().shutdown().await;
    let row = rig.store.get_obligation(&ids[0]).await.unwrap().unwrap();
    assert_eq!(row.state, ObligationState::Pending);
    assert_eq!(row.attempts, 0);
    assert!(!row.ambiguous);
    assert!(rig.platform.inner.texts_to("42").is_empty());
    rig.store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_attachment_download_holds_no_permit() {
    // One permit: a turn that kept it through its download would stop every other chat.
    let mut rig = start(1).await;
    rig.platform.downloads_open.send_replace(false);
    let mut with_file = dm("m1", "42", "see the file");
    with_file.pending_media.push(PendingMedia {
        reference: serde_json::json!({"id": "F1"}),
        label: "report.pdf".into(),
    });
    rig.platform.inner.inject(with_file).await;
    let mut downloads = rig.platform.downloads.subscribe();
    tokio::time::timeout(Duration::from_secs(60), downloads.wait_for(|n| *n >= 1))
        .await
        .expect("the download starts")
        .expect("platform alive");

    rig.platform.inner.inject(dm("m2", "43", "meanwhile")).await;
    assert_eq!(
        rig.platform.inner.wait_texts("43", 1).await,
        ["echo: meanwhile"]
    );
    assert!(
        rig.platform.inner.texts_to("42").is_empty(),
        "still downloading"
    );

    rig.platform.downloads_open.send_replace(true);
    assert_eq!(
        rig.platform.inner.wait_texts("42", 1).await,
        ["echo: see the file [report.pdf]"]
    );
    rig.runner.take().unwrap().shutdown().await;
    rig.store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_reply_to_a_chat_waits_for_the_earlier_one() {
    // Enough permits that the two turns run side by side.
    let mut rig = start(8).await;
    // Two members of one group have separate sessions; they share the chat's order.
    rig.platform.hold("g1", Duration::from_secs(2), 1);
    rig.platform
        .inner
        .inject(group("e1", "g1", "44", "one"))
        .await;
    rig.platform.wait_refused("g1", 1).await;
    rig.platform
        .inner
        .inject(group("e2", "g1", "45", "two"))
        .await;
    let texts = rig.platform.inner.wait_texts("g1", 2).await;
    assert_eq!(texts, ["echo: one", "echo: two"]);
    rig.runner.take().unwrap().shutdown().await;
    rig.store.close().await;
}
