//! The router: every inbound event passes through here. It authorizes the sender, journals
//! the event durably (dropping redeliveries) before the adapter may acknowledge it, and
//! hands it to the session key's slot, where commands are answered without the model and
//! messages become agent turns, one at a time per session. Replies are recorded as
//! delivery obligations before they are sent.

mod authority;
mod busy;
mod clustered;
pub mod commands;
mod cron_command;
mod dead_letter;
mod failure;
mod fault;
mod journal_pull;
mod live;
mod liveness;
mod media_turn;
mod model_command;
mod outbox;
mod pending_media;
mod platforms;
mod prompts;
mod recovery;
mod respond;
mod session;
mod session_commands;
pub mod slot;
mod steer;
mod title;
mod turn;
mod turn_budget;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use hermes_adapter::{MessageEvent, RecordOutcome};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentDeps;
use crate::config::LoadedConfig;
use crate::gateway::authorize::{AuthPolicy, Authority, authority, unauthorized_reply};
use crate::gateway::metrics::GatewayMetrics;
use crate::gateway::pairing::PairingStore;
use crate::gateway::routing::RoutingIndex;
use crate::gateway::session_key::{KeyPolicy, build_session_key};
use crate::home::HermesHome;
use crate::state::{InboundRecord, Store};

pub use dead_letter::DEAD_LETTER_NOTICE;
pub use live::Live;
pub use platforms::PlatformLink;
pub use recovery::Recovered;
pub use slot::{ApiReply, ApiResponder};
use slot::{Job, Slot};
pub use turn::no_provider_text;
pub use turn_budget::{TURN_IDLE_WARNING, TURN_TIMEOUT_NOTICE};

/// The platform name of the HTTP API: its requests are answered in the HTTP response, not
/// through the delivery ledger.
pub const API_PLATFORM: &str = "api_server";

/// What the router needs at start.
#[derive(Debug)]
pub struct RouterParts {
    pub home: HermesHome,
    pub loaded: LoadedConfig,
    pub store: Store,
    pub metrics: Arc<GatewayMetrics>,
    pub platforms: Vec<PlatformLink>,
    /// Turns running at once across all sessions.
    pub max_concurrent_turns: usize,
    /// A test/benchmark model client; `None` builds one from the configuration.
    pub client: Option<crate::agent::provider::ModelClient>,
}

/// The shared router (see the module docs).
pub struct Router {
    home: HermesHome,
    store: Store,
    /// What a reload may change (authorization, display, resets, the model): see `live.rs`.
    live: RwLock<Arc<Live>>,
    pairing: PairingStore,
    key_policy: KeyPolicy,
    routing: RoutingIndex,
    platforms: HashMap<String, PlatformLink>,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    /// Held by a turn while it runs, released before its reply is sent (see `outbox.rs`).
    turn_limit: Arc<Semaphore>,
    outbox: outbox::Outbox,
    metrics: Arc<GatewayMetrics>,
    paused: Mutex<HashSet<String>>,
    started: Instant,
    restart: AtomicBool,
    shutting_down: AtomicBool,
    /// Fired by `/restart`: the runner drains and exits 75.
    pub stop_requested: CancellationToken,
    /// The MCP servers whose tools every agent's registry reads.
    mcp: crate::tools::mcp::McpHub,
    /// PostgreSQL: the session leases shared with the other instances (`clustered.rs`).
    cluster: Option<Arc<crate::gateway::cluster::Cluster>>,
    me: Weak<Router>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("platforms", &self.platforms.keys().collect::<Vec<_>>())
            .field("routes", &self.routing.len())
            .finish_non_exhaustive()
    }
}

/// The networking MCP's HTTP servers are reached through: the configured proxies and CA
/// files (already checked when the configuration loaded; the direct default otherwise).
pub(crate) fn mcp_net(config: &crate::config::Config) -> hermes_adapter::net::Net {
    hermes_adapter::net::Net::new(&config.network).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "MCP servers use direct connections");
        hermes_adapter::net::Net::direct()
    })
}

/// `deps` with the MCP servers' tools beside the built-ins.
pub(crate) fn with_mcp_tools(
    deps: Arc<AgentDeps>,
    mcp: &crate::tools::mcp::McpHub,
) -> Arc<AgentDeps> {
    match Arc::try_unwrap(deps) {
        Ok(deps) => Arc::new(deps.with_tool_overlay(mcp.overlay())),
        Err(shared) => shared,
    }
}

impl Router {
    /// The MCP servers of this gateway.
    pub fn mcp(&self) -> &crate::tools::mcp::McpHub {
        &self.mcp
    }

