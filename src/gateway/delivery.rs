//! Delivering one reply to a platform: split it into chunks in the platform's length unit,
//! send them in order with Hermes's retry rules, wait out rate limits for as long as the
//! platform asks (until the reply's deadline, never capped by an attempt count), fall back to
//! plain text after a formatting rejection, split further when the platform still says "too
//! long", and never re-send a send that may already have happened. The outcome says exactly
//! how far delivery got.

mod edit;
mod fenced;
mod ledger;
mod media;
mod retry;
mod sender;
mod wait_claim;

use std::sync::Arc;

use hermes_adapter::{Adapter, SendErrorKind};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::ReplyToMode;
use crate::gateway::media_tags::MediaPolicy;

pub use fenced::send_checked;
pub use ledger::{DeliveryError, ObligationDelivery};
use retry::FailureClass;
pub use retry::{
    DEFAULT_RATE_LIMIT_DEADLINE, FAILURE_NOTICE, FORMAT_FALLBACK_MAX_CHARS, FORMAT_FALLBACK_PREFIX,
    Jitter, MAX_RATE_LIMIT_BACKOFF, RetryPolicy,
};

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
    /// The lease the reply is owned under could end before the next call would (this
    /// process stalled, or its renewals are not landing): nothing more was sent after the
    /// first `after_chunk` pieces. Flow control, not a failure: the reply stays owed and is
    /// sent once a renewal lands, or by a survivor if the lease is lost
    /// (`delivery/fenced.rs`).
    Fenced {
        after_chunk: usize,
        error: crate::coord::Fenced,
    },
}

impl DeliveryOutcome {
    /// A send this instance cut off at its lease's deadline (`delivery/fenced.rs`): it may
    /// have landed, so it goes again only with the recovered marker, once this instance
    /// may act again (or by the survivor that took the reply over).
    pub fn is_cut_off_by_fence(&self) -> bool {
        matches!(self, Self::Ambiguous { error, .. } if error == fenced::CUT_OFF)
    }
}

/// What [`Deliverer::deliver`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryReport {
    /// The platform ids of every message confirmed sent, in order (the failure notice and
    /// fallbacks included).
    pub sent_message_ids: Vec<String>,
    pub outcome: DeliveryOutcome,
}

/// The result of one send with retries.
enum Attempt {
    Sent(Option<String>),
    Exhausted(SendFailure),
    Rejected(FailureClass, SendFailure),
    /// Rate-limited past the deadline, or told to stop waiting: nothing more was sent.
    Deferred(SendFailure),
    /// The lease could end before the call would: it was not made.
    Fenced(crate::coord::Fenced),
}

/// Sends replies through one adapter: a façade over its parts — the [`sender::Sender`]
/// (chunks, retries, fallbacks), the attachment step (`media.rs`), the ledger path for
/// obligations (`ledger.rs`) and delivery by editing a preview (`edit.rs`).
#[derive(Clone)]
pub struct Deliverer {
    sender: sender::Sender,
    /// Set for agent replies' platforms: `MEDIA:` tags become native attachments.
    media: Option<MediaPolicy>,
}

impl std::fmt::Debug for Deliverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliverer")
            .field("platform", &self.sender.adapter.platform())
            .field("policy", &self.sender.policy)
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
            sender: sender::Sender {
                adapter,
                policy,
                stop_waiting: CancellationToken::new(),
            },
            media: None,
        }
    }

    /// Retry waits end (deferring what was being sent) once `stop` is cancelled.
    pub fn with_stop_waiting(mut self, stop: CancellationToken) -> Self {
        self.sender.stop_waiting = stop;
        self
    }

    /// Turns `MEDIA:` tags in the replies this deliverer sends into attachments.
    pub fn with_media_policy(mut self, policy: MediaPolicy) -> Self {
        self.media = Some(policy);
        self
    }

    /// Delivers an agent's reply: its text, then its attachments (when a media policy is set).
    pub async fn deliver_reply(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
        text: &str,
        reply_to: Option<String>,
        reply_to_mode: ReplyToMode,
    ) -> DeliveryReport {
        media::deliver_with_attachments(
            &self.sender,
            self.media.as_ref(),
            (chat_id, thread_id),
            text,
            reply_to,
            reply_to_mode,
        )
        .await
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
        let target = self.sender.reply_target(chat_id, thread_id);
        self.sender
            .deliver_to(&target, text, reply_to, reply_to_mode)
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
        self.sender
            .deliver_to(&target, text, None, ReplyToMode::Off)
            .await
    }
}
