//! `hermesd run`: the long-running daemon.
//!
//! It validates the configuration (exit 78 on any error, before anything else starts; on a
//! first run with nothing configured it enables the HTTP API instead), becomes the home's
//! only gateway (`gateway.lock`/`gateway.pid`, `--replace` to take over), opens state.db,
//! starts the [`GatewayRunner`] and serves until SIGTERM/SIGINT or `/restart` (exit 75),
//! then shuts the runner down in phases and closes the store last. The lock is released
//! after the store closes.
//!
//! While serving, SIGHUP reloads the configuration the way start-up loads it: an invalid
//! one is reported and changes nothing; a valid one is applied at once where that is safe
//! (see `gateway::reload`) and what needs a restart is named. The systemd watchdog is
//! pinged from the same loop, after a health probe, never from a detached timer.

mod sighup;

use std::collections::BTreeMap;

use super::EXIT_FAILURE;
use crate::config::{self, EXIT_CONFIG};
use std::time::Duration;

use crate::gateway::first_run;
use crate::gateway::instance_lock::InstanceLock;
use crate::gateway::platforms;
use crate::gateway::process_info;
use crate::gateway::runner::{GatewayRunner, RunnerOptions};
use crate::gateway::runtime_status::{GatewayState, RuntimeStatus};
use crate::gateway::sd_notify::{self, Notifier};
use crate::gateway::supervisor::Backoff;
use crate::home::HermesHome;
use sighup::{Reload, ReloadSignal};

#[derive(Debug, Default, clap::Args)]
pub struct RunArgs {
    /// Stop the gateway already running for this home (SIGTERM) and take its place.
    #[arg(long)]
    pub replace: bool,
}

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, args: &RunArgs) -> i32 {
    let mut forced_api = false;
    let mut loaded = match load_config(home, env, true) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    if first_run::is_first_run(&loaded.config, &loaded.env, &home.config_yaml()) {
        if let Err(e) = home.ensure_exists() {
            eprintln!(
                "error: cannot create HERMES_HOME {}: {e}",
                home.path().display()
            );
            return EXIT_FAILURE;
        }
        if loaded.config.api_server.key.is_none()
            && let Err(e) = first_run::generate_api_key(&home.dotenv())
        {
            eprintln!("error: cannot write {}: {e}", home.dotenv().display());
            return EXIT_FAILURE;
        }
        // Reloaded only to pick up the generated key: its warnings were logged already.
        loaded = match load_config(home, env, false) {
            Ok(loaded) => loaded,
            Err(code) => return code,
        };
        loaded.config.api_server.enabled = true;
        forced_api = true;
        let api = &loaded.config.api_server;
        let has_provider = crate::agent::provider::ModelClient::from_config(&loaded.config).is_ok();
        // Logged (not printed) so JSON logs stay JSON and the redactor masks the home path.
        let text = first_run::instructions(&home.dotenv(), &api.host, api.port, has_provider);
        for line in text.lines() {
            tracing::info!("{line}");
        }
    }
    if let Err(e) = home.ensure_exists() {
        eprintln!(
            "error: cannot create HERMES_HOME {}: {e}",
            home.path().display()
        );
        return EXIT_FAILURE;
    }
    home.warn_if_shared();
    let argv: Vec<String> = std::env::args().collect();
    let instance = match InstanceLock::acquire(home.path(), &argv, args.replace) {
        Ok(lock) => lock,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILURE;
        }
    };
    let runtime = match super::runtime::multi_thread() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    let lifecycle = Lifecycle::start(home, &argv, env);
    let reload = Reload {
        home,
        env,
        forced_api,
        current: loaded.clone(),
        count: 0,
    };
    let code = runtime.block_on(serve(home, loaded, &lifecycle, reload));
    drop(instance);
    code
}

/// What the outside world is told about our state: `gateway_state.json` and systemd.
/// Failing to tell it is logged, never fatal: the gateway itself still works.
struct Lifecycle {
    status: Option<RuntimeStatus>,
    notifier: Notifier,
    watchdog: Option<std::time::Duration>,
}

impl Lifecycle {
    fn start(home: &HermesHome, argv: &[String], env: &BTreeMap<String, String>) -> Self {
        let status = RuntimeStatus::create(home.path(), argv)
            .inspect_err(|e| tracing::warn!(error = %e, "cannot write gateway_state.json"))
            .ok();
        Self {
            status,
            notifier: Notifier::from_env(env),
            watchdog: sd_notify::watchdog_interval(env, process_info::current_pid()),
        }
    }