    /// Builds the router: loads the routing index and the pairing store and prepares the
    /// agent (a missing model provider is not fatal: messages get a reply saying what to set).
    pub async fn start(parts: RouterParts) -> anyhow::Result<Arc<Self>> {
        let RouterParts {
            home,
            loaded,
            store,
            metrics,
            platforms,
            max_concurrent_turns,
            client,
        } = parts;
        store.ensure_gateway_schema().await?;
        let scope = home.path().join("sessions");
        if let Err(e) = std::fs::create_dir_all(&scope) {
            tracing::warn!(error = %e, "cannot create the sessions directory");
        }
        let scope = if store.is_shared() {
            // Instances sharing PostgreSQL have homes of their own (perhaps at different
            // paths); their routing entries are the cluster's, under one scope.
            String::new()
        } else {
            std::fs::canonicalize(&scope)
                .unwrap_or(scope)
                .display()
                .to_string()
        };
        let routing = RoutingIndex::load(&store, scope).await?;
        let pairing = crate::gateway::shared_state::pairing_store(&home, &loaded.config)?
            .with_env(loaded.env.clone());
        let auth = AuthPolicy::from_config(&loaded.config, &loaded.env);
        let key_policy = KeyPolicy {
            group_sessions_per_user: loaded.config.group_sessions_per_user,
            thread_sessions_per_user: loaded.config.thread_sessions_per_user,
        };
        let outbox = outbox::Outbox::default();
        let mcp = crate::tools::mcp::McpHub::new();
        mcp.apply(
            &loaded.config.mcp_servers,
            &mcp_net(&loaded.config),
            &loaded.env,
        );
        let router = Arc::new_cyclic(|me: &Weak<Router>| {
            let prompts = prompts::user_prompts(me.clone());
            let agent = match client {
                Some(client) => Ok(Arc::new(AgentDeps::with_client(
                    &home,
                    &loaded,
                    store.clone(),
                    prompts,
                    client,
                ))),
                None => AgentDeps::build(&home, &loaded, store.clone(), prompts)
                    .map(Arc::new)
                    .map_err(|e| e.to_string()),
            }
            .map(|deps| with_mcp_tools(deps, &mcp));
            Router {
                home: home.clone(),
                store: store.clone(),
                live: RwLock::new(Arc::new(Live {
                    config: loaded.config.clone(),
                    env: loaded.env.clone(),
                    auth,
                    agent,
                })),
                pairing,
                key_policy,
                routing,
                platforms: platforms
                    .into_iter()
                    .map(|mut link| {
                        link.deliverer = link
                            .deliverer
                            .with_stop_waiting(outbox.stop_waiting.clone());
                        (link.name.clone(), link)
                    })
                    .collect(),
                slots: Mutex::new(HashMap::new()),
                turn_limit: Arc::new(Semaphore::new(max_concurrent_turns.max(1))),
                outbox,
                metrics,
                paused: Mutex::new(HashSet::new()),
                started: Instant::now(),
                restart: AtomicBool::new(false),
                shutting_down: AtomicBool::new(false),
                stop_requested: CancellationToken::new(),
                mcp: mcp.clone(),
                cluster: crate::gateway::cluster::Cluster::new(&store),
                me: me.clone(),
            }
        });
        let live = router.live();
        if let Err(reason) = &live.agent {
            tracing::warn!("{reason}; messages will be answered with setup instructions");
        }
        // MCP servers' sampling requests go to the agent's model.
        mcp.set_model_client(live.agent.as_ref().ok().map(|deps| deps.client.clone()));
        if let Some(cluster) = &router.cluster {
            tracing::info!(
                instance_id = cluster.instance_id(),
                "sharing sessions with other instances through PostgreSQL"
            );
            router.start_cluster_tasks(cluster);
        }
        Ok(router)
    }

    /// Whether `/restart` asked the daemon to restart (exit 75).
    pub fn restart_requested(&self) -> bool {
        self.restart.load(Ordering::SeqCst)
    }

    /// From now on an interrupted turn is left unfinished in the journal, so the next start
    /// resumes it instead of dropping it.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    pub fn routes(&self) -> usize {
        self.routing.len()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    fn arc(&self) -> Arc<Router> {
        self.me.upgrade().expect("the router outlives its tasks")
    }

    pub fn session_key(&self, event: &MessageEvent) -> String {
        build_session_key(&event.source, self.key_policy, None)
    }

    /// Handles one inbound event from a chat platform; the answer tells the adapter whether
    /// it may acknowledge the event to the platform.
    pub async fn handle_inbound(&self, event: MessageEvent) -> RecordOutcome {
        GatewayMetrics::incr(&self.metrics.events_in);
        // The pairing files are read on tokio's blocking pool, not on a runtime thread.
        let Some(authority) = self.authority_of(&event.source).await else {
            self.deny(&event).await;
            return RecordOutcome::Refused;
        };
        if let Some(refusal) = self.refused_answer(&event, authority) {
            self.send_direct(&event.source, &refusal).await;
            return RecordOutcome::Refused;
        }
        let source = &event.source;
        let key = self.session_key(&event);
        let payload = serde_json::to_value(&event).unwrap_or_default();
        let recorded = self
            .store
            .record_inbound(&source.platform, &event.event_id, &key, payload)
            .await;
        match recorded {
            Ok(InboundRecord::Recorded) => {}
            Ok(InboundRecord::Duplicate) => {
                GatewayMetrics::incr(&self.metrics.duplicates_dropped);
                tracing::debug!(platform = %source.platform, event_id = %event.event_id, "duplicate delivery dropped");
                return RecordOutcome::Duplicate;
            }
            Err(e) => {
                tracing::error!(platform = %source.platform, error = %e, "cannot journal an inbound event; the platform will redeliver it");
                return RecordOutcome::Failed;
            }
        }
        let job = Job {
            event,
            resumed: false,
            api: None,
            authority,
        };
        match &self.cluster {
            Some(cluster) => self.offer_clustered(cluster, key, job),
            None => self.dispatch(key, job),
        }
        RecordOutcome::Recorded
    }

