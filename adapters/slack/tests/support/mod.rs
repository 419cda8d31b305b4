//! Slack's test glue: a fake Slack and the real adapter running against it, handing over to
//! the contract's `ManualCore`, whose inbound channel the test reads and answers like the
//! core would.
#![allow(dead_code)]

use std::collections::BTreeMap;

use fake_slack::{FakeSlack, Pushed, events};
use hermes_adapter::testing::ManualCore;
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Inbound, MessageEvent, Progress, RecordOutcome,
};
use hermes_slack::{Settings, SlackAdapter, Tunables};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use hermes_adapter::testing::WAIT as BOUND;
pub const USER: &str = "U100";
pub const DM: &str = "D100";
pub const CHANNEL: &str = "C100";

pub struct Harness {
    pub fake: FakeSlack,
    pub adapter: SlackAdapter,
    pub inbound: mpsc::Receiver<Inbound>,
    pub dead_letters: mpsc::Receiver<hermes_adapter::DeadLetterInbound>,
    pub progress: Progress,
    pub shutdown: CancellationToken,
    pub run: JoinHandle<Result<(), AdapterError>>,
    pub cache: tempfile::TempDir,
}

/// Settings pointing at the fake, with `extra` keys and `env` vars on top.
pub fn settings(
    fake: &FakeSlack,
    extra: Value,
    env: &[(&str, &str)],
    cache: &std::path::Path,
) -> Settings {
    let mut extra = extra.as_object().cloned().unwrap_or_default();
    extra.insert("api_base_url".into(), json!(fake.api_base_url()));
    extra.insert("cache_dir".into(), json!(cache.to_string_lossy()));
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let tokens = fake.tokens();
    Settings::from_config(&tokens.bot, &tokens.app, &extra, &env).expect("valid test settings")
}

pub fn context() -> (AdapterContext, mpsc::Receiver<Inbound>) {
    let (ctx, rx, _) = context_with_dead_letters();
    (ctx, rx)
}

/// A context whose dead letters the test answers by hand.
pub fn context_with_dead_letters() -> (
    AdapterContext,
    mpsc::Receiver<Inbound>,
    mpsc::Receiver<hermes_adapter::DeadLetterInbound>,
) {
    let ManualCore {
        ctx,
        inbound,
        dead_letters,
    } = ManualCore::new();
    (ctx, inbound, dead_letters)
}

impl Harness {
    pub async fn start(extra: Value) -> Self {
        Self::start_with(extra, &[], Tunables::default()).await
    }

    /// Starts the adapter and waits for its first socket hello.
    pub async fn start_with(extra: Value, env: &[(&str, &str)], tunables: Tunables) -> Self {
        let fake = FakeSlack::start().await;
        let cache = tempfile::tempdir().expect("cache dir");
        let adapter =
            SlackAdapter::with_tunables(settings(&fake, extra, env, cache.path()), tunables);
        let (ctx, inbound, dead_letters) = context_with_dead_letters();
        let progress = ctx.progress.clone();
        let shutdown = ctx.shutdown.clone();
        let runner = adapter.clone();
        let run = tokio::spawn(async move { runner.run(ctx).await });
        fake.wait_for_hellos(1).await;
        Self {
            fake,
            adapter,
            inbound,
            dead_letters,
            progress,
            shutdown,
            run,
            cache,
        }
    }

    /// The next event the adapter hands over, not yet answered.
    pub async fn next_inbound(&mut self) -> Inbound {
        tokio::time::timeout(BOUND, self.inbound.recv())
            .await
            .expect("timed out waiting for an inbound event")
            .expect("adapter dropped the inbound channel")
    }

    /// The next event, answered `Recorded`.
    pub async fn record(&mut self) -> MessageEvent {
        let inbound = self.next_inbound().await;
        let _ = inbound.recorded.send(RecordOutcome::Recorded);
        inbound.event
    }

    /// The next event, answered `Recorded`, with its files then fetched as the core does
    /// just before the turn.
    pub async fn record_and_fetch(&mut self) -> MessageEvent {
        let mut event = self.record().await;
        self.adapter.fetch_pending_media(&mut event).await;
        event
    }

    /// Asserts everything pushed so far was ignored (acked without being handed over),
    /// then pushes a DM `marker` and asserts it is the next event. Envelopes of different
    /// channels are handled concurrently, so the acks are waited for first. Returns the
    /// marker event.
    pub async fn expect_only_marker(&mut self, marker: &str) -> MessageEvent {
        tokio::select! {
            handed = self.inbound.recv() => panic!(
                "an ignored message was handed over: {:?}",
                handed.map(|inbound| inbound.event)
            ),
            () = self.fake.wait_until_all_acked() => {}
        }
        let ts = self.fake.next_ts();
        self.fake.push_event(events::dm(DM, USER, marker, &ts));
        let event = self.record().await;
        assert_eq!(
            event.text, marker,
            "an ignored message was handed over: {event:?}"
        );
        event
    }

    pub fn push_dm(&self, text: &str) -> (Pushed, String) {
        let ts = self.fake.next_ts();
        (self.fake.push_event(events::dm(DM, USER, text, &ts)), ts)
    }

    /// Stops the adapter; a strict fake fails the test on any call it does not know.
    pub async fn stop(self) -> Result<(), AdapterError> {
        let unexpected = self.fake.records().unexpected;
        assert!(
            unexpected.is_empty(),
            "unexpected calls to the fake: {unexpected:?}"
        );
        self.shutdown.cancel();
        tokio::time::timeout(BOUND, self.run)
            .await
            .expect("run did not stop on shutdown")
            .expect("run panicked")
    }
}
