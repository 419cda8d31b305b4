//! Who is let in, decided from one settings snapshot: admission of an inbound sender (with
//! the pairing reply a refused one gets, worked out in the same pass) and how far a sender
//! is trusted. The pairing files are read (and a pairing request written) on tokio's
//! blocking pool, never on a runtime thread.

use std::sync::Arc;

use hermes_adapter::{MessageEvent, SessionSource};

use super::handles::LiveCell;
use super::responder::Responder;
use crate::gateway::authorize::{Admission, Authority, admit, authority};
use crate::gateway::pairing::{PairingError, PairingStore};

/// The admission check (see the module docs).
#[derive(Debug)]
pub(super) struct Gatekeeper {
    pub live: Arc<LiveCell>,
    pub pairing: PairingStore,
}

impl Gatekeeper {
    /// Whether the sender of `source` is admitted, and what a refused one is told.
    pub(super) async fn admit(self: &Arc<Self>, source: &SessionSource) -> Admission {
        let now = crate::state::now_epoch();
        let gate = self.clone();
        let asker = source.clone();
        tokio::task::spawn_blocking(move || {
            admit(&asker, &gate.live.get().auth, &gate.pairing, now)
        })
        .await
        .unwrap_or(Admission::Refused(Ok(None)))
    }

    /// How far the sender of `source` is trusted; `None` when they may not use the bot.
    pub(super) async fn authority_of(
        self: &Arc<Self>,
        source: &SessionSource,
    ) -> Option<Authority> {
        let gate = self.clone();
        let asker = source.clone();
        tokio::task::spawn_blocking(move || authority(&asker, &gate.live.get().auth, &gate.pairing))
            .await
            .unwrap_or(None)
    }
}

/// An unauthorized sender: a pairing code for a DM where the platform pairs, else nothing.
pub(super) async fn deny(
    responder: &Responder,
    event: &MessageEvent,
    reply: Result<Option<String>, PairingError>,
) {
    let reply = match reply {
        Ok(reply) => reply,
        Err(e) => {
            tracing::warn!(error = %e, "pairing store unavailable");
            None
        }
    };
    tracing::info!(
        platform = %event.source.platform,
        user_id = event.source.user_id.as_deref().unwrap_or(""),
        paired = reply.is_some(),
        "unauthorized message ignored"
    );
    if let Some(text) = reply {
        responder.send_direct(&event.source, &text).await;
    }
}
