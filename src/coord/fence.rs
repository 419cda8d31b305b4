//! The session lease a task's writes are fenced by, without threading a fenced `Store`
//! through every layer a turn touches (router, agent, tools): the router runs a turn inside
//! [`with_fence`], and every write that task makes through any `Store` clone is fenced by
//! that lease, as if made through the store's `fenced` handle. Tasks spawned from it
//! (reply delivery, titles) are not fenced: they do not write the turn's rows; the task
//! that shows a turn's progress carries its fence ([`inherit_fence`]) so its platform calls
//! are checked against the hold.
//!
//! The lease's [`Trust`] travels with it: what the turn does outside the database (a tool's
//! side effect, a progress line) is checked against it first ([`current_trust`]).

use std::future::Future;
use std::sync::Arc;

use super::lease::Lease;
use super::trust::Trust;

#[derive(Clone)]
struct TurnFence {
    lease: Arc<Lease>,
    trust: Trust,
}

tokio::task_local! {
    static TURN_FENCE: TurnFence;
}

/// Runs `work` with its writes fenced by `lease` and its other actions checked against
/// `trust` (the local deadline of that lease).
pub async fn with_fence<F: Future>(lease: Arc<Lease>, trust: Trust, work: F) -> F::Output {
    TURN_FENCE.scope(TurnFence { lease, trust }, work).await
}

/// The lease the current task's writes are fenced by, if any.
pub fn current_fence() -> Option<Arc<Lease>> {
    TURN_FENCE.try_with(|fence| fence.lease.clone()).ok()
}

/// The trust the current task's actions are checked against: its fence's, or unbounded
/// outside a fenced turn (one instance owns the state, or the work is not a session's).
pub fn current_trust() -> Trust {
    TURN_FENCE
        .try_with(|fence| fence.trust.clone())
        .unwrap_or_else(|_| Trust::unbounded())
}

/// `work` run under the current task's fence, if any (for a task spawned to act for it).
pub fn inherit_fence<F: Future>(work: F) -> impl Future<Output = F::Output> {
    let fence = TURN_FENCE.try_with(TurnFence::clone).ok();
    async move {
        match fence {
            Some(fence) => TURN_FENCE.scope(fence, work).await,
            None => work.await,
        }
    }
}
