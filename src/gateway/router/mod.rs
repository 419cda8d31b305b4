//! The router: every inbound event passes through here. It authorizes the sender, journals
//! the event durably (dropping redeliveries) before the adapter may acknowledge it, and
//! hands it to the session key's slot, where commands are answered without the model and
//! messages become agent turns, one at a time per session. Replies are recorded as
//! delivery obligations before they are sent.

mod authority;
mod busy;
mod cluster;
pub mod commands;
mod fault;
mod live;
mod responder;
mod session;
pub mod slot;
mod slot_table;
mod steer;
mod turn;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use hermes_adapter::{DeadLetter, MessageEvent, RecordOutcome};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentDeps;
use crate::config::LoadedConfig;
use crate::gateway::authorize::{Admission, AuthPolicy, Authority, admit, authority};
use crate::gateway::metrics::GatewayMetrics;
use crate::gateway::pairing::PairingStore;
use crate::gateway::routing::RoutingIndex;
use crate::gateway::session_key::{KeyPolicy, build_session_key};
use crate::home::HermesHome;
use crate::state::{InboundRecord, Store};

pub use cluster::recovery::Recovered;
pub use live::{Live, NoProvider};
use responder::Responder;
pub use responder::dead_letter::DEAD_LETTER_NOTICE;
pub use responder::platforms::PlatformLink;
use session::Sessions;
use slot::Job;
pub use slot::{ApiReply, ApiResponder, ApiTurnError};
use slot_table::SlotTable;
pub use turn::budget::{TURN_IDLE_WARNING, TURN_TIMEOUT_NOTICE};
pub use turn::no_provider_text;

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
    /// Which session each key talks in; shared with the responder and the session book.
    routing: Arc<RoutingIndex>,
    /// Recording and sending replies, and the platforms they go to (`responder/`).
    responder: Arc<Responder>,
    /// The routing entries as sessions: resets, repoints, the cached agent (`session.rs`).
    sessions: Sessions,
    /// One slot per active session key (`slot_table.rs`).
    slots: SlotTable,
    /// Held by a turn while it runs, released before its reply is sent (see `responder/outbox.rs`).
    turn_limit: Arc<Semaphore>,
    metrics: Arc<GatewayMetrics>,
    paused: Mutex<HashSet<String>>,
    started: Instant,
    restart: AtomicBool,
    shutting_down: AtomicBool,
    /// Fired by `/restart`: the runner drains and exits 75.
    pub stop_requested: CancellationToken,
    /// The MCP servers whose tools every agent's registry reads.
    mcp: crate::tools::mcp::McpHub,
    /// PostgreSQL: the session leases shared with the other instances (`cluster/`).
    cluster: Option<Arc<crate::gateway::cluster::Cluster>>,
    me: Weak<Router>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("platforms", &self.responder.platform_names())
            .field("routes", &self.routing.len())
            .finish_non_exhaustive()
    }
}

