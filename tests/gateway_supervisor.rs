//! The runner's supervision of adapters, in process with real HTTP for the admin endpoint:
//! a silent adapter is restarted and shown degraded then live, a fatal one is marked failed
//! while the others keep serving, a retryable failure restarts with backoff.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Capabilities, LengthUnit, Outbound, SendResult,
};
use hermesd::agent::provider::ApiMode;
use hermesd::gateway::adapter_health::AdapterState;
use hermesd::gateway::runner::{GatewayRunner, RunnerOptions};
use hermesd::gateway::supervisor::Backoff;
use hermesd::home::HermesHome;
use hermesd::state::Store;
use support::fake_model::FakeModel;
use support::test_platform::{TestPlatform, dm};

const WAIT: Duration = Duration::from_secs(60);

/// What each run of the scripted adapter does.
#[derive(Debug, Clone, Copy)]
enum Behaviour {
    /// Report once, then never again until told to stop.
    GoSilent,
    /// Report progress every 20 ms until told to stop.
    Healthy,
    Fatal,
    Retryable,
}

#[derive(Debug)]
struct ScriptedRuns {
    name: &'static str,
    runs: Vec<Behaviour>,
    started: AtomicUsize,
    window: Duration,
}

impl ScriptedRuns {
    fn new(name: &'static str, runs: Vec<Behaviour>) -> Self {
        Self {
            name,
            runs,
            started: AtomicUsize::new(0),
            window: Duration::from_millis(400),
        }
    }
}

impl Adapter for ScriptedRuns {
    fn platform(&self) -> &'static str {
        self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            message_limit: 2000,
            length_unit: LengthUnit::Chars,
            edits: false,
            typing: false,
            buttons: false,
            threads: false,
            command_prefix: '/',
            voice_caption_limit: None,
        }
    }

    fn liveness_window(&self) -> Duration {
        self.window
    }

    fn run(&self, ctx: AdapterContext) -> BoxFuture<'_, Result<(), AdapterError>> {
        let n = self.started.fetch_add(1, Ordering::SeqCst);
        let behaviour = *self.runs.get(n).unwrap_or(&Behaviour::Healthy);
        async move {
            match behaviour {
                Behaviour::Fatal => Err(AdapterError::Fatal("401 Unauthorized: bad token".into())),
                Behaviour::Retryable => Err(AdapterError::Retryable("connection reset".into())),
                Behaviour::GoSilent => {
                    ctx.progress.report();
                    ctx.shutdown.cancelled().await;
                    Ok(())
                }
                Behaviour::Healthy => {
                    let mut ticks = tokio::time::interval(Duration::from_millis(20));
                    loop {
                        tokio::select! {
                            _ = ctx.shutdown.cancelled() => return Ok(()),
                            _ = ticks.tick() => ctx.progress.report(),
                        }
                    }
                }
            }
        }
        .boxed()
    }

    fn send(&self, _outbound: Outbound) -> BoxFuture<'_, SendResult> {
        async { SendResult::sent(None) }.boxed()
    }
}

struct Rig {
    _dir: tempfile::TempDir,
    _model: FakeModel,
    runner: GatewayRunner,
}

async fn start(adapters: Vec<Arc<dyn Adapter>>) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let home = HermesHome::at(dir.path());
    std::fs::write(home.config_yaml(), "admin:\n  port: 0\n").unwrap();
    let env: BTreeMap<String, String> = [
        ("HOME".to_owned(), dir.path().display().to_string()),
        ("TELEGRAM_ALLOWED_USERS".to_owned(), "42".to_owned()),
    ]
    .into();
    let loaded = hermesd::config::load(&home, &env).unwrap();
    let store = Store::open(&home.state_db()).unwrap();
    let model = FakeModel::start().await;
    let runner = GatewayRunner::start(
        &home,
        loaded,
        store,
        RunnerOptions {
            adapters,
            client: Some(support::providers::client(&model, ApiMode::ChatCompletions)),
            backoff: Backoff {
                initial: Duration::from_millis(50),
                max: Duration::from_millis(200),
                reset_after: Duration::from_secs(300),
            },
            ..RunnerOptions::default()
        },
    )
    .await
    .unwrap();
    Rig {
        _dir: dir,
        _model: model,
        runner,
    }
}

async fn get(url: String) -> (u16, String) {
    let response = reqwest::get(url).await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_adapter_is_restarted_and_readiness_follows_it() {
    let adapter = Arc::new(ScriptedRuns::new(
        "discord",
        vec![Behaviour::GoSilent, Behaviour::Healthy],
    ));
    let rig = start(vec![adapter.clone()]).await;
    let health = &rig.runner.health;
    let recovered = health
        .wait_until(WAIT, |s| {
            s.get("discord")
                .is_some_and(|d| d.restarts >= 1 && d.state == AdapterState::Live)
        })
        .await;
    assert!(recovered, "{:?}", health.snapshot());
    let status = &health.snapshot()["discord"];
    assert!(
        status
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("no progress"),
        "{status:?}"
    );
    assert_eq!(adapter.started.load(Ordering::SeqCst), 2);
    let admin = rig.runner.admin_addr.unwrap();
    let (code, body) = get(format!("http://{admin}/ready")).await;
    assert_eq!(code, 200, "{body}");
    let (_, metrics) = get(format!("http://{admin}/metrics")).await;
    assert!(metrics.contains("discord"), "{metrics}");
    rig.runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_adapter_is_failed_and_the_others_keep_serving() {
    let fatal = Arc::new(ScriptedRuns::new("discord", vec![Behaviour::Fatal]));
    let platform = Arc::new(TestPlatform::new("telegram", 4096, LengthUnit::Utf16));
    let rig = start(vec![fatal.clone(), platform.clone()]).await;
    let failed = rig
        .runner
        .health
        .wait_until(WAIT, |s| {
            s.get("discord")
                .is_some_and(|d| d.state == AdapterState::Failed)
        })
        .await;
    assert!(failed);
    platform.inject(dm("f1", "42", "still here?")).await;
    assert_eq!(platform.wait_texts("42", 1).await, ["echo: still here?"]);
    assert_eq!(fatal.started.load(Ordering::SeqCst), 1, "never restarted");
    let admin = rig.runner.admin_addr.unwrap();
    let (code, body) = get(format!("http://{admin}/ready")).await;
    assert_eq!(code, 503);
    assert!(body.contains("bad token"), "{body}");
    rig.runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retryable_failure_restarts_the_adapter_alone() {
    let flaky = Arc::new(ScriptedRuns::new(
        "slack",
        vec![
            Behaviour::Retryable,
            Behaviour::Retryable,
            Behaviour::Healthy,
        ],
    ));
    let rig = start(vec![flaky.clone()]).await;
    let live = rig
        .runner
        .health
        .wait_until(WAIT, |s| {
            s.get("slack")
                .is_some_and(|d| d.state == AdapterState::Live && d.restarts == 2)
        })
        .await;
    assert!(live, "{:?}", rig.runner.health.snapshot());
    assert_eq!(flaky.started.load(Ordering::SeqCst), 3);
    rig.runner.shutdown().await;
}
