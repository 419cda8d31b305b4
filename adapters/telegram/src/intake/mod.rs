//! The intake: every update (from polling or the webhook) passes through here on its way to
//! the core. It gates messages, records attachments as references to fetch after the ack
//! (`pending.rs`), merges Telegram's split pastes and
//! albums into one event, answers button clicks, and tells the submitter whether the update
//! may be acknowledged (`Disposition`) only once the event carrying it is recorded. Each
//! chat is served by its own worker ([`dispatch`]), so chats never wait on each other.
//!
//! Every part of an album or paste is tagged ([`MergeTag`]) so that, with several instances
//! behind a balancer, the session's holder joins the parts however they were spread; there
//! the intake journals an album part or a paste part of split length at once instead of
//! holding it (see `docs/cluster.md`).

mod dispatch;

use std::collections::HashMap;
use std::time::Duration;

use hermes_adapter::{MergeKind, MergeTag, MessageEvent, RecordOutcome};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::api::types::{CallbackQuery, Message, Update};
use crate::gating;
use crate::inbound;
use crate::media;
use crate::pending;
pub use dispatch::spawn;

/// Telegram clients split pastes at 4096; a last part this long almost surely continues.
const SPLIT_THRESHOLD: usize = 4000;
const FAST_LEN: usize = 320;
const FAST_DELAY: Duration = Duration::from_millis(180);
const SHORT_LEN: usize = 1024;
const SHORT_DELAY: Duration = Duration::from_millis(240);

/// What the submitter may do with an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Recorded, a duplicate, or deliberately ignored: move the offset past it / answer 200.
    Acknowledge,
    /// Not recorded: keep it unacknowledged so Telegram delivers it again.
    Retry,
}

/// Tells the submitter what became of one update. Dropped without an answer (the intake
/// stopped, a pending batch was discarded) it answers `Retry`.
#[derive(Debug)]
pub struct Completion {
    update_id: i64,
    target: Option<CompletionTarget>,
}

#[derive(Debug)]
enum CompletionTarget {
    Oneshot(oneshot::Sender<Disposition>),
    Channel(mpsc::UnboundedSender<(i64, Disposition)>),
}

impl Completion {
    pub fn oneshot(update_id: i64) -> (Self, oneshot::Receiver<Disposition>) {
        let (tx, rx) = oneshot::channel();
        (
            Self {
                update_id,
                target: Some(CompletionTarget::Oneshot(tx)),
            },
            rx,
        )
    }

    pub fn channel(update_id: i64, tx: mpsc::UnboundedSender<(i64, Disposition)>) -> Self {
        Self {
            update_id,
            target: Some(CompletionTarget::Channel(tx)),
        }
    }

    pub fn send(mut self, disposition: Disposition) {
        self.finish(disposition);
    }

    fn finish(&mut self, disposition: Disposition) {
        match self.target.take() {
            Some(CompletionTarget::Oneshot(tx)) => {
                let _ = tx.send(disposition);
            }
            Some(CompletionTarget::Channel(tx)) => {
                let _ = tx.send((self.update_id, disposition));
            }
            None => {}
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        self.finish(Disposition::Retry);
    }
}

pub struct Submission {
    pub update: Update,
    pub done: Completion,
    /// False for an update an earlier run may already have journaled (a poller's backlog):
    /// it is handed over as its own event, never merged with another update.
    pub mergeable: bool,
}

/// The sending side, shared by the poller and the webhook handler.
#[derive(Debug, Clone)]
pub struct IntakeHandle {
    tx: mpsc::Sender<Submission>,
}

impl IntakeHandle {
    /// Submits `update`; `done` is answered once it may be acknowledged (or not). If the
    /// intake is gone the submission is dropped and `done` answers `Retry`.
    pub async fn submit(&self, update: Update, done: Completion) {
        self.send(update, done, true).await;
    }

    /// Like [`submit`](Self::submit), but the update becomes an event of its own even if it
    /// is a part of a split paste or an album. For updates an earlier run may already have
    /// recorded: merged with a newer update, the event would carry the recorded id and the
    /// core would drop the newer update with it as a duplicate.
    pub async fn submit_unmerged(&self, update: Update, done: Completion) {
        self.send(update, done, false).await;
    }

