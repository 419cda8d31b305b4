//! Delivering one reply to a platform: split it into chunks in the platform's length unit,
//! send them in order with Hermes's retry rules, fall back to plain text after a formatting
//! rejection, split further when the platform still says "too long", and never re-send a
//! send that may already have happened. The outcome says exactly how far delivery got.

mod edit;
mod ledger;
mod media;
mod retry;

use std::collections::VecDeque;
use std::sync::Arc;

use hermes_adapter::{Adapter, LengthUnit, Outbound, OutboundKind, SendErrorKind, SendResult};

use crate::config::ReplyToMode;
use crate::gateway::chunk::chunk_message;

pub use ledger::{DeliveryError, ObligationDelivery};
pub use retry::{
    FAILURE_NOTICE, FORMAT_FALLBACK_MAX_CHARS, FORMAT_FALLBACK_PREFIX, Jitter, RetryPolicy,
};
use retry::{FailureClass, classify, format_fallback};

/// Pieces that still draw "too long" at this size (in the platform's unit) are given up on:
/// a platform refusing 64 units is misreporting its limit, not measuring differently.
const MIN_RECHUNK_LIMIT: usize = 64;

/// A failed send: the adapter's kind and the platform's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct SendFailure {
    pub kind: SendErrorKind,
    pub message: String,
}

/// How far a reply got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// Every chunk was confirmed by the platform.
    Delivered,
    /// The first `after_chunk` pieces were confirmed; the next send may or may not have
    /// reached the platform and was not repeated. The caller must reconcile.
    Ambiguous { after_chunk: usize, error: String },
    /// A send failed for good (the failure notice was sent if retries ran out).
    Failed { error: SendFailure },
}

/// What [`Deliverer::deliver`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryReport {
    /// The platform ids of every message confirmed sent, in order (the failure notice and
    /// fallbacks included).
    pub sent_message_ids: Vec<String>,
    pub outcome: DeliveryOutcome,
}

/// The result of sending one piece, retries and fallbacks included.
enum PieceOutcome {
    Sent(Option<String>),
    TooLong(SendFailure),
    Ambiguous(String),
    /// Retries ran out on a retryable failure: the failure notice is due.
    Exhausted(SendFailure),
    Failed(SendFailure),
}

/// The result of one send with retries.
enum Attempt {
    Sent(Option<String>),
    Exhausted(SendFailure),
    Rejected(FailureClass, SendFailure),
}

/// Sends replies through one adapter.
#[derive(Clone)]
pub struct Deliverer {
    adapter: Arc<dyn Adapter>,
    policy: RetryPolicy,
    /// Set for agent replies' platforms: `MEDIA:` tags become native attachments.
    media: Option<crate::gateway::media_tags::MediaPolicy>,
}

impl std::fmt::Debug for Deliverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliverer")
            .field("platform", &self.adapter.platform())
            .field("policy", &self.policy)
            .finish()
    }
}

/// Where a reply goes and what it quotes.
struct Target<'a> {
    chat_id: &'a str,
    thread_id: Option<&'a str>,
}

impl Deliverer {
    pub fn new(adapter: Arc<dyn Adapter>, policy: RetryPolicy) -> Self {
        Self {
            adapter,
            policy,
            media: None,
        }
    }

    /// Delivers `text` completely or reports where it stopped. `reply_to_mode` decides which
    /// messages quote `reply_to`: none, the first one sent, or all of them.
    pub async fn deliver(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
        text: &str,
        reply_to: Option<String>,
        reply_to_mode: ReplyToMode,
    ) -> DeliveryReport {
        let target = Target { chat_id, thread_id };
        let capabilities = self.adapter.capabilities();
        let unit = capabilities.length_unit;
        let limit = capabilities.message_limit.max(1);
        let mut pieces: VecDeque<String> = chunk_message(text, limit, unit).into();
        let mut sent_message_ids = Vec::new();
        let mut confirmed = 0usize;
        while let Some(piece) = pieces.pop_front() {
            let quote = match reply_to_mode {
                ReplyToMode::Off => None,
                ReplyToMode::First if confirmed > 0 => None,
                ReplyToMode::First | ReplyToMode::All => reply_to.clone(),
            };
            let failure = match self.send_piece(&target, &piece, quote, limit, unit).await {
                PieceOutcome::Sent(id) => {
                    confirmed += 1;
                    sent_message_ids.extend(id);
                    continue;
                }
                PieceOutcome::TooLong(failure) => {
                    let smaller = unit.measure(&piece) / 2;
                    if smaller >= MIN_RECHUNK_LIMIT {
                        tracing::warn!(
                            platform = self.adapter.platform(),
                            chat_id,
                            smaller,
                            "platform refused a chunk as too long; splitting it further"
                        );
                        for sub in chunk_message(&piece, smaller, unit).into_iter().rev() {
                            pieces.push_front(sub);
                        }
                        continue;
                    }
                    failure
                }
                PieceOutcome::Ambiguous(error) => {
                    let outcome = DeliveryOutcome::Ambiguous {
                        after_chunk: confirmed,
                        error,
                    };
                    return DeliveryReport {
                        sent_message_ids,
                        outcome,
                    };
                }
                PieceOutcome::Exhausted(failure) => {
                    tracing::error!(platform = self.adapter.platform(), chat_id,
                        error = %failure, "reply not delivered after retries; sending the notice");
                    let notice = self
                        .send_once(&target, FAILURE_NOTICE, reply_to.clone(), false)
                        .await;
                    sent_message_ids.extend(notice.message_id);
                    failure
                }
                PieceOutcome::Failed(failure) => failure,
            };
            let outcome = DeliveryOutcome::Failed { error: failure };
            return DeliveryReport {
                sent_message_ids,
                outcome,
            };
        }
        DeliveryReport {
            sent_message_ids,
            outcome: DeliveryOutcome::Delivered,
        }
    }

