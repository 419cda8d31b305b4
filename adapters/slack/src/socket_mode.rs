//! The socket loop behind `SlackAdapter::run`: `auth.test`, then one live Socket Mode
//! connection kept at all times. Envelopes are handed to the core concurrently across
//! lanes and in arrival order within one ([`crate::lanes`]: a slow look-up in one channel
//! never delays another channel's ack, a click or a slash command never waits behind a
//! message; files are downloaded only after the ack, [`crate::pending`]), and each is acknowledged on its own connection only after the core answered
//! `Recorded`/`Duplicate`; on `Failed` nothing is acked and Slack redelivers.
//!
//! Reconnects never lose an event: on a `disconnect` frame the replacement is opened first
//! and the old socket is closed only once the new one said `hello` and the envelopes the
//! old one delivered are handled and acked there. A closed or silent socket is replaced at
//! once, unless it closed right after its `hello` (then the next open backs off, as a failed
//! one does); failed opens back off, honouring Slack's `Retry-After`, and `run` gives up
//! (retryable) only after several in a row. A bad token is fatal.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::{AdapterContext, AdapterError, RecordOutcome};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::adapter::Shared;
use crate::api::Token;
use crate::connection::{self, ConnDeps, ConnEvent, ConnHandle, OpenError};
use crate::gating::BotIdentity;
use crate::inbound::{AfterRecord, Delivery, Handling, Translator};
use crate::lanes::{Lanes, lane_of};

/// Frames buffered between the connection tasks and this loop.
const EVENT_BUFFER: usize = 256;

/// How long an envelope's look-ups (`users.info`, `conversations.replies`) may take
/// together before the event is handed over without what is still missing: the ack is owed
/// within 3 seconds (<https://api.slack.com/apis/socket-mode#acknowledge>).
const LOOKUP_BUDGET: Duration = Duration::from_millis(1500);

