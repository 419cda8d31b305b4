//! Per-chat delivery lanes. A recorded reply leaves its turn at once (so the turn's permit is
//! free before any flow-control wait) and is sent by its chat's lane: one task per chat with
//! replies owed, sending them one after another in the order they were recorded. A flood-wait
//! on one chat therefore holds neither a turn permit nor another chat, and a later reply to
//! a chat never overtakes an earlier one.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::gateway::delivery::{DeliveryOutcome, ObligationDelivery};
use crate::gateway::metrics::GatewayMetrics;
use crate::gateway::router::responder::Responder;
use crate::state::Obligation;

/// How often a lane held back by an untrusted lease says it still waits.
const TRUST_WAIT_REPORT: Duration = Duration::from_secs(60);

/// A chat: platform and chat id (threads of one chat share its rate limits and its order).
type LaneKey = (String, String);

/// One recorded reply waiting for its lane.
#[derive(Debug, Clone)]
pub(in crate::gateway::router) struct Outgoing {
    pub obligation_id: String,
    /// The platform message the reply quotes (first delivery only).
    pub reply_to: Option<String>,
    /// The inbound event answered, for the logs.
    pub event_id: Option<String>,
}

/// The lanes of every chat with replies owed (a lane and its task exist only while it has
/// work, so memory is bounded by the chats being answered right now).
#[derive(Debug)]
pub(in crate::gateway::router) struct Outbox {
    lanes: Mutex<HashMap<LaneKey, VecDeque<Outgoing>>>,
    /// Cancelled at shutdown: retry waits end at once and their replies stay owed.
    pub stop_waiting: CancellationToken,
    /// The number of running lanes, so shutdown can wait for them.
    running: watch::Sender<usize>,
}

impl Default for Outbox {
    fn default() -> Self {
        Self {
            lanes: Mutex::new(HashMap::new()),
            stop_waiting: CancellationToken::new(),
            running: watch::channel(0).0,
        }
    }
}

impl Outbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<LaneKey, VecDeque<Outgoing>>> {
        self.lanes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `replies` on the chat's lane; true when the lane is new and needs a task.
    fn push(&self, key: &LaneKey, replies: Vec<Outgoing>) -> bool {
        let mut lanes = self.lock();
        if let Some(lane) = lanes.get_mut(key) {
            lane.extend(replies);
            return false;
        }
        lanes.insert(key.clone(), replies.into());
        self.running.send_replace(lanes.len());
        true
    }

    /// The lane's next reply, or `None` after retiring the empty lane (under the same lock,
    /// so a reply pushed concurrently either lands before this or starts a new lane).
    fn next(&self, key: &LaneKey) -> Option<Outgoing> {
        let mut lanes = self.lock();
        let next = lanes.get_mut(key).and_then(VecDeque::pop_front);
        if next.is_none() {
            self.retire(&mut lanes, key);
        }
        next
    }

    /// Drops a lane; its replies left in the queue stay owed in the ledger.
    fn retire(&self, lanes: &mut HashMap<LaneKey, VecDeque<Outgoing>>, key: &LaneKey) {
        lanes.remove(key);
        self.running.send_replace(lanes.len());
    }

    /// Waits until no lane runs, at most `limit`; false if some still did.
    pub async fn wait_idle(&self, limit: Duration) -> bool {
        let mut running = self.running.subscribe();
        tokio::time::timeout(limit, running.wait_for(|n| *n == 0))
            .await
            .is_ok()
    }
}

impl Responder {
    /// Hands recorded replies to their chat's lane and returns at once.
    pub(in crate::gateway::router) fn send_later(
        self: &Arc<Self>,
        platform: &str,
        chat_id: &str,
        replies: Vec<Outgoing>,
    ) {
        if replies.is_empty() {
            return;
        }
        let key = (platform.to_owned(), chat_id.to_owned());
        if self.outbox.push(&key, replies) {
            let responder = self.clone();
            tokio::spawn(async move { responder.run_lane(key).await });
        }
    }

    /// Sends obligations recorded outside a turn (a scheduled job's output) on their chat's
    /// lane, like any reply.
    pub(in crate::gateway::router) fn send_recorded(
        self: &Arc<Self>,
        platform: &str,
        chat_id: &str,
        obligation_ids: Vec<String>,
    ) {
        let replies = obligation_ids
            .into_iter()
            .map(|obligation_id| Outgoing {
                obligation_id,
                reply_to: None,
                event_id: None,
            })
            .collect();
        self.send_later(platform, chat_id, replies);
    }

    /// A lane's task: delivers its chat's replies in order until none is left.
    async fn run_lane(self: Arc<Self>, key: LaneKey) {
        while let Some(next) = self.outbox.next(&key) {
            let mut outcome = self
                .deliver_recorded(
                    &next.obligation_id,
                    next.reply_to.clone(),
                    next.event_id.as_deref(),
                )
                .await;
            // Held back because this instance's lease could not be trusted: the same reply
            // goes again (still first in its chat) once a renewal lands; if a survivor took
            // it over meanwhile, the claim finds it theirs and sends nothing. A send cut off
            // in flight at the lease's deadline goes again once too, with the recovered
            // marker (its row is ambiguous), as a restart would send it — without this it
            // stayed owed until the next restart while this instance lived on.
            let mut cut_off_resent = false;
            loop {
                let again = match &outcome {
                    Some(DeliveryOutcome::Fenced { .. }) => true,
                    Some(o) if o.is_cut_off_by_fence() && !cut_off_resent => {
                        cut_off_resent = true;
                        true
                    }
                    _ => false,
                };
                if !again || !self.wait_for_trust().await {
                    break;
                }
                outcome = self
                    .deliver_recorded(
                        &next.obligation_id,
                        next.reply_to.clone(),
                        next.event_id.as_deref(),
                    )
                    .await;
                if outcome.is_none() {
                    tracing::info!(obligation_id = %next.obligation_id,
                        "a held-back reply was not sent here: it was delivered, taken over or abandoned elsewhere meanwhile");
                }
            }
            let deferred = matches!(
                outcome,
                Some(DeliveryOutcome::Deferred { .. } | DeliveryOutcome::Fenced { .. })
            );
            if deferred && self.outbox.stop_waiting.is_cancelled() {
                // Stopping: the rest of this chat stays owed and goes out after the restart,
                // still in order (the ledger resends oldest first).
                let mut lanes = self.outbox.lock();
                self.outbox.retire(&mut lanes, &key);
                return;
            }
        }
    }

