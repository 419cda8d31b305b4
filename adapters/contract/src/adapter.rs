//! The adapter trait and the context the core gives each adapter task.

use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::{
    Capabilities, DeadLetter, DeadLetterInbound, MessageEvent, Outbound, Progress, SendResult,
};

/// What the core answers once it has looked at an inbound event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordOutcome {
    /// Durably recorded for processing: the adapter may acknowledge / advance its offset.
    Recorded,
    /// Already seen (a redelivery): acknowledge it, nothing else happens.
    Duplicate,
    /// Could not be recorded (storage failure): do NOT acknowledge; let the platform
    /// redeliver it.
    Failed,
    /// The sender is not authorized: acknowledge it, but nothing happened — a refused
    /// button click did not answer its prompt, which keeps its buttons.
    Refused,
}

/// An inbound event plus the channel on which the core confirms it was recorded. Adapters
/// acknowledge to the platform (advance offsets, ack envelopes) only after that answer.
#[derive(Debug)]
pub struct Inbound {
    pub event: MessageEvent,
    pub recorded: oneshot::Sender<RecordOutcome>,
}

/// Everything an adapter task receives from the core.
#[derive(Debug, Clone)]
pub struct AdapterContext {
    pub inbound: mpsc::Sender<Inbound>,
    /// Where undecodable items go ([`AdapterContext::dead_letter`]).
    pub dead_letters: mpsc::Sender<DeadLetterInbound>,
    pub progress: Progress,
    pub shutdown: CancellationToken,
    /// Claims on ingress points that only one instance may use at a time (solo when this
    /// instance runs alone).
    pub ingress: crate::Ingress,
}

impl AdapterContext {
    /// Hands an event to the core and waits until it is recorded (or refused).
    pub async fn deliver(&self, event: MessageEvent) -> RecordOutcome {
        hand_over(&self.inbound, |recorded| Inbound { event, recorded }).await
    }

    /// Hands an item the adapter could not decode to the core and waits until it is kept.
    /// `Recorded` or `Duplicate`: acknowledge it; `Failed`: leave it for redelivery.
    pub async fn dead_letter(&self, letter: DeadLetter) -> RecordOutcome {
        hand_over(&self.dead_letters, |recorded| DeadLetterInbound {
            letter,
            recorded,
        })
        .await
    }
}

/// Sends one item with its answer channel and waits for the core's answer; a core that is
/// gone answers `Failed` (nothing is acknowledged).
async fn hand_over<T>(
    to: &mpsc::Sender<T>,
    item: impl FnOnce(oneshot::Sender<RecordOutcome>) -> T,
) -> RecordOutcome {
    let (recorded, answer) = oneshot::channel();
    if to.send(item(recorded)).await.is_err() {
        return RecordOutcome::Failed;
    }
    answer.await.unwrap_or(RecordOutcome::Failed)
}

/// Why an adapter task stopped.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// Retrying cannot help (bad token, forbidden): the adapter is marked failed.
    #[error("{0}")]
    Fatal(String),
    /// A connection-level failure: the supervisor restarts the adapter with backoff.
    #[error("{0}")]
    Retryable(String),
}

/// One chat platform. Implementations translate protocol only.
pub trait Adapter: Send + Sync + 'static {
    /// The platform name used in session keys (`telegram`, `discord`, `slack`, `api_server`).
    fn platform(&self) -> &'static str;

    fn capabilities(&self) -> Capabilities;

    /// How long the adapter may go without reporting progress before the supervisor
    /// restarts it (a long poll's timeout plus a margin, a few heartbeat intervals).
    fn liveness_window(&self) -> std::time::Duration {
        std::time::Duration::from_secs(90)
    }

    /// Receives events until `ctx.shutdown` fires or the connection fails. Must report
    /// `ctx.progress` whenever the platform demonstrably answers.
    fn run(&self, ctx: AdapterContext) -> BoxFuture<'_, Result<(), AdapterError>>;

    /// Performs one outbound operation.
    fn send(&self, outbound: Outbound) -> BoxFuture<'_, SendResult>;

    /// Renames a thread the adapter itself opened for a conversation (Discord's
    /// auto-threads), after the session got a title. Threads the adapter did not open are
    /// left alone, and platforms without such threads keep this default: nothing to do.
    fn rename_thread<'a>(&'a self, thread_id: &'a str, name: &'a str) -> BoxFuture<'a, SendResult> {
        let _ = (thread_id, name);
        Box::pin(async { SendResult::sent(None) })
    }

    /// Fetches the attachments `event.pending_media` still refers to and puts them into the
    /// event (files into `media_paths`/`media_types`, what could not be fetched as a
    /// one-line note in its text), emptying `pending_media`. The core calls it just before
    /// the event's turn runs, so an adapter can acknowledge an event before a slow download
    /// and still give the model the file. Adapters that defer no download keep this
    /// default; whatever is left pending afterwards becomes a note from the core.
    fn fetch_pending_media<'a>(&'a self, event: &'a mut MessageEvent) -> BoxFuture<'a, ()> {
        let _ = event;
        Box::pin(async {})
    }

    /// Chats that moved to a new id since the last call, as (old id, new id): a Telegram
    /// group upgraded to a supergroup, learnt from a send. The core moves the conversations
    /// routed to the old chat onto the new one. Platforms whose chats never move keep this
    /// default.
    fn take_chat_migrations(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}
