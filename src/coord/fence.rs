//! The session lease a task's writes are fenced by, without threading a fenced `Store`
//! through every layer a turn touches (router, agent, tools): the router runs a turn inside
//! [`with_fence`], and every write that task makes through any `Store` clone is fenced by
//! that lease, as if made through the store's `fenced` handle. Tasks spawned from it
//! (reply delivery, titles) are not fenced: they do not write the turn's rows.

use std::future::Future;
use std::sync::Arc;

use super::lease::Lease;

tokio::task_local! {
    static TURN_FENCE: Arc<Lease>;
}

/// Runs `work` with its writes fenced by `lease`.
pub async fn with_fence<F: Future>(lease: Arc<Lease>, work: F) -> F::Output {
    TURN_FENCE.scope(lease, work).await
}

/// The lease the current task's writes are fenced by, if any.
pub fn current_fence() -> Option<Arc<Lease>> {
    TURN_FENCE.try_with(Arc::clone).ok()
}
