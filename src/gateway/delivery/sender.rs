//! The sending half of a deliverer: one adapter, its retry policy and the gateway's stop
//! signal. It splits text into chunks in the platform's unit, sends them in order with the
//! retry rules, falls back to plain text after a formatting rejection, splits further when
//! the platform still says "too long", and reports exactly how far it got.

use std::collections::VecDeque;
use std::sync::Arc;

use hermes_adapter::{Adapter, LengthUnit, Outbound, OutboundKind, SendErrorKind, SendResult};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::retry::{FAILURE_NOTICE, FailureClass, RetryPolicy, classify, format_fallback};
use super::{Attempt, DeliveryOutcome, DeliveryReport, SendFailure, Target, fenced, wait_claim};
use crate::config::ReplyToMode;
use crate::coord::Fenced;
use crate::gateway::chunk::chunk_message;

/// Pieces that still draw "too long" at this size (in the platform's unit) are given up on:
/// a platform refusing 64 units is misreporting its limit, not measuring differently.
const MIN_RECHUNK_LIMIT: usize = 64;

/// The result of sending one piece, retries and fallbacks included.
enum PieceOutcome {
    Sent(Option<String>),
    TooLong(SendFailure),
    Ambiguous(String),
    /// Retries ran out on a retryable failure: the failure notice is due.
    Exhausted(SendFailure),
    Failed(SendFailure),
    Deferred(SendFailure),
    Fenced(Fenced),
}

/// Sends through one adapter with one retry policy.
#[derive(Clone)]
pub(super) struct Sender {
    pub adapter: Arc<dyn Adapter>,
    pub policy: RetryPolicy,
    /// Cancelled when the gateway stops: every retry wait ends at once (the reply is
    /// deferred, still owed) instead of holding shutdown for a flood-wait.
    pub stop_waiting: CancellationToken,
}

impl Sender {
    /// Where a reply goes: rate limits are waited out until the policy's deadline from now.
    pub fn reply_target<'a>(&self, chat_id: &'a str, thread_id: Option<&'a str>) -> Target<'a> {
        Target {
            chat_id,
            thread_id,
            deadline: Some(Instant::now() + self.policy.rate_limit_deadline),
        }
    }

    pub(super) async fn deliver_to(
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
                PieceOutcome::Fenced(error) => {
                    tracing::debug!(platform = self.adapter.platform(), chat_id, after_chunk = confirmed,
                        %error, "reply held back: the lease it is owned under may end first");
                    let outcome = DeliveryOutcome::Fenced {
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
                    if let Ok(notice) = self
                        .send_once(target, FAILURE_NOTICE, reply_to.clone(), false)
                        .await
                    {
                        sent_message_ids.extend(notice.message_id);
                    }
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
                Attempt::Fenced(error) => return PieceOutcome::Fenced(error),
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
    pub(super) async fn send_with_retry(
        &self,
        target: &Target<'_>,
        what: &OutboundKind,
    ) -> Attempt {
        let mut retries = 0;
        let mut rate_limited = 0;
        loop {
            let result = match self.send_kind(target, what.clone()).await {
                Ok(result) => result,
                Err(fenced) => return Attempt::Fenced(fenced),
            };
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
    ) -> Result<SendResult, Fenced> {
        let kind = OutboundKind::Text {
            text: text.to_owned(),
            reply_to,
            plain,
        };
        self.send_kind(target, kind).await
    }

    /// One platform call, made only while the lease it runs under can be trusted past it,
    /// and cut off at that lease's deadline (`fenced.rs`): then it may or may not have
    /// reached the platform.
    pub(super) async fn send_kind(
        &self,
        target: &Target<'_>,
        kind: OutboundKind,
    ) -> Result<SendResult, Fenced> {
        let bound = fenced::check()?;
        let outbound = Outbound {
            chat_id: target.chat_id.to_owned(),
            thread_id: target.thread_id.map(str::to_owned),
            kind,
        };
        let send = self.adapter.send(outbound);
        let Some(bound) = bound else {
            return Ok(send.await);
        };
        Ok(fenced::bounded(&bound, send).await)
    }
}
