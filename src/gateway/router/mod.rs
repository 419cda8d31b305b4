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
mod gatekeeper;
mod handles;
mod live;
mod liveness;
mod prompts;
mod responder;
mod session;
pub mod slot;
mod slot_table;
mod steer;
mod turn;
mod webhook;

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use hermes_adapter::{DeadLetter, MessageEvent, RecordOutcome};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentDeps;
use crate::config::LoadedConfig;
use crate::gateway::authorize::{Admission, AuthPolicy, Authority};
use crate::gateway::metrics::GatewayMetrics;
use crate::gateway::routing::RoutingIndex;
use crate::gateway::session_key::{KeyPolicy, event_session_key};
use crate::home::HermesHome;
use crate::state::{InboundRecord, Store};

use busy::{BusyRules, Placement};
pub use cluster::recovery::Recovered;
use cluster::{ClusterLink, SlotWork};
use commands::Command;
use gatekeeper::Gatekeeper;
use handles::{LiveCell, Paused, Stopping};
pub use live::{Live, NoProvider};
use prompts::PromptDesk;
use responder::Responder;
pub use responder::dead_letter::DEAD_LETTER_NOTICE;
pub use responder::platforms::PlatformLink;
use session::Sessions;
pub use slot::{ApiReply, ApiResponder, ApiTurnError};
use slot::{Job, Slot};
use slot_table::SlotTable;
pub use turn::budget::{TURN_IDLE_WARNING, TURN_TIMEOUT_NOTICE};
pub use turn::no_provider_text;
use turn::{TurnEnd, TurnRunner};

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

/// The shared router (see the module docs): a façade over the parts below, each a struct
/// naming what it uses. The router itself decides only the order of things: admit,
/// journal, place (the busy rules), run (a command or a turn), answer.
pub struct Router {
    home: HermesHome,
    store: Store,
    /// What a reload may change (authorization, display, resets, the model): see `live.rs`.
    live: Arc<LiveCell>,
    /// Who is let in, and how far they are trusted (`gatekeeper.rs`).
    gate: Arc<Gatekeeper>,
    key_policy: KeyPolicy,
    /// Which session each key talks in; shared with the responder and the session book.
    routing: Arc<RoutingIndex>,
    /// Recording and sending replies, and the platforms they go to (`responder/`).
    responder: Arc<Responder>,
    /// The routing entries as sessions: resets, repoints, the cached agent (`session.rs`).
    sessions: Arc<Sessions>,
    /// One slot per active session key (`slot_table.rs`).
    slots: Arc<SlotTable>,
    /// Where work goes in a slot: interrupt, queue or steer (`busy.rs`).
    busy: BusyRules,
    /// Agent turns (`turn/`).
    turns: TurnRunner,
    /// Where a running turn's approval and clarify questions go (`prompts.rs`).
    prompts: Arc<PromptDesk>,
    /// Held by a turn while it runs, released before its reply is sent (see `responder/outbox.rs`).
    turn_limit: Arc<Semaphore>,
    metrics: Arc<GatewayMetrics>,
    paused: Paused,
    started: Instant,
    restart: AtomicBool,
    stopping: Stopping,
    /// Fired by `/restart`: the runner drains and exits 75.
    pub stop_requested: CancellationToken,
    /// The MCP servers whose tools every agent's registry reads.
    mcp: crate::tools::mcp::McpHub,
    /// PostgreSQL: the sessions shared with the other instances (`cluster/`).
    cluster: Option<Arc<ClusterLink>>,
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

impl Router {
    /// The MCP servers of this gateway.
    pub fn mcp(&self) -> &crate::tools::mcp::McpHub {
        &self.mcp
    }