    async fn send(&self, update: Update, done: Completion, mergeable: bool) {
        let _ = self
            .tx
            .send(Submission {
                update,
                done,
                mergeable,
            })
            .await;
    }
}

/// Events waiting for their quiet period, with every update they carry.
struct Batch {
    event: MessageEvent,
    waiters: Vec<Completion>,
    last_part_chars: usize,
    deadline: Instant,
}

/// One chat's worker: its updates in order and its merge batches.
pub(crate) struct ChatIntake {
    shared: dispatch::Shared,
    batches: HashMap<String, Batch>,
}

impl ChatIntake {
    fn new(shared: dispatch::Shared) -> Self {
        Self {
            shared,
            batches: HashMap::new(),
        }
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Submission>) {
        let stop = self.shared.stop.clone();
        loop {
            let next_deadline = self.batches.values().map(|b| b.deadline).min();
            let idle_until = match next_deadline {
                Some(_) => None,
                None => Some(Instant::now() + dispatch::WORKER_IDLE),
            };
            tokio::select! {
                submission = rx.recv() => match submission {
                    Some(submission) => self.accept(submission).await,
                    None => break,
                },
                _ = sleep_until_opt(next_deadline) => self.flush_due().await,
                _ = sleep_until_opt(idle_until) => {
                    // Idle: refuse new work, finish whatever slipped in, and end.
                    rx.close();
                    while let Ok(submission) = rx.try_recv() {
                        self.accept(submission).await;
                    }
                    self.finish_batches().await;
                    return;
                }
                _ = stop.cancelled() => break,
            }
        }
        // Pending batches are dropped unrecorded: their waiters see Retry, so the updates
        // stay unacknowledged and come back after a restart.
    }

    async fn accept(
        &mut self,
        Submission {
            update,
            done,
            mergeable,
        }: Submission,
    ) {
        let update_id = update.update_id;
        if let Some(query) = update.callback_query {
            let disposition = self.click(&query).await;
            done.send(disposition);
            return;
        }
        let Some(message) = update.message.or(update.channel_post) else {
            done.send(Disposition::Acknowledge);
            return;
        };
        if !gating::should_process(&message, &self.shared.bot, &self.shared.settings) {
            done.send(Disposition::Acknowledge);
            return;
        }
        let mut event = inbound::message_event(update_id, &message, &self.shared.bot);
        if let Some(attachment) = media::attachment(&message) {
            // Journaled as a reference and fetched by whichever process runs the turn, after
            // the update is acknowledged (`pending.rs`); one declared over the cap is refused
            // here, before anything is fetched.
            match media::declared_over_cap(&attachment, &self.shared.settings) {
                Some(e) => {
                    tracing::warn!(platform = "telegram", update_id, error = %e, "attachment not saved");
                    pending::note_not_saved(&mut event, &e.to_string());
                }
                None => event
                    .pending_media
                    .push(pending::reference(&attachment, update_id)),
            }
        }
        if !mergeable {
            let disposition = self.deliver(event).await;
            done.send(disposition);
        } else if let Some(group) = &message.media_group_id {
            let key = format!("album:{}:{group}", message.chat.id);
            let delay = self.shared.settings.media_group_delay;
            event.merge = Some(MergeTag {
                key: key.clone(),
                kind: MergeKind::Album,
                order: message.message_id,
                quiet_ms: millis(delay),
            });
            if self.shared.ctx.ingress.is_shared() {
                // Several instances: the album's other parts may reach another one, so each
                // part is journaled at once on its own and the session's holder waits for
                // the rest and joins them (in the platform's order, which only single parts
                // keep).
                let disposition = self.deliver(event).await;
                done.send(disposition);
            } else {
                self.enqueue(key, event, done, delay);
            }
        } else if is_batchable_text(&message, &event) {
            let key = format!(
                "text:{}:{}:{}",
                event.source.chat_id,
                event.source.thread_id.as_deref().unwrap_or(""),
                event.source.user_id.as_deref().unwrap_or("")
            );
            self.enqueue_text(key, event, message.message_id, done);
        } else {
            let disposition = self.deliver(event).await;
            done.send(disposition);
        }
    }

    /// Adds an album part; the album flushes after the quiet period.
    fn enqueue(&mut self, key: String, event: MessageEvent, done: Completion, delay: Duration) {
        let deadline = Instant::now() + delay;
        match self.batches.get_mut(&key) {
            Some(batch) => {
                batch.event.append_part(event, MergeKind::Album);
                batch.waiters.push(done);
                batch.deadline = deadline;
            }
            None => {
                self.batches.insert(
                    key,
                    Batch {
                        event,
                        waiters: vec![done],
                        last_part_chars: 0,
                        deadline,
                    },
                );
            }
        }
    }