    fn set_state(&self, state: GatewayState, exit_reason: Option<&str>) {
        if let Some(status) = &self.status
            && let Err(e) = status.set_state(state, exit_reason)
        {
            tracing::warn!(error = %e, "cannot update gateway_state.json");
        }
        let sent = match state {
            GatewayState::Running => self.notifier.ready(),
            GatewayState::Draining => self.notifier.stopping(),
            GatewayState::Starting | GatewayState::Stopped => Ok(()),
        };
        if let Err(e) = sent {
            tracing::warn!(error = %e, "cannot notify the service manager");
        }
    }

    fn notify(&self, what: &str, sent: std::io::Result<()>) {
        if let Err(e) = sent {
            tracing::warn!(error = %e, "cannot notify the service manager ({what})");
        }
    }

    /// The watchdog's timer (`WatchdogSec=` in the unit), polled by the serve loop.
    fn watchdog_ticks(&self) -> Option<tokio::time::Interval> {
        let mut ticks = tokio::time::interval(self.watchdog?);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Some(ticks)
    }

    /// Pings the watchdog only while the gateway is healthy: a wedged one stops pinging and
    /// systemd restarts it.
    fn pet_watchdog(&self, runner: &GatewayRunner) {
        if runner.is_healthy() {
            self.notify("watchdog", self.notifier.watchdog());
        } else {
            tracing::error!("the gateway is unhealthy; withholding the watchdog ping");
        }
    }
}

async fn serve(
    home: &HermesHome,
    loaded: config::LoadedConfig,
    lifecycle: &Lifecycle,
    mut reload: Reload<'_>,
) -> i32 {
    let built = match platforms::build_adapters(home, &loaded) {
        Ok(built) => built,
        Err(errors) => {
            for error in &errors {
                eprintln!(
                    "{}",
                    crate::logging::mask(&format!("config error: {error}"))
                );
            }
            lifecycle.set_state(
                GatewayState::Stopped,
                Some("invalid platform configuration"),
            );
            return EXIT_CONFIG;
        }
    };
    let _token_locks = match platforms::claim_tokens(home, &loaded) {
        Ok(locks) => locks,
        Err(e) => {
            eprintln!("error: {e}");
            lifecycle.set_state(GatewayState::Stopped, Some("credential in use"));
            return EXIT_FAILURE;
        }
    };
    let store = match crate::gateway::cluster::open_configured_store(home, &loaded).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!("error: {e}");
            lifecycle.set_state(GatewayState::Stopped, Some("state database unavailable"));
            return EXIT_FAILURE;
        }
    };
    if store.is_shared() {
        let coord = store.coordinator();
        tracing::info!(
            instance_id = coord.instance_id(),
            database = store.shown_location(),
            lease_seconds = coord.lease_ttl().as_secs_f64(),
            "state on PostgreSQL"
        );
    }
    if let Some(discord) = &built.discord {
        platforms::remember_discord_conversations(home, &store, discord).await;
    }
    let adapters = built.adapters;
    let webhooks_stop = tokio_util::sync::CancellationToken::new();
    match platforms::serve_webhooks(built.webhooks, webhooks_stop.clone()).await {
        Ok(bound) if !bound.is_empty() => {
            tracing::info!(addrs = ?bound, "webhook endpoint listening")
        }
        Ok(_) => {}
        Err(e) => {
            eprintln!("error: cannot serve the webhook endpoint: {e}");
            store.close().await;
            return EXIT_FAILURE;
        }
    }
    // Handlers are installed before "started" is announced: a SIGTERM that arrives the moment
    // a supervisor sees us up must still shut down cleanly.
    let shutdown = ShutdownSignals::install();
    let mut hangup = ReloadSignal::install();
    let runner_options = RunnerOptions {
        adapters,
        backoff: backoff_from_env(&loaded.env),
        drain_timeout: secs_from_env(&loaded.env, "HERMESD_DRAIN_TIMEOUT_SECS", 30.0),
        ..RunnerOptions::default()
    };
    let runner = match GatewayRunner::start(home, loaded, store.clone(), runner_options).await {
        Ok(runner) => runner,
        Err(e) => {
            eprintln!("error: {e}");
            store.close().await;
            lifecycle.set_state(GatewayState::Stopped, Some("start failed"));
            return if e.is_config() {
                EXIT_CONFIG
            } else {
                EXIT_FAILURE
            };
        }
    };
    // Recorded before the start is announced: whoever waits for the line finds the file.
    if let Some(addr) = runner.admin_addr {
        crate::gateway::admin_addr_file::publish(home.path(), addr);
    }
    tracing::info!(
        home = %home.path().display(),
        schema_version = store.schema().version,
        api = %runner.api_addr.map(|a| a.to_string()).unwrap_or_default(),
        admin = %runner.admin_addr.map(|a| a.to_string()).unwrap_or_default(),
        "hermesd started"
    );
    lifecycle.set_state(GatewayState::Running, None);
    let mut watchdog = lifecycle.watchdog_ticks();
    let stop = shutdown.wait();
    tokio::pin!(stop);
    let reason = loop {
        tokio::select! {
            signal = &mut stop => break signal,
            _ = runner.restart_requested() => break "restart requested",
            _ = hangup.recv() => reload.run(&runner, lifecycle),
            _ = runner.router.reload_requested() => reload.run(&runner, lifecycle),
            _ = next_tick(&mut watchdog) => lifecycle.pet_watchdog(&runner),
        }
    };
    tracing::info!(reason, "shutting down");
    lifecycle.set_state(GatewayState::Draining, None);
    let restart = runner.router.restart_requested();
    webhooks_stop.cancel();
    runner.shutdown().await;
    crate::gateway::admin_addr_file::withdraw(home.path());
    store.close().await;
    lifecycle.set_state(GatewayState::Stopped, Some(reason));
    tracing::info!("state.db closed; bye");
    if restart { EXIT_RESTART } else { 0 }
}

