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

use super::Router;
use crate::gateway::delivery::DeliveryOutcome;

/// A chat: platform and chat id (threads of one chat share its rate limits and its order).
type LaneKey = (String, String);

/// One recorded reply waiting for its lane.
#[derive(Debug, Clone)]
pub(super) struct Outgoing {
    pub obligation_id: String,
    /// The platform message the reply quotes (first delivery only).
    pub reply_to: Option<String>,
    /// The inbound event answered, for the logs.
    pub event_id: Option<String>,
}

/// The lanes of every chat with replies owed (a lane and its task exist only while it has
/// work, so memory is bounded by the chats being answered right now).
#[derive(Debug)]
pub(super) struct Outbox {
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

impl Router {
    /// Hands recorded replies to their chat's lane and returns at once.
    pub(super) fn send_later(&self, platform: &str, chat_id: &str, replies: Vec<Outgoing>) {
        if replies.is_empty() {
            return;
        }
        let key = (platform.to_owned(), chat_id.to_owned());
        if self.outbox.push(&key, replies) {
            let router = self.arc();
            tokio::spawn(async move { router.run_lane(key).await });
        }
    }

    /// Sends obligations recorded outside a turn (a scheduled job's output) on their chat's
    /// lane, like any reply.
    pub fn send_recorded(&self, platform: &str, chat_id: &str, obligation_ids: Vec<String>) {
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
            let outcome = self
                .deliver_recorded(
                    &next.obligation_id,
                    next.reply_to.clone(),
                    next.event_id.as_deref(),
                )
                .await;
            let deferred = matches!(outcome, Some(DeliveryOutcome::Deferred { .. }));
            if deferred && self.outbox.stop_waiting.is_cancelled() {
                // Stopping: the rest of this chat stays owed and goes out after the restart,
                // still in order (the ledger resends oldest first).
                let mut lanes = self.outbox.lock();
                self.outbox.retire(&mut lanes, &key);
                return;
            }
        }
    }

    /// Shutdown: ends every retry wait (those replies stay owed) and lets the lanes finish
    /// what they are sending, for at most `limit`.
    pub async fn finish_deliveries(&self, limit: Duration) -> bool {
        self.outbox.stop_waiting.cancel();
        self.outbox.wait_idle(limit).await
    }
}
