//! `hermesd run`: the long-running daemon.
//!
//! Today it validates the configuration (exit 78 on any error, before anything else starts),
//! opens state.db behind its writer, and serves until SIGTERM/SIGINT, then closes the store
//! last so every acknowledged write is checkpointed. Adapters and the router plug in here.
//! Before the store opens it becomes the home's only gateway (`gateway.lock`/`gateway.pid`,
//! `--replace` to take over from a running one); the lock is released after the store closes.

use std::collections::BTreeMap;

use super::EXIT_FAILURE;
use crate::config::{self, EXIT_CONFIG};
use crate::gateway::instance_lock::InstanceLock;
use crate::gateway::process_info;
use crate::gateway::runtime_status::{GatewayState, RuntimeStatus};
use crate::gateway::sd_notify::{self, Notifier};
use crate::home::HermesHome;
use crate::state::{Store, StoreOptions};

#[derive(Debug, Default, clap::Args)]
pub struct RunArgs {
    /// Stop the gateway already running for this home (SIGTERM) and take its place.
    #[arg(long)]
    pub replace: bool,
}

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, args: &RunArgs) -> i32 {
    let loaded = match config::load(home, env) {
        Ok(loaded) => loaded,
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!("hermesd: invalid configuration; fix the errors above (exit {EXIT_CONFIG})");
            return EXIT_CONFIG;
        }
    };
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    if let Err(e) = home.ensure_exists() {
        eprintln!(
            "error: cannot create HERMES_HOME {}: {e}",
            home.path().display()
        );
        return EXIT_FAILURE;
    }
    let argv: Vec<String> = std::env::args().collect();
    let instance = match InstanceLock::acquire(home.path(), &argv, args.replace) {
        Ok(lock) => lock,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    let lifecycle = Lifecycle::start(home, &argv, env);
    let code = runtime.block_on(serve(home, loaded.env, &lifecycle));
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

    /// Pets the systemd watchdog until dropped (`WatchdogSec=` in the unit).
    fn spawn_watchdog(&self) -> Option<tokio::task::JoinHandle<()>> {
        let interval = self.watchdog?;
        let notifier = self.notifier.clone();
        Some(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            loop {
                ticks.tick().await;
                if let Err(e) = notifier.watchdog() {
                    tracing::warn!(error = %e, "cannot send the watchdog ping");
                }
            }
        }))
    }
}

async fn serve(home: &HermesHome, env: BTreeMap<String, String>, lifecycle: &Lifecycle) -> i32 {
    let options = StoreOptions {
        env,
        ..StoreOptions::default()
    };
    let store = match Store::open_with(&home.state_db(), options) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("error: cannot open {}: {e}", home.state_db().display());
            lifecycle.set_state(GatewayState::Stopped, Some("state.db unavailable"));
            return EXIT_FAILURE;
        }
    };
    // Handlers are installed before "started" is announced: a SIGTERM that arrives the moment
    // a supervisor sees us up must still shut down cleanly.
    let shutdown = ShutdownSignals::install();
    tracing::info!(
        home = %home.path().display(),
        schema_version = store.schema().version,
        "hermesd started; state.db open"
    );
    lifecycle.set_state(GatewayState::Running, None);
    let watchdog = lifecycle.spawn_watchdog();
    let signal = shutdown.wait().await;
    tracing::info!(signal, "shutting down");
    lifecycle.set_state(GatewayState::Draining, None);
    store.close().await;
    if let Some(watchdog) = watchdog {
        watchdog.abort();
    }
    lifecycle.set_state(GatewayState::Stopped, Some(signal));
    tracing::info!("state.db closed; bye");
    0
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