/// Calls `auth.test` and learns who we are.
async fn identify(shared: &Shared) -> Result<BotIdentity, AdapterError> {
    let answer = shared
        .api
        .call("auth.test", Token::Bot, &json!({}))
        .await
        .map_err(|e| {
            if e.is_auth_failure() {
                AdapterError::Fatal(format!(
                    "slack auth.test failed: {e} (check SLACK_BOT_TOKEN)"
                ))
            } else {
                AdapterError::Retryable(format!("slack auth.test failed: {e}"))
            }
        })?;
    let user_id = answer
        .get("user_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if user_id.is_empty() {
        return Err(AdapterError::Retryable(
            "slack auth.test returned no user_id".into(),
        ));
    }
    Ok(BotIdentity {
        user_id,
        bot_id: answer
            .get("bot_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// The connections this loop owns; all are closed when it ends.
struct Connections {
    deps: ConnDeps,
    next_id: u64,
    all: HashMap<u64, ConnHandle>,
    /// The connection we consider current (said hello most recently).
    active: Option<u64>,
    /// A replacement being opened; it becomes active on hello.
    pending: Option<u64>,
    /// When each connection said hello (a socket closed soon after is not healthy).
    hello_at: HashMap<u64, Instant>,
}

impl Drop for Connections {
    fn drop(&mut self) {
        for conn in self.all.values() {
            conn.close();
        }
    }
}

impl Connections {
    fn open(&mut self) {
        if self.pending.is_some() {
            return;
        }
        self.next_id += 1;
        let id = self.next_id;
        self.all
            .insert(id, connection::spawn(id, self.deps.clone()));
        self.pending = Some(id);
    }

    fn forget(&mut self, id: u64) {
        if let Some(conn) = self.release(id) {
            conn.close();
        }
    }

    /// Stops tracking a connection without closing it (a retired one closes itself once
    /// the jobs holding its acks are done).
    fn release(&mut self, id: u64) -> Option<ConnHandle> {
        self.hello_at.remove(&id);
        let conn = self.all.remove(&id);
        if self.active == Some(id) {
            self.active = None;
        }
        if self.pending == Some(id) {
            self.pending = None;
        }
        conn
    }

    /// Keeps a live or opening connection at all times.
    fn ensure_one(&mut self) {
        if self.active.is_none() && self.pending.is_none() {
            self.open();
        }
    }

    /// The new connection said hello: it takes over, and the previous one is retired —
    /// closed once the envelopes it already delivered are handled and acked on it.
    fn promote(&mut self, id: u64) {
        self.hello_at.insert(id, Instant::now());
        if self.pending == Some(id) {
            self.pending = None;
        }
        if let Some(old) = self.active.replace(id)
            && old != id
        {
            tracing::debug!(platform = "slack", old, new = id, "socket handed over");
            match self.all.get(&old) {
                Some(conn) => conn.retire(),
                None => self.forget(old),
            }
        }
    }
}

/// A socket Slack closes sooner than this after its `hello` counts as a failed open: Slack
/// refusing the connection that way must not be answered by reopening at once, forever.
const SHORT_LIVED: Duration = Duration::from_secs(10);

fn backoff(tunables: &connection::Tunables, failures: u32) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(10);
    (tunables.reconnect_base * factor).min(tunables.reconnect_max)
}

pub(crate) async fn run(shared: Arc<Shared>, ctx: AdapterContext) -> Result<(), AdapterError> {
    let me = tokio::select! {
        _ = ctx.shutdown.cancelled() => return Ok(()),
        me = identify(&shared) => me?,
    };
    // Not progress: the Web API answering says nothing about the socket, and a run whose
    // sockets keep failing to open must look stalled to the supervisor (`/ready`).
    tracing::info!(platform = "slack", bot_user_id = %me.user_id, "authenticated");
    *shared.me.write().unwrap_or_else(|e| e.into_inner()) = me.clone();

    let (events_tx, mut events) = mpsc::channel(EVENT_BUFFER);
    let mut conns = Connections {
        deps: ConnDeps {
            api: shared.api.clone(),
            tunables: shared.tunables,
            progress: ctx.progress.clone(),
            events: events_tx,
            gate: shared.open_gate.clone(),
        },
        next_id: 0,
        all: HashMap::new(),
        active: None,
        pending: None,
        hello_at: HashMap::new(),
    };
    conns.open();
    let mut lanes = Lanes::default();
    let mut failures = 0u32;
    // Sockets closed right after their hello, in a row.
    let mut short_lived = 0u32;
    let mut retry_at: Option<Instant> = None;
    loop {
        let retry = async move {
            match retry_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let event = tokio::select! {
            _ = ctx.shutdown.cancelled() => return Ok(()),
            _ = retry => {
                retry_at = None;
                conns.open();
                continue;
            }
            event = events.recv() => match event {
                Some(event) => event,
                None => return Err(AdapterError::Retryable("slack socket loop lost its connections".into())),
            },
        };
        match event {
            ConnEvent::Hello { conn } => {
                failures = 0;
                conns.promote(conn);
                tracing::debug!(platform = "slack", conn, "socket ready");
            }
            ConnEvent::Envelope {
                conn,
                envelope_id,
                kind,
                payload,
                retry_attempt,
            } => {
                if retry_attempt > 0 {
                    tracing::debug!(platform = "slack", %envelope_id, retry_attempt, "redelivered envelope");
                }
                // Shutdown aborts the jobs still running (`lanes` is dropped): their
                // envelopes stay unacknowledged and Slack redelivers them.
                let lane = lane_of(&kind, &payload);
                let job = handle_envelope(
                    shared.clone(),
                    ctx.clone(),
                    me.clone(),
                    conns.all.get(&conn).cloned(),
                    envelope_id,
                    kind,
                    payload,
                );
                lanes.spawn(lane, job);
            }
            ConnEvent::Disconnect { conn, reason } => {
                tracing::info!(platform = "slack", conn, %reason, "Slack asked to reconnect; opening the replacement first");
                conns.open();
            }
            ConnEvent::Closed { conn, why } => {
                tracing::info!(platform = "slack", conn, %why, "socket closed");
                let lived = conns.hello_at.get(&conn).map(Instant::elapsed);
                conns.forget(conn);
                if lived.is_some_and(|lived| lived < SHORT_LIVED) && conns.active.is_none() {
                    short_lived += 1;
                    let delay = backoff(&shared.tunables, short_lived);
                    tracing::warn!(
                        platform = "slack",
                        conn,
                        short_lived,
                        ?delay,
                        "socket closed right after its hello; backing off before reopening"
                    );
                    if retry_at.is_none() && conns.pending.is_none() {
                        retry_at = Some(Instant::now() + delay);
                    }
                } else {
                    if lived.is_some() {
                        short_lived = 0;
                    }
                    conns.ensure_one();
                }
            }
            ConnEvent::Retired { conn } => {
                tracing::debug!(
                    platform = "slack",
                    conn,
                    "retired socket; it closes once its envelopes are acked"
                );
                conns.release(conn);
            }
            ConnEvent::Silent { conn } => {
                tracing::warn!(platform = "slack", conn, "socket silent; replacing it");
                conns.forget(conn);
                conns.ensure_one();
            }
            ConnEvent::OpenFailed { conn, error } => {
                conns.forget(conn);
                match error {
                    OpenError::Fatal(message) => return Err(AdapterError::Fatal(message)),
                    OpenError::Retryable(message) => {
                        failures += 1;
                        tracing::warn!(platform = "slack", failures, error = %message, "could not open a socket");
                        if failures >= shared.tunables.max_open_failures && conns.active.is_none() {
                            return Err(AdapterError::Retryable(message));
                        }
                        retry_at = Some(Instant::now() + backoff(&shared.tunables, failures));
                    }
                    OpenError::RateLimited {
                        message,
                        retry_after,
                    } => {
                        // Flow control, not failure: wait as long as Slack asked (every
                        // open waits for it, also after a restart), then try again.
                        tracing::warn!(platform = "slack", ?retry_after, error = %message, "Slack asked to wait before opening a socket");
                        retry_at = Some(
                            Instant::now()
                                + retry_after.max(backoff(&shared.tunables, failures.max(1))),
                        );
                    }
                }
            }
        }
    }
}

/// Translates, hands over, and acknowledges one envelope (a job of its lane).
async fn handle_envelope(
    shared: Arc<Shared>,
    ctx: AdapterContext,
    me: BotIdentity,
    conn: Option<ConnHandle>,
    envelope_id: String,
    kind: String,
    payload: Value,
) {
    let (conn, envelope_id, me) = (conn.as_ref(), envelope_id.as_str(), &me);
    let shared = &shared;
    if let Some(error) = crate::dead_letter::undecodable(&kind, &payload) {
        let letter = crate::dead_letter::dead_letter(envelope_id, &kind, &payload, error);
        // Acknowledged only once kept; unacknowledged, Slack redelivers it.
        if ctx.dead_letter(letter).await != RecordOutcome::Failed {
            ack(conn, envelope_id, None);
        }
        return;
    }
    let translator = Translator {
        settings: &shared.settings,
        gates: &shared.gates,
        me,
        memory: &shared.memory,
        api: &shared.api,
        lookup_deadline: Instant::now() + LOOKUP_BUDGET,
    };
    let (event, mut after) = match translator.translate(&kind, envelope_id, &payload).await {
        Handling::Ack(reason) => {
            tracing::trace!(platform = "slack", %envelope_id, reason, "acknowledged without a turn");
            ack(conn, envelope_id, None);
            return;
        }
        Handling::Deliver(delivery) => {
            let Delivery { event, after } = *delivery;
            (event, after)
        }
    };
    let event_id = event.event_id.clone();
    // The core may send typing for this event before this task runs again, so the
    // reaction target is known before the hand-over (a refused event's entry is harmless:
    // its redelivery overwrites it).
    if let Some((thread_key, reacting)) = after.reacting.take() {
        shared.memory().remember_reacting(thread_key, reacting);
    }
    match ctx.deliver(event).await {
        RecordOutcome::Recorded | RecordOutcome::Duplicate => {
            let payload = after.ack_payload.take();
            remember(shared, after);
            ack(conn, envelope_id, payload.as_ref());
        }
        RecordOutcome::Refused => {
            // An unauthorized sender: nothing to remember, and a clicked prompt keeps its
            // buttons for someone who may answer it.
            ack(conn, envelope_id, None);
        }
        RecordOutcome::Failed => {
            tracing::warn!(platform = "slack", %envelope_id, %event_id, "core could not record the event; leaving it unacknowledged for redelivery");
        }
    }
}

fn ack(conn: Option<&ConnHandle>, envelope_id: &str, payload: Option<&Value>) {
    let acked = conn.is_some_and(|c| c.ack(envelope_id, payload));
    if !acked {
        tracing::debug!(platform = "slack", %envelope_id, "socket gone before the ack; Slack will redeliver");
    }
}

/// Applies the memory updates of a recorded event, and removes answered prompts' buttons.
fn remember(shared: &Arc<Shared>, after: AfterRecord) {
    let AfterRecord {
        handed_over,
        mentioned_thread,
        bot_thread,
        reacting,
        answered_prompt,
        ack_payload: _,
    } = after;
    {
        let mut memory = shared.memory();
        if let Some(key) = handed_over {
            memory.handed_over.insert(&key);
        }
        if let Some(thread) = mentioned_thread {
            memory.mentioned_threads.insert(&thread);
        }
        if let Some(thread) = bot_thread {
            memory.bot_threads.insert(&thread);
        }
        if let Some((thread_key, reacting)) = reacting {
            memory.remember_reacting(thread_key, reacting);
        }
        if let Some(prompt) = &answered_prompt {
            memory.answered_prompts.insert(&prompt.memory_key());
        }
    }
    if let Some(prompt) = answered_prompt {
        let shared = shared.clone();
        tokio::spawn(async move {
            if let Err(e) = shared
                .api
                .call("chat.update", Token::Bot, &prompt.update_body())
                .await
            {
                tracing::warn!(platform = "slack", error = %e, "could not remove the prompt's buttons");
            }
        });
    }
}