    /// Waits until this instance's lease can be trusted again; false when the gateway is
    /// stopping first (the reply stays owed and goes out after the restart).
    async fn wait_for_trust(&self) -> bool {
        let trust = self.store.send_trust();
        loop {
            tokio::select! {
                trusted = trust.wait_until_trusted(Duration::ZERO, TRUST_WAIT_REPORT) => {
                    if trusted {
                        return true;
                    }
                    tracing::warn!("replies are held back: this instance's lease has not been \
                        confirmed by the database for a while; they are sent once it is, or by \
                        another instance once it expires");
                }
                () = self.outbox.stop_waiting.cancelled() => return false,
            }
        }
    }

    /// Shutdown: ends every retry wait (those replies stay owed) and lets the lanes finish
    /// what they are sending, for at most `limit`.
    pub(in crate::gateway::router) async fn finish_deliveries(&self, limit: Duration) -> bool {
        self.outbox.stop_waiting.cancel();
        self.outbox.wait_idle(limit).await
    }

    /// Sends one recorded obligation, quoting `reply_to` where the platform's mode says so,
    /// by editing the streamed preview recorded with it if there is one; returns how far it
    /// got (`None`: not sent at all).
    pub(in crate::gateway::router) async fn deliver_recorded(
        &self,
        id: &str,
        reply_to: Option<String>,
        event_id: Option<&str>,
    ) -> Option<DeliveryOutcome> {
        // Earlier replies to the chat owed elsewhere go first (`chat_order.rs`).
        let obligation: Obligation = super::chat_order::after_earlier_replies(self, id).await?;
        let Some(link) = self.link(&obligation.platform) else {
            tracing::warn!(platform = %obligation.platform, obligation_id = id, "reply for a platform that is not running; kept for later");
            return None;
        };
        let edit_target = match self.store.reply_edit_target(id).await {
            Ok(edit_target) => edit_target,
            Err(e) => {
                tracing::error!(obligation_id = id, error = %e, "cannot read a reply obligation");
                return None;
            }
        };
        let delivered = match edit_target {
            Some(message_id) => {
                link.deliverer
                    .deliver_obligation_by_edit(
                        &self.store,
                        &obligation,
                        &message_id,
                        reply_to,
                        link.reply_to_mode,
                    )
                    .await
            }
            None => {
                link.deliverer
                    .deliver_obligation_quoting(
                        &self.store,
                        &obligation,
                        reply_to,
                        link.reply_to_mode,
                    )
                    .await
            }
        };
        self.follow_chat_migrations(&link.adapter).await;
        match delivered {
            Ok(ObligationDelivery::Attempted(report)) => {
                let sent = report.sent_message_ids.len() as u64;
                self.metrics
                    .replies_out
                    .fetch_add(sent, std::sync::atomic::Ordering::Relaxed);
                match &report.outcome {
                    DeliveryOutcome::Delivered => {
                        // After the ledger says delivered: a crash from here on resends nothing.
                        tracing::debug!(platform = %obligation.platform, obligation_id = id,
                            event_id = event_id.unwrap_or(""), "reply delivered");
                    }
                    DeliveryOutcome::Deferred { .. } => {
                        tracing::warn!(platform = %obligation.platform, obligation_id = id,
                            outcome = ?report.outcome,
                            "reply deferred by flow control; it stays owed and is resent after a restart");
                    }
                    DeliveryOutcome::Fenced { error, .. } => {
                        tracing::info!(platform = %obligation.platform, obligation_id = id, %error,
                            "reply held back until this instance's lease is confirmed again");
                    }
                    _ => {
                        GatewayMetrics::incr(&self.metrics.send_failures);
                        tracing::warn!(platform = %obligation.platform, obligation_id = id, outcome = ?report.outcome, "reply not fully delivered");
                    }
                }
                Some(report.outcome)
            }
            Ok(ObligationDelivery::NotClaimed) => None,
            Err(e) => {
                tracing::error!(error = %e, "delivery ledger write failed");
                None
            }
        }
    }

    /// Moves the conversations of chats the adapter saw move (a group upgraded to a
    /// supergroup) so the next message there continues the same session.
    async fn follow_chat_migrations(&self, adapter: &std::sync::Arc<dyn hermes_adapter::Adapter>) {
        for (old, new) in adapter.take_chat_migrations() {
            let platform = adapter.platform();
            match self
                .routing
                .move_chat(&self.store, platform, &old, &new)
                .await
            {
                Ok(moved) => {
                    tracing::info!(platform, chat_id = %old, to_chat_id = %new, moved, "chat moved; its conversations follow")
                }
                Err(e) => {
                    tracing::error!(platform, chat_id = %old, error = %e, "cannot move the chat's conversations")
                }
            }
        }
    }
}