    /// The sandboxes the agent's commands run in (`terminal:`), `None` on this host.
    pub fn sandboxes(&self) -> Option<Arc<crate::tools::backend::Sandboxes>> {
        self.live().agent.as_ref().ok()?.sandboxes.clone()
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
        let scope = session::routing_scope(&home, &store);
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
        let sessions = Arc::new(Sessions::new(store.clone(), routing.clone(), key_policy));
        let slots = Arc::new(SlotTable::default());
        let prompts = Arc::new(PromptDesk {
            slots: slots.clone(),
            routing: routing.clone(),
            responder: responder.clone(),
        });
        let mcp = crate::agent::assembly::start_mcp(&loaded);
        let agent = crate::agent::assemble(
            &home,
            &loaded,
            store.clone(),
            prompts::user_prompts(Arc::downgrade(&prompts)),
            client,
            &mcp,
        )
        .map_err(NoProvider::from);
        if let Err(reason) = &agent {
            tracing::warn!("{reason}; messages will be answered with setup instructions");
        }
        let live = LiveCell::new(Live::new(&home, &loaded, auth, agent));
        let gate = Arc::new(Gatekeeper {
            live: live.clone(),
            pairing,
        });
        let stopping = Stopping::default();
        let paused = Paused::default();
        let turn_limit = Arc::new(Semaphore::new(max_concurrent_turns.max(1)));
        let cluster = crate::gateway::cluster::Cluster::new(&store).map(|cluster| {
            Arc::new(ClusterLink {
                cluster,
                store: store.clone(),
                slots: slots.clone(),
                responder: responder.clone(),
                routing: routing.clone(),
                gate: gate.clone(),
                metrics: metrics.clone(),
                turn_limit: turn_limit.clone(),
                stopping: stopping.clone(),
            })
        });
        let router = Arc::new_cyclic(|me: &Weak<Router>| Router {
            busy: BusyRules {
                live: live.clone(),
                metrics: metrics.clone(),
                paused: paused.clone(),
            },
            turns: TurnRunner {
                live: live.clone(),
                sessions: sessions.clone(),
                responder: responder.clone(),
                metrics: metrics.clone(),
                stopping: stopping.clone(),
            },
            home,
            store,
            live,
            gate,
            key_policy,
            routing,
            responder,
            sessions,
            slots,
            prompts,
            turn_limit,
            metrics,
            paused,
            started: Instant::now(),
            restart: AtomicBool::new(false),
            stopping,
            stop_requested: CancellationToken::new(),
            mcp,
            cluster,
            me: me.clone(),
        });
        if let Some(link) = &router.cluster {
            tracing::info!(
                instance_id = link.cluster.instance_id(),
                "sharing sessions with other instances through PostgreSQL"
            );
            cluster::start_cluster_tasks(link, &router);
        }
        Ok(router)
    }

    /// Whether `/restart` asked the daemon to restart (exit 75).
    pub fn restart_requested(&self) -> bool {
        self.restart.load(Ordering::SeqCst)
    }

    /// Resolves when `/reload-mcp` asked for config.yaml to be read again, as on SIGHUP.
    pub async fn reload_requested(&self) {
        self.live.reload_requested().await;
    }

    /// From now on an interrupted turn stays unfinished in the journal for the next start.
    pub fn begin_shutdown(&self) {
        self.stopping.set();
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
        event_session_key(event, self.key_policy)
    }

