//! Delivering one reply to a platform: split it into chunks in the platform's length unit,
//! send them in order with Hermes's retry rules, wait out rate limits for as long as the
//! platform asks (until the reply's deadline, never capped by an attempt count), fall back to
//! plain text after a formatting rejection, split further when the platform still says "too
//! long", and never re-send a send that may already have happened. The outcome says exactly
//! how far delivery got.

mod edit;
mod ledger;
mod media;
mod retry;
mod wait_claim;

use std::collections::VecDeque;
use std::sync::Arc;

use hermes_adapter::{Adapter, LengthUnit, Outbound, OutboundKind, SendErrorKind, SendResult};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::ReplyToMode;
use crate::gateway::chunk::chunk_message;

pub use ledger::{DeliveryError, ObligationDelivery};
pub use retry::{
    DEFAULT_RATE_LIMIT_DEADLINE, FAILURE_NOTICE, FORMAT_FALLBACK_MAX_CHARS, FORMAT_FALLBACK_PREFIX,
    Jitter, MAX_RATE_LIMIT_BACKOFF, RetryPolicy,
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
    /// The platform kept saying "later" past the reply's deadline, or the gateway is
    /// stopping: the first `after_chunk` pieces were confirmed, the rest is still owed. No
    /// failure notice is sent; the reply is not lost, only not delivered yet.
    Deferred {
        after_chunk: usize,
        error: SendFailure,
    },
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
    Deferred(SendFailure),
}

/// The result of one send with retries.
enum Attempt {
    Sent(Option<String>),
    Exhausted(SendFailure),
    Rejected(FailureClass, SendFailure),
    /// Rate-limited past the deadline, or told to stop waiting: nothing more was sent.
    Deferred(SendFailure),
}

/// Sends replies through one adapter.
#[derive(Clone)]
pub struct Deliverer {
    adapter: Arc<dyn Adapter>,
    policy: RetryPolicy,
    /// Set for agent replies' platforms: `MEDIA:` tags become native attachments.
    media: Option<crate::gateway::media_tags::MediaPolicy>,
    /// Cancelled when the gateway stops: every retry wait ends at once (the reply is
    /// deferred, still owed) instead of holding shutdown for a flood-wait.
    stop_waiting: CancellationToken,
}

impl std::fmt::Debug for Deliverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliverer")
            .field("platform", &self.adapter.platform())
            .field("policy", &self.policy)
            .finish()
    }
}

/// Where a message goes and how long it may wait out rate limits.
struct Target<'a> {
    chat_id: &'a str,
    thread_id: Option<&'a str>,
    /// A reply: rate limits are waited out until this instant, uncounted. `None` for a
    /// best-effort notice, whose rate-limit retries count against `max_retries`.
    deadline: Option<Instant>,
}

impl Deliverer {
    pub fn new(adapter: Arc<dyn Adapter>, policy: RetryPolicy) -> Self {
        Self {
            adapter,
            policy,
            media: None,
            stop_waiting: CancellationToken::new(),
        }
    }

    /// Retry waits end (deferring what was being sent) once `stop` is cancelled.
    pub fn with_stop_waiting(mut self, stop: CancellationToken) -> Self {
        self.stop_waiting = stop;
        self
    }

    /// Delivers the reply `text` completely or reports where it stopped. `reply_to_mode`
    /// decides which messages quote `reply_to`: none, the first one sent, or all of them.
    /// Rate limits are waited out until `rate_limit_deadline` after this call.
    pub async fn deliver(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
        text: &str,
        reply_to: Option<String>,
        reply_to_mode: ReplyToMode,
    ) -> DeliveryReport {
        let target = Target {
            chat_id,
            thread_id,
            deadline: Some(Instant::now() + self.policy.rate_limit_deadline),
        };
        self.deliver_to(&target, text, reply_to, reply_to_mode)
            .await
    }

    /// Delivers a best-effort notice (an acknowledgement, a progress line): Hermes's rules,
    /// rate limits included in `max_retries`, so a notice never waits long for its chat.
    pub async fn deliver_notice(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
        text: &str,
    ) -> DeliveryReport {
        let target = Target {
            chat_id,
            thread_id,
            deadline: None,
        };
        self.deliver_to(&target, text, None, ReplyToMode::Off).await
    }

    async fn deliver_to(
        &self,
        target: &Target<'_>,
        text: &str,
        reply_to: Option<String>,
        reply_to_mode: ReplyToMode,
    ) -> DeliveryReport {
        let chat_id = target.chat_id;
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
            let failure = match self.send_piece(target, &piece, quote, limit, unit).await {
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
                PieceOutcome::Deferred(error) => {
                    tracing::warn!(platform = self.adapter.platform(), chat_id, after_chunk = confirmed,
                        error = %error, "reply deferred: still rate-limited at its deadline, or the gateway is stopping");
                    let outcome = DeliveryOutcome::Deferred {
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
                        .send_once(target, FAILURE_NOTICE, reply_to.clone(), false)
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
                Attempt::Deferred(failure) => return PieceOutcome::Deferred(failure),
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

    /// One send plus retries: up to `max_retries` for ordinary retryable failures, and for a
    /// reply any number of rate-limit answers, each waited out in full, until the wait would
    /// pass the deadline (then the send is deferred, never abandoned).
    async fn send_with_retry(&self, target: &Target<'_>, what: &OutboundKind) -> Attempt {
        let mut retries = 0;
        let mut rate_limited = 0;
        loop {
            let result = self.send_kind(target, what.clone()).await;
            let Some((kind, message)) = result.error.clone() else {
                wait_claim::sent();
                return Attempt::Sent(result.message_id);
            };
            let failure = SendFailure { kind, message };
            let class = classify(failure.kind, &failure.message);
            if class != FailureClass::Retryable {
                return Attempt::Rejected(class, failure);
            }
            let flow_control = failure.kind == SendErrorKind::RateLimited;
            let delay = match target.deadline {
                Some(deadline) if flow_control => {
                    rate_limited += 1;
                    let delay = self
                        .policy
                        .rate_limit_delay(rate_limited, result.retry_after);
                    if Instant::now() + delay > deadline {
                        return Attempt::Deferred(failure);
                    }
                    delay
                }
                _ => {
                    if retries >= self.policy.max_retries {
                        return Attempt::Exhausted(failure);
                    }
                    retries += 1;
                    self.policy.delay(retries, result.retry_after)
                }
            };
            tracing::warn!(platform = self.adapter.platform(), chat_id = target.chat_id,
                retries, rate_limited, delay_ms = delay.as_millis() as u64, error = %failure,
                "send failed; retrying");
            // A 429 proves nothing went out: the ledger row is not left looking ambiguous
            // while the platform makes us wait (`delivery/wait_claim.rs`).
            let released = flow_control && wait_claim::release().await;
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = self.stop_waiting.cancelled() => return Attempt::Deferred(failure),
            }
            if released && !wait_claim::reclaim().await {
                // Not ours any more (or not claimable): nothing was sent, the row says who
                // owes the reply now.
                return Attempt::Deferred(failure);
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
