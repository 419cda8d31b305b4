//! The intake's front door: it hands each submission to the worker of its chat, one worker
//! (one task) per chat, so a chat waiting on the core never delays
//! another chat's messages, while each chat's updates keep their order (split pastes and
//! albums merge within a chat). A worker that has been idle for a while ends; the next
//! submission for its chat starts a new one.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::AdapterContext;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{ChatIntake, Disposition, IntakeHandle, Submission};
use crate::api::BotApi;
use crate::gating::BotIdentity;
use crate::settings::Settings;

/// How long a chat's worker waits for more work (with nothing pending) before it ends.
pub(super) const WORKER_IDLE: Duration = Duration::from_secs(30);

/// The running intake; dropping or aborting it stops the front door and every worker.
#[derive(Debug)]
pub struct IntakeTask {
    front: tokio::task::JoinHandle<()>,
    stop: CancellationToken,
}

impl IntakeTask {
    pub fn abort(&self) {
        self.stop.cancel();
        self.front.abort();
    }
}

impl Drop for IntakeTask {
    fn drop(&mut self) {
        self.abort();
    }
}

/// What every chat worker shares.
#[derive(Clone)]
pub(super) struct Shared {
    pub api: BotApi,
    pub settings: Arc<Settings>,
    pub bot: BotIdentity,
    pub ctx: AdapterContext,
    /// Cancelled when the adapter's run ends (or at shutdown): workers stop.
    pub stop: CancellationToken,
}

/// Starts the intake; it stops when every handle is dropped, the task is aborted, or at
/// shutdown.
pub fn spawn(
    api: BotApi,
    settings: Arc<Settings>,
    bot: BotIdentity,
    ctx: AdapterContext,
) -> (IntakeHandle, IntakeTask) {
    let (tx, rx) = mpsc::channel(256);
    let stop = ctx.shutdown.child_token();
    let shared = Shared {
        api,
        settings,
        bot,
        ctx,
        stop: stop.clone(),
    };
    let front = tokio::spawn(front_door(shared, rx));
    (IntakeHandle { tx }, IntakeTask { front, stop })
}

async fn front_door(shared: Shared, mut rx: mpsc::Receiver<Submission>) {
    let mut workers: HashMap<i64, mpsc::UnboundedSender<Submission>> = HashMap::new();
    loop {
        let submission = tokio::select! {
            submission = rx.recv() => match submission {
                Some(submission) => submission,
                None => break,
            },
            _ = shared.stop.cancelled() => break,
        };
        let Some(chat) = chat_of(&submission) else {
            // Nothing the adapter handles (another update type): acknowledge it.
            submission.done.send(Disposition::Acknowledge);
            continue;
        };
        if workers.len() > 1024 {
            workers.retain(|_, worker| !worker.is_closed());
        }
        let submission = match workers.get(&chat) {
            None => submission,
            Some(worker) => match worker.send(submission) {
                Ok(()) => continue,
                // The worker ended (idle) since its last submission: start a fresh one.
                Err(mpsc::error::SendError(submission)) => submission,
            },
        };
        let (worker_tx, worker_rx) = mpsc::unbounded_channel();
        let _ = worker_tx.send(submission);
        workers.insert(chat, worker_tx);
        tokio::spawn(ChatIntake::new(shared.clone()).run(worker_rx));
    }
}

/// The chat an update belongs to (a button click: the chat of the clicked message).
fn chat_of(submission: &Submission) -> Option<i64> {
    let update = &submission.update;
    if let Some(query) = &update.callback_query {
        return Some(
            query
                .message
                .as_ref()
                .map_or(query.from.id, |message| message.chat.id),
        );
    }
    update
        .message
        .as_ref()
        .or(update.channel_post.as_ref())
        .map(|message| message.chat.id)
}
