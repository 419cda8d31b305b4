//! The contract between hermesd's gateway core and its platform adapters.
//!
//! An adapter translates one platform's protocol: inbound platform events become
//! [`MessageEvent`]s handed to the core through [`AdapterContext`], and the core's outbound
//! operations ([`Outbound`]) become platform API calls whose outcome is a [`SendResult`].
//! Adapters never touch the database, the router's state or another adapter; dedupe,
//! retries, chunking and persistence belong to the core.
#![forbid(unsafe_code)]

mod adapter;
mod dead_letter;
mod event;
mod ingress;
pub mod listener;
pub mod media_cache;
pub mod net;
mod outbound;
mod progress;
mod secret;
#[cfg(feature = "testing")]
pub mod testing;

pub use adapter::{Adapter, AdapterContext, AdapterError, Inbound, RecordOutcome};
pub use dead_letter::{DeadLetter, DeadLetterInbound};
pub use event::{
    BackgroundTag, ChatType, MergeKind, MergeTag, MessageEvent, MessageType, PendingMedia,
    ReplyTarget, SessionSource, WEBHOOK_PLATFORM,
};
pub use ingress::{ClaimError, Guarded, Ingress, IngressClaims, IngressHold};
pub use outbound::{
    Button, Capabilities, LengthUnit, Outbound, OutboundKind, SendErrorKind, SendResult,
};
pub use progress::{Liveness, Progress};
pub use secret::{REDACTED, Secret};
