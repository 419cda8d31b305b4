//! Test harness: the fake Discord, the adapter running against it, and a recording
//! AdapterContext built from an mpsc channel that answers like the core (Recorded, or
//! Duplicate for an event id it has seen). Waits are bounded; nothing sleeps.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use fake_discord::FakeDiscord;
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Inbound, MessageEvent, Progress, RecordOutcome,
};
use hermes_discord::{DiscordAdapter, Settings};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const TOKEN: &str = "test-bot-token-7f3a9c";
pub const WAIT: Duration = Duration::from_secs(30);

pub struct Harness {
    pub fake: FakeDiscord,
    pub adapter: DiscordAdapter,
    /// The adapter's settings, to build a fresh adapter (a process restart).
    pub settings: Settings,
    pub events: mpsc::UnboundedReceiver<MessageEvent>,
    /// Dead letters the adapter handed over (each answered `Recorded`).
    pub dead_letters: mpsc::UnboundedReceiver<hermes_adapter::DeadLetter>,
    pub progress: Progress,
    pub shutdown: CancellationToken,
    pub task: Option<JoinHandle<Result<(), AdapterError>>>,
    pub cache: tempfile::TempDir,
    /// Answers the next deliveries with `Failed` while > 0.
    pub fail_next: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// While true, the recording context stops answering (a slow core).
    pub paused: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
    /// Every event id the adapter delivered, duplicates included, in order.
    pub delivered: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

/// Settings pointing at the fake, with test-friendly timings; `extra` and `env` add to them.
pub fn settings(
    fake: &FakeDiscord,
    extra: Value,
    env: &[(&str, &str)],
    cache: &std::path::Path,
) -> Settings {
    let mut map: Map<String, Value> = extra.as_object().cloned().unwrap_or_default();
    map.insert("api_base_url".into(), json!(fake.api_base_url()));
    map.entry("cache_dir")
        .or_insert(json!(cache.to_string_lossy()));
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    let mut settings = Settings::from_config(TOKEN, &map, &env).expect("valid test settings");
    settings.reconnect_min = Duration::from_millis(20);
    settings.reconnect_max = Duration::from_millis(200);
    settings.invalid_session_delay = Duration::from_millis(50);
    settings.stable_after = Duration::ZERO;
    settings.identify_window = Duration::from_millis(50);
    settings.http_timeout = Duration::from_secs(10);
    settings
}

impl Harness {
    /// A fake with a long heartbeat interval (heartbeats stay out of the way).
    pub async fn start(extra: Value, env: &[(&str, &str)]) -> Self {
        Self::start_with(Duration::from_secs(30), extra, env, |_| {}).await
    }

    pub async fn start_with(
        heartbeat: Duration,
        extra: Value,
        env: &[(&str, &str)],
        tweak: impl FnOnce(&mut Settings),
    ) -> Self {
        let fake = FakeDiscord::start(TOKEN, heartbeat).await;
        let cache = tempfile::tempdir().expect("cache dir");
        let mut settings = settings(&fake, extra, env, cache.path());
        tweak(&mut settings);
        Self::from_parts(fake, settings, cache)
    }

    /// Runs an adapter with `settings` against `fake`.
    pub fn from_parts(fake: FakeDiscord, settings: Settings, cache: tempfile::TempDir) -> Self {
        let adapter = DiscordAdapter::new(settings.clone());
        let mut harness = Self {
            fake,
            adapter,
            settings,
            events: mpsc::unbounded_channel().1,
            dead_letters: mpsc::unbounded_channel().1,
            progress: Progress::new(),
            shutdown: CancellationToken::new(),
            task: None,
            cache,
            fail_next: Default::default(),
            paused: std::sync::Arc::new(tokio::sync::watch::channel(false).0),
            delivered: Default::default(),
        };
        harness.run();
        harness
    }

    /// Starts `run` with a fresh recording context (also used to restart).
    pub fn run(&mut self) {
        let (inbound_tx, mut inbound_rx) = mpsc::channel::<Inbound>(64);
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        self.events = events_rx;
        self.shutdown = CancellationToken::new();
        let fail_next = self.fail_next.clone();
        let delivered = self.delivered.clone();
        let mut paused = self.paused.subscribe();
        tokio::spawn(async move {
            let mut seen = HashSet::new();
            while let Some(Inbound { event, recorded }) = inbound_rx.recv().await {
                let _ = paused.wait_for(|p| !*p).await;
                delivered.lock().unwrap().push(event.event_id.clone());
                let failing = fail_next
                    .fetch_update(
                        std::sync::atomic::Ordering::SeqCst,
                        std::sync::atomic::Ordering::SeqCst,
                        |n| n.checked_sub(1),
                    )
                    .is_ok();
                let outcome = if failing {
                    RecordOutcome::Failed
                } else if seen.insert(event.event_id.clone()) {
                    RecordOutcome::Recorded
                } else {
                    RecordOutcome::Duplicate
                };
                if outcome == RecordOutcome::Recorded {
                    let _ = events_tx.send(event);
                }
                let _ = recorded.send(outcome);
            }
        });
        let (letters_tx, mut letters_rx) = mpsc::channel(16);
        let (kept_tx, kept_rx) = mpsc::unbounded_channel();
        self.dead_letters = kept_rx;
        tokio::spawn(async move {
            while let Some(hermes_adapter::DeadLetterInbound { letter, recorded }) =
                letters_rx.recv().await
            {
                let _ = kept_tx.send(letter);
                let _ = recorded.send(RecordOutcome::Recorded);
            }
        });
        let ctx = AdapterContext {
            inbound: inbound_tx,
            dead_letters: letters_tx,
            progress: self.progress.clone(),
            shutdown: self.shutdown.clone(),
            ingress: hermes_adapter::Ingress::solo(),
        };
        let adapter = self.adapter.clone();
        self.task = Some(tokio::spawn(async move { adapter.run(ctx).await }));
    }

    /// Waits until the adapter has IDENTIFIED `count` times in total and READY was handled
    /// (the directory is filled once GUILD_CREATE went through the event loop; the backfill
    /// ran, which lists messages or finishes without any call).
    pub async fn ready(&self, identifies: usize) {
        self.fake.wait_for_frames(2, identifies).await;
    }

    pub async fn next_event(&mut self) -> MessageEvent {
        tokio::time::timeout(WAIT, self.events.recv())
            .await
            .expect("timed out waiting for an event")
            .expect("event channel closed")
    }

    /// How many times the adapter delivered `event_id` (the core would dedupe; the adapter
    /// should not need it to).
    pub fn deliveries_of(&self, event_id: &str) -> usize {
        self.delivered
            .lock()
            .unwrap()
            .iter()
            .filter(|id| *id == event_id)
            .count()
    }

    /// Stops `run` and returns its result.
    pub async fn stop(&mut self) -> Result<(), AdapterError> {
        let unrouted = self.fake.read(|s| s.unrouted.clone());
        assert!(
            unrouted.is_empty(),
            "calls the fake does not serve: {unrouted:?}"
        );
        self.shutdown.cancel();
        let task = self.task.take().expect("running");
        tokio::time::timeout(WAIT, task)
            .await
            .expect("run stops")
            .expect("no panic")
    }

    /// The result of `run` returning by itself (errors).
    pub async fn run_result(&mut self) -> Result<(), AdapterError> {
        let task = self.task.take().expect("running");
        tokio::time::timeout(WAIT, task)
            .await
            .expect("run returns")
            .expect("no panic")
    }
}
