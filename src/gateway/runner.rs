//! The GatewayRunner: owns the router, one supervised task per chat adapter, the HTTP API
//! and the admin endpoint, and shuts them down in phases under one deadline — stop ingress,
//! drain running turns (then interrupt them; interrupted turns resume after a restart),
//! flush replies — before the caller closes the store.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hermes_adapter::Adapter;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::adapter_health::{AdapterHealth, AdapterState};
use super::admin::{AdminState, admin_addr, serve_admin};
use super::api_server::{self, ApiServerError};
use super::delivery::RetryPolicy;
use super::metrics::GatewayMetrics;
use super::router::{API_PLATFORM, PlatformLink, Router, RouterParts};
use super::supervisor::{Backoff, supervise};
use crate::agent::provider::ModelClient;
use crate::config::{Config, LoadedConfig, PlatformConfig};
use crate::home::HermesHome;
use crate::state::{OWED_REPLIES_WARN, Store};

/// How often idle conversations are evicted from memory.
const JANITOR_INTERVAL: Duration = Duration::from_secs(60);
/// A conversation idle this long leaves memory (it stays in state.db).
const SLOT_IDLE: Duration = Duration::from_secs(15 * 60);
/// Answered inbound events are kept this many days for redelivery dedupe.
const INBOUND_RETENTION_DAYS: f64 = 7.0;
/// How often a `heap-stats` build logs where its memory is.
const HEAP_STATS_INTERVAL: Duration = Duration::from_secs(5);
/// How long shutdown lets the delivery lanes finish the sends in flight (their waits are
/// cut at once; a send itself is bounded by the adapter's request timeout).
const DELIVERY_FLUSH: Duration = Duration::from_secs(10);

/// Why the gateway cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "no platform is enabled: enable telegram, discord, slack or the HTTP API \
         (api_server.enabled / API_SERVER_KEY)"
    )]
    NoPlatform,
    #[error("HTTP API: {0}")]
    Api(#[from] ApiServerError),
    #[error("{0}")]
    Other(#[from] anyhow::Error),
}

impl StartError {
    /// Configuration problems exit 78 (systemd must not restart-loop on them).
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            Self::NoPlatform
                | Self::Api(
                    ApiServerError::MissingKey
                        | ApiServerError::ShortKey(_)
                        | ApiServerError::BadHost(_)
                )
        )
    }
}

/// What the runner is started with besides the configuration.
pub struct RunnerOptions {
    pub adapters: Vec<Arc<dyn Adapter>>,
    pub backoff: Backoff,
    /// How long running turns may finish during shutdown before they are interrupted.
    pub drain_timeout: Duration,
    pub max_concurrent_turns: usize,
    /// A model client for tests and benchmarks; `None` builds one from the configuration.
    pub client: Option<ModelClient>,
    /// Send retries; its `rate_limit_deadline` is replaced by `delivery.rate_limit_deadline`.
    pub retry: RetryPolicy,
}

impl std::fmt::Debug for RunnerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.adapters.iter().map(|a| a.platform()).collect();
        f.debug_struct("RunnerOptions")
            .field("adapters", &names)
            .field("drain_timeout", &self.drain_timeout)
            .finish_non_exhaustive()
    }
}

impl Default for RunnerOptions {
    fn default() -> Self {
        Self {
            adapters: Vec::new(),
            backoff: Backoff::default(),
            drain_timeout: Duration::from_secs(30),
            max_concurrent_turns: 64,
            client: None,
            retry: RetryPolicy::default(),
        }
    }
}

/// The running gateway.
#[derive(Debug)]
pub struct GatewayRunner {
    pub router: Arc<Router>,
    pub health: Arc<AdapterHealth>,
    pub metrics: Arc<GatewayMetrics>,
    pub api_addr: Option<SocketAddr>,
    pub admin_addr: Option<SocketAddr>,
    ingress: CancellationToken,
    admin_stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    /// Scheduled jobs (`cron/jobs.json`).
    pub cron: Arc<super::cron::CronScheduler>,
    /// Runs for the gateway's whole life; its end means the runtime lost a vital task.
    janitor: JoinHandle<()>,
    servers: Vec<JoinHandle<std::io::Result<()>>>,
    drain_timeout: Duration,
}

fn platform_config<'a>(config: &'a Config, name: &str) -> Option<&'a PlatformConfig> {
    match name {
        "telegram" => Some(&config.platforms.telegram),
        "discord" => Some(&config.platforms.discord),
        "slack" => Some(&config.platforms.slack),
        "whatsapp_cloud" => Some(&config.platforms.whatsapp_cloud),
        "signal" => Some(&config.platforms.signal),
        _ => None,
    }
}