/// The networking MCP's HTTP servers are reached through: the configured proxies and CA
/// files (already checked when the configuration loaded; the direct default otherwise).
pub(crate) fn mcp_net(config: &crate::config::Config) -> hermes_adapter::net::Net {
    crate::agent::assembly::mcp_net(config)
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
        let routing = Arc::new(RoutingIndex::load(&store, scope).await?);
        let pairing = crate::gateway::shared_state::pairing_store(&home, &loaded.config)?
            .with_env(loaded.env.clone());
        let auth = AuthPolicy::from_config(&loaded.config, &loaded.env);
        let key_policy = KeyPolicy {
            group_sessions_per_user: loaded.config.group_sessions_per_user,
            thread_sessions_per_user: loaded.config.thread_sessions_per_user,
        };
        let outbox = responder::outbox::Outbox::default();
        let platforms: HashMap<String, PlatformLink> = platforms
            .into_iter()
            .map(|mut link| {
                link.deliverer = link
                    .deliverer
                    .with_stop_waiting(outbox.stop_waiting.clone());
                (link.name.clone(), link)
            })
            .collect();
        let responder = Arc::new(Responder::new(
            store.clone(),
            platforms,
            outbox,
            metrics.clone(),
            routing.clone(),
            key_policy,
        ));
        let sessions = Sessions::new(store.clone(), routing.clone(), key_policy);
        let mcp = crate::agent::assembly::start_mcp(&loaded);
        let router = Arc::new_cyclic(|me: &Weak<Router>| {
            let prompts = turn::prompts::user_prompts(me.clone());
            let agent =
                crate::agent::assemble(&home, &loaded, store.clone(), prompts, client, &mcp)
                    .map_err(NoProvider::from);
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
                responder,
                sessions,
                slots: SlotTable::default(),
                turn_limit: Arc::new(Semaphore::new(max_concurrent_turns.max(1))),
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
        if let Some(cluster) = &router.cluster {
            tracing::info!(
                instance_id = cluster.instance_id(),
                "sharing sessions with other instances through PostgreSQL"
            );
            cluster::start_cluster_tasks(&router, cluster);
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
        // One decision per event, from one policy snapshot: a refused sender's reply is
        // worked out in the same pass instead of asking the policy again.
        let authority = match self.admit(&event.source).await {
            Admission::Admitted(authority) => authority,
            Admission::Refused(reply) => {
                self.deny(&event, reply).await;
                return RecordOutcome::Refused;
            }
        };
        if let Some(refusal) = authority::refused_answer(self, &event, authority) {
            self.responder.send_direct(&event.source, &refusal).await;
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
            Some(cluster) => cluster::offer_clustered(self, cluster, key, job),
            None => busy::dispatch(self, key, job),
        }
        RecordOutcome::Recorded
    }

    /// Runs one HTTP API request through the session's slot and waits for its answer.
    pub async fn submit_api(
        &self,
        event: MessageEvent,
        deltas: Option<crate::agent::EventSink>,
        system: Option<String>,
    ) -> Result<ApiReply, ApiTurnError> {
        GatewayMetrics::incr(&self.metrics.events_in);
        let key = self.session_key(&event);
        let (reply, answer) = tokio::sync::oneshot::channel();
        busy::dispatch(
            self,
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
        answer.await.unwrap_or(Err(ApiTurnError::ShuttingDown))
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

    /// Whether the sender of `source` is admitted, and what a refused one is told, decided
    /// once. The pairing files are read (and a pairing request written) on tokio's blocking
    /// pool, not on a runtime thread.
    async fn admit(&self, source: &hermes_adapter::SessionSource) -> Admission {
        let now = crate::state::now_epoch();
        let router = self.arc();
        let asker = source.clone();
        tokio::task::spawn_blocking(move || {
            admit(&asker, &router.live().auth, &router.pairing, now)
        })
        .await
        .unwrap_or(Admission::Refused(Ok(None)))
    }

    /// An unauthorized sender: a pairing code for a DM where the platform pairs, else nothing.
    async fn deny(
        &self,
        event: &MessageEvent,
        reply: Result<Option<String>, crate::gateway::pairing::PairingError>,
    ) {
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
            self.responder.send_direct(&event.source, &text).await;
        }
    }

    /// Evicts slots idle longer than `idle` with nothing queued or running, bounding memory
    /// by the number of recently active conversations.
    /// The per-session state the agent keeps in memory (to-do lists, session approvals,
    /// shell cwds) goes with the slot.
    pub fn evict_idle(&self, idle: Duration) -> usize {
        let evicted = self.slots.evict_idle(idle);
        if let Ok(deps) = &self.live().agent {
            for (key, cached) in &evicted {
                let routed = self.sessions.current_session_id(key);
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
        self.slots.interrupt_all();
    }

    /// Turns running now.
    pub fn running_turns(&self) -> usize {
        self.slots.running_turns()
    }

    /// The current reloadable settings (`live.rs`).
    pub(crate) fn live(&self) -> Arc<Live> {
        self.live.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Applies a validated, reloaded configuration at once (`live.rs`).
    pub fn apply_reload(&self, loaded: &LoadedConfig) {
        live::apply_reload(self, loaded);
    }

    /// Keeps an item the adapter could not decode; the answer tells the adapter whether it
    /// may acknowledge it (`responder/dead_letter.rs`).
    pub async fn handle_dead_letter(&self, letter: DeadLetter) -> RecordOutcome {
        responder::dead_letter::handle_dead_letter(self, letter).await
    }

    /// Every reason the daemon cannot answer right now; empty when it can (`cluster/liveness.rs`).
    pub fn liveness_problems(&self) -> Vec<String> {
        cluster::liveness::liveness_problems(self)
    }

    /// Queues the unfinished turns; call before adapters deliver new events so each
    /// session's recovered work runs first (`cluster/recovery.rs`).
    pub async fn recover_turns(&self) -> Recovered {
        cluster::recovery::recover_turns(self).await
    }

    /// Queues every reply still owed on its chat's lane (after adapters can send).
    pub async fn resend_replies(&self) -> usize {
        cluster::recovery::resend_replies(self).await
    }

    /// The chat platforms this gateway runs, sorted (where scheduled jobs can deliver).
    pub fn platform_names(&self) -> Vec<String> {
        self.responder.platform_names()
    }

    /// Sends obligations recorded outside a turn (a scheduled job's output) on their chat's
    /// lane, like any reply.
    pub fn send_recorded(&self, platform: &str, chat_id: &str, obligation_ids: Vec<String>) {
        self.responder
            .send_recorded(platform, chat_id, obligation_ids);
    }

    /// Shutdown: ends every retry wait (those replies stay owed) and lets the lanes finish
    /// what they are sending, for at most `limit`.
    pub async fn finish_deliveries(&self, limit: Duration) -> bool {
        self.responder.finish_deliveries(limit).await
    }

    /// The skills usable on `platform`, as chat commands see them.
    pub(crate) fn platform_skills(&self, platform: &str) -> Vec<crate::skills::Skill> {
        match &self.live().agent {
            Ok(deps) if deps.offers_tool("skill_view", platform) => {
                crate::skills::enabled(&deps.home, &deps.settings.skills, &deps.env, Some(platform))
            }
            _ => Vec::new(),
        }
    }

    /// Whether `platform` was paused with `/platform pause`.
    pub(super) fn is_paused(&self, platform: &str) -> bool {
        self.paused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(platform)
    }
}
