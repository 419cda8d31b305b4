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
    let code = runtime.block_on(serve(home, loaded.env));
    drop(instance);
    code
}

async fn serve(home: &HermesHome, env: BTreeMap<String, String>) -> i32 {
    let options = StoreOptions {
        env,
        ..StoreOptions::default()
    };
    let store = match Store::open_with(&home.state_db(), options) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("error: cannot open {}: {e}", home.state_db().display());
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
    let signal = shutdown.wait().await;
    tracing::info!(signal, "shutting down");
    store.close().await;
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