    /// Sends one piece: as written, then as plain text, then as Hermes's plain-text fallback.
    async fn send_piece(
        &self,
        target: &Target<'_>,
        piece: &str,
        reply_to: Option<String>,
        limit: usize,
        unit: LengthUnit,
    ) -> PieceOutcome {
        let fallback = format_fallback(piece, limit, unit);
        let tries = [(piece, false), (piece, true), (fallback.as_str(), true)];
        let mut last = None;
        for (text, plain) in tries {
            let kind = OutboundKind::Text {
                text: text.to_owned(),
                reply_to: reply_to.clone(),
                plain,
            };
            match self.send_with_retry(target, &kind).await {
                Attempt::Sent(id) => return PieceOutcome::Sent(id),
                Attempt::Exhausted(failure) => return PieceOutcome::Exhausted(failure),
                Attempt::Rejected(class, failure) => match class {
                    FailureClass::Ambiguous => return PieceOutcome::Ambiguous(failure.message),
                    FailureClass::TooLong => return PieceOutcome::TooLong(failure),
                    FailureClass::Format => last = Some(failure),
                    FailureClass::Permanent | FailureClass::Retryable => {
                        return PieceOutcome::Failed(failure);
                    }
                },
            }
        }
        PieceOutcome::Failed(last.unwrap_or_else(|| SendFailure {
            kind: SendErrorKind::Unknown,
            message: "no send attempted".into(),
        }))
    }

    /// One send plus up to `max_retries` retries of retryable failures.
    async fn send_with_retry(&self, target: &Target<'_>, what: &OutboundKind) -> Attempt {
        let mut result = self.send_kind(target, what.clone()).await;
        let mut retry_after = result.retry_after;
        let mut attempt = 0;
        loop {
            let Some((kind, message)) = result.error.clone() else {
                return Attempt::Sent(result.message_id);
            };
            let failure = SendFailure { kind, message };
            let class = classify(failure.kind, &failure.message);
            if class != FailureClass::Retryable {
                return Attempt::Rejected(class, failure);
            }
            if attempt >= self.policy.max_retries {
                return Attempt::Exhausted(failure);
            }
            attempt += 1;
            // The server's retry_after is honoured once; later waits follow the backoff.
            let delay = self.policy.delay(attempt, retry_after.take());
            tracing::warn!(platform = self.adapter.platform(), chat_id = target.chat_id,
                attempt, delay_ms = delay.as_millis() as u64, error = %failure, "send failed; retrying");
            tokio::time::sleep(delay).await;
            result = self.send_kind(target, what.clone()).await;
            if result.retry_after.is_some() {
                retry_after = result.retry_after;
            }
        }
    }

    async fn send_once(
        &self,
        target: &Target<'_>,
        text: &str,
        reply_to: Option<String>,
        plain: bool,
    ) -> SendResult {
        let kind = OutboundKind::Text {
            text: text.to_owned(),
            reply_to,
            plain,
        };
        self.send_kind(target, kind).await
    }

    async fn send_kind(&self, target: &Target<'_>, kind: OutboundKind) -> SendResult {
        let outbound = Outbound {
            chat_id: target.chat_id.to_owned(),
            thread_id: target.thread_id.map(str::to_owned),
            kind,
        };
        self.adapter.send(outbound).await
    }
}