    /// Runs one HTTP API request through the session's slot and waits for its answer.
    pub async fn submit_api(
        &self,
        event: MessageEvent,
        deltas: Option<crate::agent::EventSink>,
        system: Option<String>,
    ) -> Result<ApiReply, String> {
        GatewayMetrics::incr(&self.metrics.events_in);
        let key = self.session_key(&event);
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.dispatch(
            key,
            Job {
                event,
                resumed: false,
                api: Some(Arc::new(
                    ApiResponder::new(reply, deltas).with_system(system),
                )),
                // The API server checked the operator's key before the request got here.
                authority: Authority::AllowedUser,
            },
        );
        answer
            .await
            .unwrap_or_else(|_| Err("the gateway is shutting down".to_owned()))
    }

    /// How far the sender of `source` is trusted; `None` when they may not use the bot.
    /// The pairing files are read on tokio's blocking pool, not on a runtime thread.
    pub(crate) async fn authority_of(
        &self,
        source: &hermes_adapter::SessionSource,
    ) -> Option<Authority> {
        let router = self.arc();
        let asker = source.clone();
        tokio::task::spawn_blocking(move || authority(&asker, &router.live().auth, &router.pairing))
            .await
            .unwrap_or(None)
    }

    /// An unauthorized sender: a pairing code for a DM where the platform pairs, else nothing.
    async fn deny(&self, event: &MessageEvent) {
        let now = crate::state::now_epoch();
        // A pairing request takes the pairing lock and writes files: the blocking pool's work.
        let router = self.arc();
        let asker = event.source.clone();
        let reply = tokio::task::spawn_blocking(move || {
            unauthorized_reply(&asker, &router.live().auth, &router.pairing, now)
        })
        .await
        .unwrap_or(Ok(None));
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                tracing::warn!(error = %e, "pairing store unavailable");
                None
            }
        };
        tracing::info!(
            platform = %event.source.platform,
            user_id = event.source.user_id.as_deref().unwrap_or(""),
            paired = reply.is_some(),
            "unauthorized message ignored"
        );
        if let Some(text) = reply {
            self.send_direct(&event.source, &text).await;
        }
    }

    fn slot(&self, key: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots
            .entry(key.to_owned())
            .or_insert_with(|| Arc::new(Slot::new(key.to_owned())))
            .clone()
    }

    /// Evicts slots idle longer than `idle` with nothing queued or running, bounding memory
    /// by the number of recently active conversations.
    /// The per-session state the agent keeps in memory (to-do lists, session approvals,
    /// shell cwds) goes with the slot.
    pub fn evict_idle(&self, idle: Duration) -> usize {
        let mut evicted = Vec::new();
        {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.retain(|key, slot| {
                let state = slot.lock();
                let keep = state.worker
                    || state.running.is_some()
                    || !state.queue.is_empty()
                    || state.approval.is_some()
                    || state.clarify.is_some()
                    || state.last_active.is_some_and(|t| t.elapsed() < idle);
                if !keep {
                    evicted.push((
                        key.clone(),
                        state.agent.as_ref().map(|a| a.session_id().to_owned()),
                    ));
                }
                keep
            });
        }
        if let Ok(deps) = &self.live().agent {
            for (key, cached) in &evicted {
                let routed = self.current_session_id(key);
                for session_id in cached.iter().chain(routed.iter()) {
                    deps.forget_session(session_id);
                }
            }
        }
        evicted.len()
    }

    /// The agent's shared parts, when a model provider is configured.
    pub fn agent_deps(&self) -> Option<Arc<AgentDeps>> {
        self.live().agent.as_ref().ok().cloned()
    }

    /// Cancels every running turn (shutdown after the drain deadline).
    pub fn interrupt_all(&self) {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        for slot in slots.values() {
            if let Some(running) = &slot.lock().running {
                running.cancel.cancel();
            }
        }
    }

    /// Turns running now.
    pub fn running_turns(&self) -> usize {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots
            .values()
            .filter(|slot| {
                let s = slot.lock();
                s.running.is_some() || s.worker
            })
            .count()
    }
}
