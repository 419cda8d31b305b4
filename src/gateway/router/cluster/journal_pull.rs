//! On PostgreSQL, news for a session this instance holds: events other instances recorded
//! for it (a message that reached another instance through the balancer, its Slack socket
//! or its Discord shard) go through the busy rules here as soon as the holder hears of them
//! (`NOTIFY`, or the sweep when a notification was missed), exactly as if received here.
//! So a `/stop`, an approval answer, a steer or an interrupting message acts on the running
//! turn instead of waiting for its end — an approval answer could otherwise only arrive
//! after the approval had timed out. Events already being processed (a dead instance's
//! turns) are left to the worker's next look at the journal.

use std::sync::Arc;

use crate::gateway::router::cluster::{ClusterLink, SlotWork};
use crate::gateway::router::cluster::{awaits_worker, seen_key};
use crate::gateway::router::slot::{Slot, SlotState};
use crate::state::InboundState;

/// Starts taking up `slot`'s journaled events, or asks the running pull to look again.
impl ClusterLink {
    pub(in crate::gateway::router) fn pull_journaled<W: SlotWork>(
        self: &Arc<Self>,
        work: &Arc<W>,
        slot: &Arc<Slot>,
        state: &mut SlotState,
    ) {
        if state.pulling {
            state.pull_again = true;
            return;
        }
        state.pulling = true;
        let (link, work, slot) = (self.clone(), work.clone(), slot.clone());
        tokio::spawn(async move { link.pull_loop(&*work, slot).await });
    }

    /// One pull at a time per slot, so events are taken up in the journal's order.
    async fn pull_loop<W: SlotWork>(&self, work: &W, slot: Arc<Slot>) {
        loop {
            self.take_up_received(work, &slot).await;
            let mut state = slot.lock();
            if !state.pull_again || !state.held {
                state.pulling = false;
                state.pull_again = false;
                return;
            }
            state.pull_again = false;
        }
    }

    /// Dispatches the session's received events nobody here has taken up yet, oldest first,
    /// while the lease is still held.
    async fn take_up_received<W: SlotWork>(&self, work: &W, slot: &Arc<Slot>) {
        let unfinished = match self.store.unfinished_inbound_of(&slot.key).await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(session_key = %slot.key, error = %e, "cannot read the session's new events; the turn boundary picks them up");
                return;
            }
        };
        let received = unfinished
            .iter()
            .filter(|e| e.state == InboundState::Received);
        for journaled in received {
            let name = seen_key(&journaled.platform, &journaled.event_id);
            if !untaken(&slot.lock(), &name) {
                continue;
            }
            let Some(job) = self.journaled_job(journaled).await else {
                continue;
            };
            {
                // Checked again: the worker's own look at the journal may have taken it.
                let mut state = slot.lock();
                if !state.held || !untaken(&state, &name) || awaits_worker(&job, &state) {
                    continue;
                }
                state.seen.insert(name);
            }
            work.place(slot.key.clone(), job);
        }
    }
}

/// Whether the event named `name` is neither taken up under this hold nor queued.
pub(in crate::gateway::router) fn untaken(state: &SlotState, name: &str) -> bool {
    !state.seen.contains(name)
        && !state
            .queue
            .iter()
            .any(|job| seen_key(&job.event.source.platform, &job.event.event_id) == name)
}