/// Exit code asking the service manager to start us again (`/restart`).
pub const EXIT_RESTART: i32 = 75;

fn load_config(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    log_warnings: bool,
) -> Result<config::LoadedConfig, i32> {
    match config::load(home, env) {
        Ok(mut loaded) => {
            crate::agent::workdir::resolve_for_gateway(&mut loaded.config.terminal, &loaded.env);
            for warning in loaded.warnings.iter().filter(|_| log_warnings) {
                tracing::warn!("{warning}");
            }
            Ok(loaded)
        }
        Err(errors) => {
            eprintln!("{}", crate::logging::mask(&errors.to_string()));
            eprintln!("hermesd: invalid configuration; fix the errors above (exit {EXIT_CONFIG})");
            Err(EXIT_CONFIG)
        }
    }
}

/// A timing variable `config::load` has already validated (an invalid one exited 78).
fn secs_from_env(env: &BTreeMap<String, String>, name: &str, default: f64) -> Duration {
    config::durations::env_seconds(env, name)
        .ok()
        .flatten()
        .unwrap_or_else(|| Duration::from_secs_f64(default))
}

/// `HERMESD_ADAPTER_BACKOFF_SECS` / `HERMESD_ADAPTER_BACKOFF_MAX_SECS` override the
/// 30 s → 300 s restart backoff.
fn backoff_from_env(env: &BTreeMap<String, String>) -> Backoff {
    let default = Backoff::default();
    Backoff {
        initial: secs_from_env(
            env,
            "HERMESD_ADAPTER_BACKOFF_SECS",
            default.initial.as_secs_f64(),
        ),
        max: secs_from_env(
            env,
            "HERMESD_ADAPTER_BACKOFF_MAX_SECS",
            default.max.as_secs_f64(),
        ),
        ..default
    }
}

/// The watchdog timer's next tick; never, without a watchdog.
async fn next_tick(ticks: &mut Option<tokio::time::Interval>) {
    match ticks {
        Some(ticks) => {
            ticks.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// SIGTERM and SIGINT handlers, installed up front.
struct ShutdownSignals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl ShutdownSignals {
    fn install() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Self {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        {
            Self {}
        }
    }

    /// Resolves on the first signal and names it.
    async fn wait(self) -> &'static str {
        #[cfg(unix)]
        {
            let (mut term, mut int) = (self.term, self.int);
            tokio::select! {
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => "SIGTERM",
                _ = async { match int.as_mut() { Some(i) => { i.recv().await; } None => std::future::pending::<()>().await } } => "SIGINT",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    }
}