impl GatewayRunner {
    pub async fn start(
        home: &HermesHome,
        loaded: LoadedConfig,
        store: Store,
        options: RunnerOptions,
    ) -> Result<Self, StartError> {
        let config = loaded.config.clone();
        if options.adapters.is_empty() && !config.api_server.enabled {
            return Err(StartError::NoPlatform);
        }
        let api_listener = match config.api_server.enabled {
            true => Some(api_server::bind(&config.api_server).await?),
            false => None,
        };
        let health = Arc::new(AdapterHealth::new());
        let metrics = Arc::new(GatewayMetrics::new());
        let media_policy = crate::gateway::media_tags::MediaPolicy {
            hermes_home: home.path().to_path_buf(),
            user_home: loaded
                .env
                .get("HOME")
                .filter(|h| !h.is_empty())
                .map(std::path::PathBuf::from),
        };
        let retry = RetryPolicy {
            rate_limit_deadline: Duration::from_secs(config.delivery.rate_limit_deadline_secs),
            ..options.retry.clone()
        };
        let links = options
            .adapters
            .iter()
            .map(|adapter| {
                let platform = platform_config(&config, adapter.platform());
                PlatformLink::new(
                    adapter.clone(),
                    retry.clone(),
                    platform.map_or(crate::config::ReplyToMode::First, |p| p.reply_to_mode),
                    platform.is_none_or(|p| p.typing_indicator),
                )
                .with_media_policy(media_policy.clone())
            })
            .collect();
        let router = Router::start(RouterParts {
            home: home.clone(),
            loaded,
            store: store.clone(),
            metrics: metrics.clone(),
            platforms: links,
            max_concurrent_turns: options.max_concurrent_turns,
            client: options.client,
        })
        .await?;
        router.live().events.emit(
            "gateway:startup",
            serde_json::json!({"platforms": router.platform_names()}),
        );
        let cron_jobs = super::cron::open_jobs(home, &config).await?;
        let ingress = CancellationToken::new();
        let admin_stop = CancellationToken::new();
        let mut servers = Vec::new();
        let mut tasks = Vec::new();

        let recovered = router.recover_turns().await;
        if recovered.turns_resumed + recovered.turns_restarted > 0 {
            tracing::info!(
                resumed = recovered.turns_resumed,
                restarted = recovered.turns_restarted,
                "unfinished turns picked up"
            );
        }
        for adapter in options.adapters {
            tasks.push(tokio::spawn(supervise(
                adapter,
                router.clone(),
                health.clone(),
                options.backoff,
                ingress.clone(),
            )));
        }
        let resend = router.clone();
        tasks.push(tokio::spawn(async move {
            let sent = resend.resend_replies().await;
            if sent > 0 {
                tracing::info!(replies = sent, "undelivered replies sent again");
            }
        }));
        if let Some(deps) = router.agent_deps() {
            let mode = router
                .live()
                .config
                .display
                .background_process_notifications;
            if mode == crate::config::ProcessNotices::All {
                tracing::debug!(
                    "display.background_process_notifications: all tells each end; running-output updates are not sent by hermesd"
                );
            }
            tasks.push(tokio::spawn(super::process_notices::run(
                router.clone(),
                deps.processes.subscribe_exits(),
                ingress.clone(),
            )));
        }
        let cron = super::cron::CronScheduler::start(home, router.clone(), cron_jobs);
        let mut api_addr = None;
        if let Some(listener) = api_listener {
            api_addr = listener.local_addr().ok();
            health.register(API_PLATFORM);
            health.set(API_PLATFORM, AdapterState::Live, None);
            tracing::info!(addr = ?api_addr, "HTTP API listening");
            servers.push(api_server::serve(
                listener,
                &config.api_server,
                router.clone(),
                ingress.clone(),
            ));
        }
        let admin_addr = match admin_addr(&config.admin) {
            Ok(addr) => {
                let state = AdminState {
                    metrics: metrics.clone(),
                    adapters: health.clone(),
                    store: Some(store.clone()),
                    log: crate::logging::installed().map(|l| l.control.clone()),
                    router: Some(router.clone()),
                    credentials: super::admin::AdminCredentials::new(
                        config.admin.token.as_ref(),
                        config.api_server.key.as_ref(),
                    ),
                };
                match serve_admin(addr, state, admin_stop.clone()).await {
                    Ok((bound, server)) => {
                        servers.push(server);
                        Some(bound)
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "admin endpoint not started");
                        None
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "admin endpoint not started");
                None
            }
        };
        let janitor = tokio::spawn(janitor(router.clone(), metrics.clone(), ingress.clone()));
        if let Some(sandboxes) = router.sandboxes() {
            tasks.push(tokio::spawn(start_sandboxes(sandboxes, ingress.clone())));
        }
        tasks.push(tokio::spawn(crate::heap_stats::log_every(
            HEAP_STATS_INTERVAL,
            ingress.clone(),
        )));
        Ok(Self {
            router,
            health,
            metrics,
            api_addr,
            admin_addr,
            ingress,
            admin_stop,
            tasks,
            cron,
            janitor,
            servers,
            drain_timeout: options.drain_timeout,
        })
    }

    /// Resolves when a chat command asked the gateway to restart.
    pub async fn restart_requested(&self) {
        self.router.stop_requested.cancelled().await;
    }