    /// Adds a text part; the quiet period depends on the reference's tiers. `order` is the
    /// part's message id: a batch is ordered by its first part's.
    fn enqueue_text(&mut self, key: String, event: MessageEvent, order: i64, done: Completion) {
        let part_chars = event.text.chars().count();
        let mut batch = match self.batches.remove(&key) {
            Some(mut batch) => {
                batch.event.append_part(event, MergeKind::SplitText);
                batch.waiters.push(done);
                batch.last_part_chars = part_chars;
                batch
            }
            None => Batch {
                event,
                waiters: vec![done],
                last_part_chars: part_chars,
                deadline: Instant::now(),
            },
        };
        let split = batch.last_part_chars >= SPLIT_THRESHOLD;
        let order = batch.event.merge.as_ref().map_or(order, |tag| tag.order);
        batch.event.merge = Some(MergeTag {
            key: key.clone(),
            kind: MergeKind::SplitText,
            order,
            quiet_ms: if split {
                millis(self.shared.settings.text_batch_split_delay)
            } else {
                0
            },
        });
        let delay = self.text_delay(batch.last_part_chars, batch.event.text.chars().count());
        self.batches.insert(
            key,
            Batch {
                deadline: Instant::now() + delay,
                ..batch
            },
        );
    }

    fn text_delay(&self, last_part_chars: usize, total_chars: usize) -> Duration {
        let configured = self.shared.settings.text_batch_delay;
        if last_part_chars >= SPLIT_THRESHOLD {
            if self.shared.ctx.ingress.is_shared() {
                // Several instances: the rest of the paste may reach another one, whose
                // intake journals it after a short quiet period. Journaled at once, this part
                // is in the journal first, and the session's holder waits for the rest.
                Duration::ZERO
            } else {
                self.shared.settings.text_batch_split_delay
            }
        } else if total_chars <= FAST_LEN {
            configured.min(FAST_DELAY)
        } else if total_chars <= SHORT_LEN {
            configured.min(SHORT_DELAY)
        } else {
            configured
        }
    }

    /// Waits out the batches still open (their quiet periods) and flushes them.
    async fn finish_batches(&mut self) {
        while let Some(deadline) = self.batches.values().map(|b| b.deadline).min() {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => self.flush_due().await,
                _ = self.shared.stop.cancelled() => return,
            }
        }
    }

    async fn flush_due(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .batches
            .iter()
            .filter(|(_, b)| b.deadline <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            if let Some(batch) = self.batches.remove(&key) {
                let disposition = self.deliver(batch.event).await;
                for waiter in batch.waiters {
                    waiter.send(disposition);
                }
            }
        }
    }

    async fn deliver(&self, event: MessageEvent) -> Disposition {
        match self.shared.ctx.deliver(event).await {
            RecordOutcome::Recorded | RecordOutcome::Duplicate | RecordOutcome::Refused => {
                Disposition::Acknowledge
            }
            RecordOutcome::Failed => Disposition::Retry,
        }
    }

    /// A button click: answer it at once, hand the command to the core, then take the
    /// buttons off the prompt so it cannot be answered twice. A click the core refused (a
    /// user who may not talk to the agent) leaves them for someone who may.
    async fn click(&self, query: &CallbackQuery) -> Disposition {
        let timeout = self.shared.settings.request_timeout;
        if let Err(e) = self
            .shared
            .api
            .call(
                "answerCallbackQuery",
                &json!({"callback_query_id": query.id}),
                timeout,
            )
            .await
        {
            tracing::debug!(platform = "telegram", error = %e, "answerCallbackQuery failed");
        }
        let Some(event) = inbound::callback_event(query) else {
            return Disposition::Acknowledge;
        };
        let outcome = self.shared.ctx.deliver(event).await;
        let disposition = match outcome {
            RecordOutcome::Failed => Disposition::Retry,
            _ => Disposition::Acknowledge,
        };
        if matches!(outcome, RecordOutcome::Recorded | RecordOutcome::Duplicate)
            && let Some(message) = &query.message
        {
            let params = json!({"chat_id": message.chat.id, "message_id": message.message_id, "reply_markup": {"inline_keyboard": []}});
            if let Err(e) = self
                .shared
                .api
                .call("editMessageReplyMarkup", &params, timeout)
                .await
            {
                tracing::debug!(platform = "telegram", error = %e, "removing the prompt's buttons failed");
            }
        }
        disposition
    }
}

/// Plain text (not a command, no attachment) is what Telegram splits and we merge.
fn is_batchable_text(message: &Message, event: &MessageEvent) -> bool {
    !message.has_media()
        && event.message_type == hermes_adapter::MessageType::Text
        && !event.text.is_empty()
}

fn millis(delay: Duration) -> u64 {
    u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
