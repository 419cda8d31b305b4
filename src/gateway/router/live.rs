//! The settings a reload (SIGHUP) may change while the router runs, behind one shared
//! handle: authorization, display/streaming/busy and reset settings, and the agent's
//! dependencies (model, provider, fallbacks). Every event reads one snapshot ([`Live`]), so a
//! reload is atomic for it; a turn keeps the `AgentDeps` it started with, so turns in flight
//! finish on the old model while new turns use the new one.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Router;
use super::prompts;
use crate::agent::AgentDeps;
use crate::agent::provider::{ModelClient, ProviderError};
use crate::config::{Config, LoadedConfig};
use crate::gateway::authorize::AuthPolicy;
use crate::home::HermesHome;

/// One consistent set of reloadable settings.
#[derive(Debug)]
pub struct Live {
    pub config: Config,
    /// The environment after the `.env` merge (authorization reads some lists from it).
    pub env: BTreeMap<String, String>,
    pub auth: AuthPolicy,
    /// The agent's dependencies, or why there is no model provider.
    pub agent: Result<Arc<AgentDeps>, NoProvider>,
    /// The approved gateway event hooks (`$HERMES_HOME/hooks/`), found again at each reload.
    pub events: crate::hooks::EventHooks,
}

impl Live {
    /// A snapshot of `loaded`; the gateway hooks of `home` are found (again) for it.
    pub(super) fn new(
        home: &HermesHome,
        loaded: &LoadedConfig,
        auth: AuthPolicy,
        agent: Result<Arc<AgentDeps>, NoProvider>,
    ) -> Self {
        Self {
            config: loaded.config.clone(),
            env: loaded.env.clone(),
            auth,
            agent,
            events: crate::hooks::EventHooks::start(
                home,
                &loaded.env,
                loaded.config.hooks.auto_accept,
            ),
        }
    }
}

/// Why the router has no model to run turns with. Its text is one line saying what to set;
/// it is shared by every snapshot until a reload fixes the configuration.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct NoProvider(Arc<ProviderError>);

impl From<ProviderError> for NoProvider {
    fn from(error: ProviderError) -> Self {
        Self(Arc::new(error))
    }
}

/// `/reload-mcp`: every MCP server reconnects now with the settings in force, and the
/// daemon is asked to read config.yaml again, so servers added or changed there since
/// are started too.
pub(super) fn reload_mcp(router: &Router) -> usize {
    let live = router.live();
    router.mcp.restart_all(
        &live.config.mcp_servers,
        &crate::agent::assembly::mcp_net(&live.config),
        &live.env,
    );
    router.live.request_reload();
    live.config.mcp_servers.len()
}

/// `/personality`: this snapshot with another `agent.system_prompt`, until the next reload
/// reads the same text back from config.yaml.
pub(super) fn set_system_prompt(router: &Router, text: String) {
    let old = router.live();
    let mut config = old.config.clone();
    config.personality.system_prompt = text;
    router.live.replace(Arc::new(Live {
        config,
        env: old.env.clone(),
        auth: old.auth.clone(),
        agent: old.agent.clone(),
        events: old.events.clone(),
    }));
}

/// Whether anything the agent's dependencies are built from differs.
fn agent_inputs_changed(old: &Live, new: &LoadedConfig, home: &HermesHome) -> bool {
    let (a, b) = (&old.config, &new.config);
    // An approval given since (`hermesd hooks accept`) counts from the reload on.
    let hooks_changed = match &old.agent {
        Ok(deps) => !deps.hooks.is_current(&b.hooks, home),
        Err(_) => false,
    };
    a.model != b.model
        || a.providers != b.providers
        || a.fallback_providers != b.fallback_providers
        || a.agent.max_turns != b.agent.max_turns
        || a.compression != b.compression
        || a.toolsets != b.toolsets
        || a.mcp_servers != b.mcp_servers
        || a.terminal != b.terminal
        || old.env != new.env
        || hooks_changed
}

/// Applies a validated, reloaded configuration at once. The agent's dependencies are
/// rebuilt only when their inputs changed, sharing their stateful parts (approvals,
/// background processes, memory, to-dos) with the old ones.
pub(super) fn apply_reload(router: &Router, loaded: &LoadedConfig) {
    router.mcp.apply(
        &loaded.config.mcp_servers,
        &crate::agent::assembly::mcp_net(&loaded.config),
        &loaded.env,
    );
    let old = router.live();
    let agent = if agent_inputs_changed(&old, loaded, &router.home) {
        match (ModelClient::from_config(&loaded.config), &old.agent) {
            (Ok(client), Ok(deps)) => Ok(Arc::new(deps.reconfigured(loaded, client))),
            (Ok(client), Err(_)) => crate::agent::assemble(
                &router.home,
                loaded,
                router.store.clone(),
                prompts::user_prompts(Arc::downgrade(&router.prompts)),
                Some(client),
                &router.mcp,
            )
            .map_err(NoProvider::from),
            (Err(e), _) => Err(NoProvider::from(e)),
        }
    } else {
        old.agent.clone()
    };
    if let Err(reason) = &agent {
        tracing::warn!("{reason}; messages will be answered with setup instructions");
    }
    crate::agent::assembly::connect_sampling(&router.mcp, agent.as_deref().ok());
    let auth = AuthPolicy::from_config(&loaded.config, &loaded.env);
    let fresh = Arc::new(Live::new(&router.home, loaded, auth, agent));
    router.live.replace(fresh);
}
