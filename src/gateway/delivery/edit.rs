//! Delivering a reply by editing a message already in the chat: a streamed preview becomes
//! the final answer in place. The obligation is claimed and recorded exactly like a sent
//! reply, but an edit is idempotent, so a send whose outcome is unknown is simply edited
//! again, and a row recovered after a crash is edited again with its own text (never sent
//! anew with the recovered marker): the chat ends with one message holding the answer.
//! Only when the edit is refused for good does the reply go as a new message (and the
//! preview is removed).

use hermes_adapter::OutboundKind;

use super::ledger::{held_back_before_claim, record_outcome};
use super::retry::FailureClass;
use super::{
    Attempt, Deliverer, DeliveryError, DeliveryOutcome, DeliveryReport, ObligationDelivery, Target,
};
use crate::config::ReplyToMode;
use crate::gateway::media_tags;
use crate::state::{Obligation, Store};

/// Edits whose outcome stayed unknown are repeated this many times before the row is left
/// for recovery (which edits again).
const AMBIGUOUS_EDIT_RETRIES: u32 = 2;

impl Deliverer {
    /// Whether `text` can replace one message in place: the platform edits, the text fits
    /// one message, and it carries no attachments to upload.
    pub fn fits_one_edit(&self, text: &str) -> bool {
        let capabilities = self.sender.adapter.capabilities();
        let attachments = self.media.is_some() && !media_tags::extract(text).paths.is_empty();
        capabilities.edits
            && !text.trim().is_empty()
            && capabilities.length_unit.measure(text) <= capabilities.message_limit
            && !attachments
    }

    /// Delivers `obligation` by editing `message_id` into its text, recording the outcome in
    /// the ledger; falls back to a new message (quoting `reply_to` per `reply_to_mode`) when
    /// the platform refuses the edit.
    pub async fn deliver_obligation_by_edit(
        &self,
        store: &Store,
        obligation: &Obligation,
        message_id: &str,
        reply_to: Option<String>,
        reply_to_mode: ReplyToMode,
    ) -> Result<ObligationDelivery, DeliveryError> {
        let trust = store.send_trust();
        if let Some(held_back) = held_back_before_claim(&trust) {
            return Ok(held_back);
        }
        // Marked before the claim is asked for (`edit_claimed` claims first thing).
        let claim = trust.claimed_now();
        super::fenced::scope(
            trust,
            claim,
            self.edit_claimed(store, obligation, message_id, reply_to, reply_to_mode),
        )
        .await
    }

    /// [`Deliverer::deliver_obligation_by_edit`] from the claim on, its platform calls
    /// checked against the instance lease.
    async fn edit_claimed(
        &self,
        store: &Store,
        obligation: &Obligation,
        message_id: &str,
        reply_to: Option<String>,
        reply_to_mode: ReplyToMode,
    ) -> Result<ObligationDelivery, DeliveryError> {
        let id = obligation.obligation_id.as_str();
        if !store
            .mark_attempting(id)
            .await
            .map_err(|source| DeliveryError::Ledger {
                obligation_id: id.to_owned(),
                source,
            })?
        {
            return Ok(ObligationDelivery::NotClaimed);
        }
        let target = Target {
            chat_id: &obligation.chat_id,
            thread_id: obligation.thread_id.as_deref(),
            deadline: Some(tokio::time::Instant::now() + self.sender.policy.rate_limit_deadline),
        };
        let edit = OutboundKind::Edit {
            message_id: message_id.to_owned(),
            text: obligation.content.clone(),
        };
        let mut unknown = 0;
        let failure = loop {
            match self.sender.send_with_retry(&target, &edit).await {
                Attempt::Sent(_) => {
                    let report = DeliveryReport {
                        sent_message_ids: vec![message_id.to_owned()],
                        outcome: DeliveryOutcome::Delivered,
                    };
                    return record_outcome(store, id, report).await;
                }
                Attempt::Rejected(FailureClass::Ambiguous, failure)
                    if unknown < AMBIGUOUS_EDIT_RETRIES =>
                {
                    unknown += 1;
                    tracing::warn!(platform = self.sender.adapter.platform(), obligation_id = id,
                        error = %failure, "final edit's outcome unknown; editing again");
                }
                Attempt::Rejected(FailureClass::Ambiguous, failure) => {
                    // Left `failed`: recovery edits again, which is harmless if it landed.
                    let report = DeliveryReport {
                        sent_message_ids: Vec::new(),
                        outcome: DeliveryOutcome::Ambiguous {
                            after_chunk: 0,
                            error: failure.message,
                        },
                    };
                    return record_outcome(store, id, report).await;
                }
                Attempt::Deferred(failure) => {
                    // Still rate-limited at the deadline (or stopping): the reply stays owed,
                    // and the recovered row edits the preview again.
                    let report = DeliveryReport {
                        sent_message_ids: Vec::new(),
                        outcome: DeliveryOutcome::Deferred {
                            after_chunk: 0,
                            error: failure,
                        },
                    };
                    return record_outcome(store, id, report).await;
                }
                Attempt::Fenced(error) => {
                    let report = DeliveryReport {
                        sent_message_ids: Vec::new(),
                        outcome: DeliveryOutcome::Fenced {
                            after_chunk: 0,
                            error,
                        },
                    };
                    return record_outcome(store, id, report).await;
                }
                Attempt::Rejected(_, failure) | Attempt::Exhausted(failure) => break failure,
            }
        };
        tracing::warn!(platform = self.sender.adapter.platform(), obligation_id = id, error = %failure,
            "the preview could not be edited into the reply; sending it as a new message");
        let delete = OutboundKind::Delete {
            message_id: message_id.to_owned(),
        };
        let _ = self.sender.send_kind(&target, delete).await;
        let report = self
            .deliver_reply(
                target.chat_id,
                target.thread_id,
                &obligation.text_to_send(),
                reply_to,
                reply_to_mode,
            )
            .await;
        record_outcome(store, id, report).await
    }
}
