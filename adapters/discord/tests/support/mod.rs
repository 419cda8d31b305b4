//! Discord's test glue: the fake Discord and the adapter running against it, answered by the
//! contract's recording core (`hermes_adapter::testing::TestCore`, which dedupes like the
//! real one). Waits are bounded; nothing sleeps.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use fake_discord::FakeDiscord;
use hermes_adapter::testing::TestCore;
use hermes_adapter::{Adapter, AdapterError, MessageEvent, Progress};
use hermes_discord::{DiscordAdapter, Settings};
use serde_json::{Map, Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use hermes_adapter::testing::WAIT;

pub const TOKEN: &str = "test-bot-token-7f3a9c";

pub struct Harness {
    pub fake: FakeDiscord,
    pub adapter: DiscordAdapter,
    /// The adapter's settings, to build a fresh adapter (a process restart).
    pub settings: Settings,
    /// The core every run of the adapter hands over to (its journal outlives a restart):
    /// script failures, pause it, read deliveries and dead letters there.
    pub core: TestCore,
    pub progress: Progress,
    pub shutdown: CancellationToken,
    pub task: Option<JoinHandle<Result<(), AdapterError>>>,
    pub cache: tempfile::TempDir,
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
        let core = TestCore::new();
        let progress = core.ctx.progress.clone();
        let mut harness = Self {
            fake,
            adapter,
            settings,
            core,
            progress,
            shutdown: CancellationToken::new(),
            task: None,
            cache,
        };
        harness.run();
        harness
    }

    /// Starts `run` on the harness's core (also used to restart).
    pub fn run(&mut self) {
        let ctx = self.core.context();
        self.shutdown = ctx.shutdown.clone();
        let adapter = self.adapter.clone();
        self.task = Some(tokio::spawn(async move { adapter.run(ctx).await }));
    }

    /// Waits until the adapter has IDENTIFIED `count` times in total and READY was handled
    /// (the directory is filled once GUILD_CREATE went through the event loop; the backfill
    /// ran, which lists messages or finishes without any call).
    pub async fn ready(&self, identifies: usize) {
        self.fake.wait_for_frames(2, identifies).await;
    }

    /// The next event the core newly recorded.
    pub async fn next_event(&mut self) -> MessageEvent {
        self.core.next_recorded().await
    }

    /// How many times the adapter delivered `event_id` (the core would dedupe; the adapter
    /// should not need it to).
    pub fn deliveries_of(&self, event_id: &str) -> usize {
        self.core.deliveries_of(event_id)
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