    /// Whether the gateway still works, for the systemd watchdog: the janitor and the HTTP
    /// servers are still running, and the router's session table can be locked (a
    /// deadlock there blocks this call, and with it the watchdog ping). A chat adapter that
    /// failed for good is not a reason to be restarted: `/health` reports it instead.
    pub fn is_healthy(&self) -> bool {
        let problems = self.router.liveness_problems();
        for problem in &problems {
            tracing::error!(problem = %problem, "liveness probe failed");
        }
        problems.is_empty()
            && !self.janitor.is_finished()
            && self.servers.iter().all(|s| !s.is_finished())
    }

    /// Stops in phases: ingress, drain (then interrupt), flush. The store stays open for the
    /// caller to close last.
    pub async fn shutdown(self) {
        let started = Instant::now();
        tracing::info!("shutdown: stopping ingress");
        self.router.begin_shutdown();
        self.ingress.cancel();
        let (_, drained) = tokio::join!(
            self.cron.shutdown(self.drain_timeout),
            wait_idle(&self.router, self.drain_timeout)
        );
        if !drained {
            let running = self.router.running_turns();
            tracing::warn!(
                running,
                "shutdown: drain deadline passed; interrupting running turns (they resume after restart)"
            );
            self.router.interrupt_all();
            wait_idle(&self.router, Duration::from_secs(10)).await;
        }
        // Replies being sent finish; flow-control waits end at once, their replies stay owed
        // (pending) and go out after the restart.
        if !self.router.finish_deliveries(DELIVERY_FLUSH).await {
            tracing::warn!(
                "shutdown: some replies were still being sent; they are resent after restart"
            );
        }
        for task in self.tasks {
            task.abort();
        }
        self.router.mcp().shutdown(Duration::from_secs(5)).await;
        if let Some(sandboxes) = self.router.sandboxes() {
            let open = sandboxes.open_count().await;
            if tokio::time::timeout(Duration::from_secs(30), sandboxes.shutdown())
                .await
                .is_err()
            {
                tracing::warn!("shutdown: some sandboxes did not stop within 30 s");
            } else if open > 0 {
                tracing::info!(open, "shutdown: sandboxes stopped");
            }
        }
        self.janitor.abort();
        self.admin_stop.cancel();
        for server in self.servers {
            let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        }
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "shutdown: gateway stopped"
        );
    }
}

/// Removes what a killed earlier run left (its containers), then stops idle sandboxes
/// until `stop`.
async fn start_sandboxes(
    sandboxes: Arc<crate::tools::backend::Sandboxes>,
    stop: CancellationToken,
) {
    match sandboxes.factory().sweep().await {
        Ok(0) => {}
        Ok(removed) => tracing::info!(
            removed,
            kind = sandboxes.kind(),
            "removed sandboxes an earlier run left"
        ),
        Err(e) => {
            tracing::warn!(error = %e, kind = sandboxes.kind(), "could not look for sandboxes an earlier run left")
        }
    }
    sandboxes.reap_until(stop).await;
}

/// Waits until no turn runs; false if `limit` passed first.
async fn wait_idle(router: &Router, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if router.running_turns() == 0 {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn janitor(router: Arc<Router>, metrics: Arc<GatewayMetrics>, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(JANITOR_INTERVAL);
    let mut rounds = 0u64;
    let mut owed_over = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        router.evict_idle(SLOT_IDLE);
        rounds += 1;
        if rounds % 60 == 1
            && let Err(e) = router.store().prune_inbound(INBOUND_RETENTION_DAYS).await
        {
            tracing::warn!(error = %e, "cannot prune the inbound journal");
        }
        if rounds % 60 == 1
            && let Ok(deps) = &router.live().agent
        {
            let dir = deps.home.audio_cache_dir();
            let max_age = Duration::from_secs_f64(INBOUND_RETENTION_DAYS * 86_400.0);
            // Off the janitor's loop; nothing waits for it.
            drop(tokio::task::spawn_blocking(move || {
                super::audio_cache::prune_spoken_replies(
                    &dir,
                    max_age,
                    std::time::SystemTime::now(),
                )
            }));
        }
        owed_over = tend_ledger(router.store(), &metrics, owed_over).await;
    }
}

/// Prunes the ledger's finished rows and counts the owed ones into the `owed_replies` gauge,
/// warning once when they pass [`OWED_REPLIES_WARN`] (an outage piling replies up) and once
/// when they fall back. Owed rows are never deleted here. Returns whether the count is over.
async fn tend_ledger(store: &Store, metrics: &GatewayMetrics, was_over: bool) -> bool {
    if let Err(e) = store.prune_ledger().await {
        tracing::warn!(error = %e, "cannot prune the delivery ledger");
    }
    let owed = match store.owed_replies().await {
        Ok(owed) => owed,
        Err(e) => {
            tracing::warn!(error = %e, "cannot count owed replies");
            return was_over;
        }
    };
    metrics.owed_replies.store(owed, Ordering::Relaxed);
    let over = owed > OWED_REPLIES_WARN;
    if over && !was_over {
        tracing::warn!(
            owed,
            threshold = OWED_REPLIES_WARN,
            "replies are piling up undelivered (a platform outage?); they are kept and go out \
             when the platform answers again"
        );
    } else if was_over && !over {
        tracing::info!(owed, "owed replies are back under the warning threshold");
    }
    over
}
