//! SIGHUP for `hermesd run`: the handler, and one reload — load as start-up does, mask new
//! secrets, then either refuse an invalid configuration whole or apply it through the
//! router's live snapshot and log what changed and what needs a restart
//! ([`crate::gateway::reload`] decides which is which).

use std::collections::BTreeMap;

use super::Lifecycle;
use crate::config;
use crate::gateway::reload;
use crate::gateway::runner::GatewayRunner;
use crate::home::HermesHome;

/// What a SIGHUP reload needs: where and how start-up loaded the configuration, and the
/// configuration now in force.
pub(super) struct Reload<'a> {
    pub home: &'a HermesHome,
    pub env: &'a BTreeMap<String, String>,
    /// A first run enabled the HTTP API itself; a reload keeps it so.
    pub forced_api: bool,
    pub current: config::LoadedConfig,
    /// Reloads so far; each one's log lines carry its number (`reload #2`).
    pub count: u64,
}

impl Reload<'_> {
    /// Re-reads config.yaml, `.env` and the environment and applies the result, or keeps
    /// everything as it is when it is invalid. New secrets are masked before anything is
    /// logged.
    pub fn run(&mut self, runner: &GatewayRunner, lifecycle: &Lifecycle) {
        self.count += 1;
        let n = self.count;
        lifecycle.notify("reloading", lifecycle.notifier.reloading());
        let result = config::load(self.home, self.env);
        if let Some(logging) = crate::logging::installed() {
            let secrets = crate::logging::reloaded_secrets(self.home, result.as_ref().ok());
            logging.redactor.add_all(secrets);
        }
        match result {
            Err(errors) => {
                for error in &errors.0 {
                    tracing::error!("reload #{n}: {error}");
                }
                tracing::error!(
                    "reload #{n} rejected: the configuration is invalid; nothing changed, \
                     still running with the previous settings"
                );
            }
            Ok(mut new) => {
                crate::agent::workdir::resolve_for_gateway(&mut new.config.terminal, &new.env);
                if self.forced_api {
                    new.config.api_server.enabled = true;
                }
                for warning in &new.warnings {
                    tracing::warn!("reload #{n}: {warning}");
                }
                let changes = reload::changes(&self.current, &new);
                runner.router.apply_reload(&new);
                self.current = new;
                let applied = match changes.applied.is_empty() {
                    true => "nothing that applies live changed".to_owned(),
                    false => format!("changed {}", changes.applied.join(", ")),
                };
                tracing::info!("reload #{n} applied: {applied}");
                if !changes.need_restart.is_empty() {
                    tracing::warn!(
                        "reload #{n}: restart hermesd to apply {} (read only at start; the old values stay in force)",
                        changes.need_restart.join(", ")
                    );
                }
            }
        }
        lifecycle.notify("ready", lifecycle.notifier.ready());
    }
}

/// The SIGHUP handler, installed with the shutdown handlers (before "started"), so a reload
/// request never kills the daemon with the default action.
pub(super) struct ReloadSignal {
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl ReloadSignal {
    pub fn install() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let hup = signal(SignalKind::hangup())
                .inspect_err(|e| tracing::warn!(error = %e, "SIGHUP reload unavailable"))
                .ok();
            Self { hup }
        }
        #[cfg(not(unix))]
        {
            Self {}
        }
    }

    /// Resolves on each SIGHUP; never without a handler.
    pub async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(hup) = self.hup.as_mut()
            && hup.recv().await.is_some()
        {
            return;
        }
        std::future::pending::<()>().await
    }
}
