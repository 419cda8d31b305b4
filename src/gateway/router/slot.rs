//! One session key's place in the router: its FIFO of pending work, the turn running now
//! (with the means to interrupt or steer it), a pending approval or clarify question, and
//! the cached agent. One worker task at most drains a slot, so turns of one session never
//! overlap; different slots run concurrently up to the router's turn limit.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use hermes_adapter::{MessageEvent, SessionSource};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, EventSink, SteerInbox};
use crate::tools::approval::ApprovalDecision;
use crate::tools::context::Authority;

use super::authority::Pending;

/// The most messages waiting behind a running turn (Hermes `_BUSY_QUEUE_MAX_PENDING`).
pub const QUEUE_CAP: usize = 32;

/// How often an HTTP API request's turn is taken up again after losing its session lease.
pub const LEASE_RETRIES: u8 = 3;

/// Where an HTTP API request waits for its turn's answer.
#[derive(Debug)]
pub struct ApiResponder {
    reply: Mutex<Option<oneshot::Sender<Result<ApiReply, ApiTurnError>>>>,
    /// Streamed deltas for `stream: true` requests.
    pub deltas: Option<EventSink>,
    /// The request's `system` messages, layered onto the session's prompt for this turn.
    pub system: Option<String>,
    /// PostgreSQL: how often this request's turn was taken up again after its session lease
    /// was lost mid-turn ([`ApiResponder::take_up_again`]).
    lease_retries: std::sync::atomic::AtomicU8,
}

impl ApiResponder {
    pub fn new(
        reply: oneshot::Sender<Result<ApiReply, ApiTurnError>>,
        deltas: Option<EventSink>,
    ) -> Self {
        Self {
            reply: Mutex::new(Some(reply)),
            deltas,
            system: None,
            lease_retries: std::sync::atomic::AtomicU8::new(0),
        }
    }

    /// Whether a turn for this request that lost its session lease mid-turn is run again
    /// once the lease is back: not when deltas were already streamed (the client would get
    /// two answers run together), and at most [`LEASE_RETRIES`] times.
    pub fn take_up_again(&self) -> bool {
        self.deltas.is_none()
            && self
                .lease_retries
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                < LEASE_RETRIES
    }

    pub fn with_system(mut self, system: Option<String>) -> Self {
        self.system = system;
        self
    }

    /// Answers the request; later answers are ignored.
    pub fn answer(&self, result: Result<ApiReply, ApiTurnError>) {
        let sender = self.reply.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(sender) = sender {
            let _ = sender.send(result);
        }
    }
}

/// Why an HTTP API request got no reply. The text is what the client reads (its error
/// message); every variant's text is safe to show.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiTurnError {
    #[error("the gateway is shutting down")]
    ShuttingDown,
    #[error("the request was cancelled")]
    Cancelled,
    #[error("the session moved to another instance; please retry")]
    SessionMoved,
    #[error("{}", super::TURN_TIMEOUT_NOTICE)]
    TimedOut,
    /// The model's failure, scrubbed of secrets.
    #[error("{0}")]
    Provider(String),
    /// Our own failure: the incident text naming the id the log carries.
    #[error("{0}")]
    Incident(String),
    /// The task running the turn ended without answering (it panicked or was aborted).
    #[error("the turn failed: {0}")]
    Aborted(String),
}

/// The answer to an HTTP API request.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiReply {
    pub text: String,
    pub session_id: String,
}

/// One unit of work for a slot's worker.
#[derive(Debug, Clone)]
pub struct Job {
    pub event: MessageEvent,
    /// A turn a previous process started: its user message is already stored.
    pub resumed: bool,
    /// Shared so a panicking turn's request can still be answered.
    pub api: Option<std::sync::Arc<ApiResponder>>,
    /// How far the event's sender is trusted, decided when the event was authorized.
    pub authority: Authority,
}

/// The turn in progress.
#[derive(Debug)]
pub struct Running {
    /// Where the turn's prompts (approval, clarify) go.
    pub source: SessionSource,
    pub cancel: CancellationToken,
    pub started: Instant,
    pub event_id: String,
    pub steer: SteerInbox,
    /// Set by `/stop`: the interrupted turn's event is answered by the stop notice.
    pub stopped: bool,
    /// When the turn last showed activity (the turn budget's clock).
    pub activity: crate::agent::Activity,
    /// Set by the turn budget: the turn was cancelled for idling past it.
    pub timed_out: bool,
}

#[derive(Debug, Default)]
pub struct SlotState {
    pub queue: VecDeque<Job>,
    pub running: Option<Running>,
    /// A worker task is draining the queue.
    pub worker: bool,
    pub last_ack: Option<Instant>,
    pub approval: Option<Pending<ApprovalDecision>>,
    pub clarify: Option<Pending<String>>,
    pub agent: Option<Agent>,
    pub last_active: Option<Instant>,
    /// `/model --once`: the model for the next turn only (kept in memory, as Hermes does).
    pub once_model: Option<crate::agent::provider::ModelChoice>,
    /// PostgreSQL: this instance holds the session's lease (its worker is running it).
    pub held: bool,
    /// PostgreSQL: the journaled events taken up under the current lease (see
    /// `cluster/`), so re-reading the journal does not run one twice.
    pub seen: std::collections::HashSet<String>,
    /// PostgreSQL: a task is taking up events other instances recorded for this session
    /// (`cluster/journal_pull.rs`); `pull_again` asks it for one more look when it is done.
    pub pulling: bool,
    pub pull_again: bool,
    /// PostgreSQL: a write under the current hold was refused, so the lease is gone whatever
    /// its renewals have seen yet; nothing more is started under it.
    pub lease_lost: bool,
}

impl SlotState {
    /// Marks the slot as drained by a worker; `true` when none was, and the caller must
    /// start one.
    pub fn claim_worker(&mut self) -> bool {
        !std::mem::replace(&mut self.worker, true)
    }

    /// Queues `job`, counting it in the router's queue-depth gauge.
    pub fn enqueue(&mut self, job: Job, depth: &std::sync::atomic::AtomicU64) {
        self.queue.push_back(job);
        depth.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Puts `job` first in line (a request taken up again), counting it.
    pub fn enqueue_front(&mut self, job: Job, depth: &std::sync::atomic::AtomicU64) {
        self.queue.push_front(job);
        depth.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Takes the next job, uncounting it.
    pub fn dequeue(&mut self, depth: &std::sync::atomic::AtomicU64) -> Option<Job> {
        let job = self.queue.pop_front()?;
        depth.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        Some(job)
    }

    /// Empties the queue (`/stop`, `/new`), uncounting every job.
    pub fn discard_queue(&mut self, depth: &std::sync::atomic::AtomicU64) -> Vec<Job> {
        let jobs: Vec<Job> = self.queue.drain(..).collect();
        depth.fetch_sub(jobs.len() as u64, std::sync::atomic::Ordering::Relaxed);
        jobs
    }
}

#[derive(Debug)]
pub struct Slot {
    pub key: String,
    state: Mutex<SlotState>,
}

impl Slot {
    pub fn new(key: String) -> Self {
        Self {
            key,
            state: Mutex::new(SlotState::default()),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