    /// Handles one inbound event from a chat platform; the answer tells the adapter whether
    /// it may acknowledge the event to the platform.
    pub async fn handle_inbound(&self, event: MessageEvent) -> RecordOutcome {
        GatewayMetrics::incr(&self.metrics.events_in);
        // One decision per event, from one policy snapshot: a refused sender's reply is
        // worked out in the same pass instead of asking the policy again.
        let authority = match self.gate.admit(&event.source).await {
            Admission::Admitted(authority) => authority,
            Admission::Refused(reply) => {
                gatekeeper::deny(&self.responder, &event, reply).await;
                return RecordOutcome::Refused;
            }
        };
        if let Some(refusal) = commands::answers::refused_answer(self, &event, authority) {
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
            Some(link) => link.offer(&self.arc(), key, job),
            None => self.place(key, job),
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
        self.place(
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
        self.live.get()
    }

    /// Applies a validated, reloaded configuration at once (`live.rs`).
    pub fn apply_reload(&self, loaded: &LoadedConfig) {
        live::apply_reload(self, loaded);
    }

    /// Keeps an undecodable item; the answer says if it may be acked (`responder/dead_letter.rs`).
    pub async fn handle_dead_letter(&self, letter: DeadLetter) -> RecordOutcome {
        responder::dead_letter::handle_dead_letter(self, letter).await
    }

    /// Every reason the daemon cannot answer right now; empty when it can (`liveness.rs`).
    pub fn liveness_problems(&self) -> Vec<String> {
        liveness::liveness_problems(&self.store, &self.live().config.agent, &self.slots)
    }

    /// Queues the unfinished turns; call before adapters deliver new events so each
    /// session's recovered work runs first (`cluster/recovery.rs`).
    pub async fn recover_turns(&self) -> Recovered {
        let (report, jobs) =
            cluster::recovery::unfinished_turns(&self.store, &self.responder, &self.gate).await;
        for (key, job) in jobs {
            match &self.cluster {
                // The instance that takes the session's lease runs its unfinished events
                // (perhaps another one; those still held run where they are).
                Some(link) => link.kick(&self.arc(), &key),
                None => self.place(key, job),
            }
        }
        report
    }

    /// Queues every reply still owed on its chat's lane (after adapters can send).
    pub async fn resend_replies(&self) -> usize {
        cluster::recovery::resend_replies(&self.store, &self.responder).await
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

    /// Puts `job` into `key`'s slot through the busy rules and carries out where they
    /// placed it.
    fn place(&self, key: String, job: Job) {
        let slot = self.slots.get_or_create(&key);
        let responder = self.responder.clone();
        match self.busy.place(&slot, job) {
            Placement::Queued => {}
            Placement::StartWorker => self.start_worker(&slot),
            Placement::Answer(job, text) => {
                tokio::spawn(async move { responder.respond(&job, &text).await });
            }
            Placement::Ignore(job) => {
                tokio::spawn(async move { responder.answer_silently(&job).await });
            }
            Placement::Acknowledge(source, text) => {
                tokio::spawn(async move { responder.send_direct(&source, &text).await });
            }
            Placement::CommandNow(job, command) => {
                let router = self.arc();
                tokio::spawn(
                    async move { commands::run_command(&router, &slot, job, command).await },
                );
            }
        }
    }

    /// Starts the worker of `slot`, which the caller claimed (`SlotState::claim_worker`):
    /// it runs the slot's jobs in order, one at a time, then exits.
    fn start_worker(&self, slot: &Arc<Slot>) {
        let (router, slot) = (self.arc(), slot.clone());
        tokio::spawn(async move {
            match router.cluster.clone() {
                Some(link) => Box::pin(link.drain(&*router, slot)).await,
                None => router.drain(slot).await,
            }
        });
    }

    async fn drain(&self, slot: Arc<Slot>) {
        let depth = &self.metrics.router_queue_depth;
        loop {
            let job = {
                let mut state = slot.lock();
                match state.dequeue(depth) {
                    Some(job) => job,
                    None => {
                        state.worker = false;
                        state.last_active = Some(Instant::now());
                        return;
                    }
                }
            };
            let job = turn::pending_media::with_media_fetched(&self.responder, job).await;
            let Ok(_permit) = self.turn_limit.clone().acquire_owned().await else {
                return;
            };
            self.run_job(&slot, job).await;
        }
    }

    /// Runs one job, isolated: a panic anywhere in it (outside tool dispatch, which wraps
    /// its own) is caught here, so the event is still answered, the slot no longer says
    /// "running" and the worker goes on with the next job instead of dying with the slot
    /// wedged.
    async fn run_job(&self, slot: &Arc<Slot>, job: Job) {
        if let Some(text) = webhook::verbatim_answer(&job) {
            return self.responder.respond(&job, &text).await;
        }
        let copy = job.clone();
        let api = job.event.source.platform == API_PLATFORM;
        let command = (!api).then(|| Command::parse(&job.event)).flatten();
        let run = async {
            match command {
                Some(command) => commands::run_command(self, slot, job, command).await,
                None => self.run_turn(slot, job).await,
            }
        };
        if let Err(panic) = AssertUnwindSafe(run).catch_unwind().await {
            let leftover = self.turns.turn_panicked(slot, &copy, panic).await;
            self.carry_over(slot, &copy, leftover).await;
        }
    }

    /// Runs `job` as an agent turn and settles how it ended.
    async fn run_turn(&self, slot: &Arc<Slot>, job: Job) {
        match self.turns.run(slot, &job).await {
            TurnEnd::Finished(leftover) => match webhook::one_turn_session(&job) {
                Some(reason) => {
                    let key = self.session_key(&job.event);
                    webhook::close_session(&self.sessions, &self.store, &key, reason).await;
                }
                None => self.carry_over(slot, &job, leftover).await,
            },
            TurnEnd::LeaseLost { error, recorded } => cluster::lease_lost(
                &self.metrics.router_queue_depth,
                slot,
                &job,
                &error,
                recorded,
            ),
        }
    }

    /// Steer texts a finished turn never read become the session's next turn (`steer.rs`).
    async fn carry_over(&self, slot: &Arc<Slot>, job: &Job, leftover: Vec<String>) {
        let depth = &self.metrics.router_queue_depth;
        if steer::carry_over_steer(&self.store, &self.stopping, depth, slot, job, leftover).await {
            self.start_worker(slot);
        }
    }
}

/// The router's workers, as the cluster link reaches them.
impl SlotWork for Router {
    fn place(&self, key: String, job: Job) {
        Router::place(self, key, job);
    }

    fn start_worker(self: &Arc<Self>, slot: &Arc<Slot>) {
        Router::start_worker(self, slot);
    }

    fn run_job(&self, slot: &Arc<Slot>, job: Job) -> impl Future<Output = ()> + Send {
        Router::run_job(self, slot, job)
    }
}
