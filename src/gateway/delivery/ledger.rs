//! The ledger-backed delivery path: a reply recorded as a `delivery_obligations` row is
//! claimed (`attempting`) immediately before its first send, marked `delivered` only after
//! the platform confirmed the last chunk, back to `pending` when flow control deferred it
//! (or, for the wait, holds it: `wait_claim.rs`) before anything went out, and `failed` with
//! the reason otherwise, so a restart resends exactly the replies that may be missing
//! (ambiguous ones with the marker). Every platform call is made only while this instance's
//! lease, which owns the row, can be trusted past it (`fenced.rs`); a reply held back by that
//! check is handed back `pending` (nothing out) or left `attempting` (part out), never failed.

use crate::config::ReplyToMode;
use crate::state::{Obligation, Store, StoreError};

use super::wait_claim::WaitClaim;
use super::{Deliverer, DeliveryOutcome, DeliveryReport, fenced};

/// The ledger could not record a delivery step. The row keeps its last recorded state; a
/// row left `attempting` is resent with the recovered marker after a restart.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("delivery ledger write for obligation {obligation_id} failed: {source}")]
    Ledger {
        obligation_id: String,
        #[source]
        source: StoreError,
    },
}

/// What happened to an obligation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObligationDelivery {
    /// The row was missing, already delivered or abandoned: nothing was sent.
    NotClaimed,
    /// The reply was sent (or tried); the row now says how it went.
    Attempted(DeliveryReport),
}

impl Deliverer {
    /// Delivers `obligation.text_to_send()` (the recovered marker first when the row is
    /// ambiguous) and records the outcome in the ledger. Recovered rows carry no reply
    /// reference, so nothing is quoted.
    pub async fn deliver_obligation(
        &self,
        store: &Store,
        obligation: &Obligation,
    ) -> Result<ObligationDelivery, DeliveryError> {
        self.deliver_obligation_quoting(store, obligation, None, ReplyToMode::Off)
            .await
    }

    /// As [`Deliverer::deliver_obligation`], quoting the user's message `reply_to` per
    /// `reply_to_mode` on a first delivery (a recovered resend quotes nothing).
    pub async fn deliver_obligation_quoting(
        &self,
        store: &Store,
        obligation: &Obligation,
        reply_to: Option<String>,
        reply_to_mode: ReplyToMode,
    ) -> Result<ObligationDelivery, DeliveryError> {
        let id = obligation.obligation_id.as_str();
        let ledger = |source| DeliveryError::Ledger {
            obligation_id: id.to_owned(),
            source,
        };
        let trust = store.send_trust();
        if let Some(held_back) = held_back_before_claim(&trust) {
            return Ok(held_back);
        }
        // Marked before the claim is asked for: a lapse while it is on its way counts.
        let claim = trust.claimed_now();
        if !store.mark_attempting(id).await.map_err(ledger)? {
            return Ok(ObligationDelivery::NotClaimed);
        }
        let text = obligation.text_to_send();
        let (reply_to, reply_to_mode) = if text == obligation.content {
            (reply_to, reply_to_mode)
        } else {
            (None, ReplyToMode::Off)
        };
        let delivery = self.deliver_reply(
            &obligation.chat_id,
            obligation.thread_id.as_deref(),
            &text,
            reply_to,
            reply_to_mode,
        );
        let delivery = WaitClaim::new(store.clone(), id).scope(delivery);
        let report = fenced::scope(trust, claim, delivery).await;
        record_outcome(store, id, report).await
    }
}

/// A reply is not even claimed while the lease that would own it cannot be trusted: the
/// report says so, and the row is untouched.
pub(super) fn held_back_before_claim(trust: &crate::coord::Trust) -> Option<ObligationDelivery> {
    let error = trust.may_act(std::time::Duration::ZERO).err()?;
    Some(ObligationDelivery::Attempted(DeliveryReport {
        sent_message_ids: Vec::new(),
        outcome: DeliveryOutcome::Fenced {
            after_chunk: 0,
            error,
        },
    }))
}

/// Writes how a claimed obligation's delivery went: `delivered`, or `failed` with the reason.
pub(super) async fn record_outcome(
    store: &Store,
    id: &str,
    report: DeliveryReport,
) -> Result<ObligationDelivery, DeliveryError> {
    let ledger = |source| DeliveryError::Ledger {
        obligation_id: id.to_owned(),
        source,
    };
    match &report.outcome {
        DeliveryOutcome::Delivered => {
            store.mark_delivered(id).await.map_err(ledger)?;
        }
        DeliveryOutcome::Ambiguous { after_chunk, error } => {
            // `failed` marks the row ambiguous for recovery: it is resent with the
            // marker, never silently, if this process dies before reconciling it.
            let error = format!("ambiguous send after {after_chunk} chunk(s): {error}");
            store.mark_failed(id, &error).await.map_err(ledger)?;
        }
        DeliveryOutcome::Deferred {
            after_chunk: 0,
            error,
        } => {
            // Nothing reached the user: the reply is owed as before, and a restart sends
            // it as new (no recovered marker).
            store
                .mark_deferred(id, &format!("deferred: {error}"))
                .await
                .map_err(ledger)?;
        }
        DeliveryOutcome::Deferred { after_chunk, error } => {
            // Part of it is out: resend the whole with the marker rather than a fragment.
            let error = format!("deferred after {after_chunk} chunk(s): {error}");
            store.mark_failed(id, &error).await.map_err(ledger)?;
        }
        DeliveryOutcome::Fenced {
            after_chunk: 0,
            error,
        } => {
            // Nothing went out: hand the row back, only if it is still this instance's send
            // (a survivor that took it over is sending it; then nothing is written).
            store
                .mark_deferred(id, &format!("held back: {error}"))
                .await
                .map_err(ledger)?;
        }
        // Part of it is out: the row stays `attempting` and this instance's (a write here
        // could overwrite a survivor's claim), to be resent whole with the marker by whoever
        // owns it next: this instance once a renewal lands, or a survivor.
        DeliveryOutcome::Fenced { .. } => {}
        DeliveryOutcome::Failed { error } => {
            store
                .mark_failed(id, &error.to_string())
                .await
                .map_err(ledger)?;
        }
    }
    Ok(ObligationDelivery::Attempted(report))
}
