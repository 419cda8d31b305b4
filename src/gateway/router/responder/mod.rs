//! Answering an event exactly once. A chat reply is recorded as a delivery obligation and
//! the event marked answered in one transaction, then handed to its chat's delivery lane
//! (`outbox.rs`), which sends it through the ledger (claim → send → delivered/failed, or back
//! to pending when flow control deferred it) — as a new message, or as the final edit of the
//! turn's streamed preview when one was recorded with it; a restart resends exactly what may
//! be missing. HTTP API requests are answered in their HTTP response instead.

mod background;
mod chat_order;
pub(super) mod dead_letter;
pub(super) mod outbox;
pub(super) mod platforms;

use std::collections::HashMap;
use std::sync::Arc;

use hermes_adapter::MessageEvent;

use crate::gateway::metrics::GatewayMetrics;
use crate::gateway::router::responder::outbox::{Outbox, Outgoing};
use crate::gateway::router::responder::platforms::PlatformLink;
use crate::gateway::router::slot::{ApiReply, ApiTurnError, Job};
use crate::gateway::routing::RoutingIndex;
use crate::gateway::session_key::{KeyPolicy, event_session_key};
use crate::state::{InboundState, NewObligation, Store};

/// Where `event`'s answer goes: its reply target when it has one (a webhook route's
/// destination), else back to the chat it came from.
fn destination(event: &MessageEvent) -> (String, String, Option<String>) {
    match &event.reply_target {
        Some(target) => (
            target.platform.clone(),
            target.chat_id.clone(),
            target.thread_id.clone(),
        ),
        None => (
            event.source.platform.clone(),
            event.source.chat_id.clone(),
            event.source.thread_id.clone(),
        ),
    }
}

/// Records answers and sends them. It owns the platforms replies go to and the per-chat
/// lanes that send them; it reads the routing index only to move a migrated chat's
/// conversations along.
#[derive(Debug)]
pub(in crate::gateway::router) struct Responder {
    pub(in crate::gateway::router) store: Store,
    pub(in crate::gateway::router) platforms: HashMap<String, PlatformLink>,
    pub(in crate::gateway::router) outbox: Outbox,
    pub(in crate::gateway::router) metrics: Arc<GatewayMetrics>,
    pub(in crate::gateway::router) routing: Arc<RoutingIndex>,
    key_policy: KeyPolicy,
}

impl Responder {
    pub(in crate::gateway::router) fn new(
        store: Store,
        platforms: HashMap<String, PlatformLink>,
        outbox: Outbox,
        metrics: Arc<GatewayMetrics>,
        routing: Arc<RoutingIndex>,
        key_policy: KeyPolicy,
    ) -> Self {
        Self {
            store,
            platforms,
            outbox,
            metrics,
            routing,
            key_policy,
        }
    }

    /// The session key an event's reply obligation is recorded under.
    pub(in crate::gateway::router) fn session_key(&self, event: &MessageEvent) -> String {
        event_session_key(event, self.key_policy)
    }

    /// Answers `job` with `text`.
    pub(in crate::gateway::router) async fn respond(self: &Arc<Self>, job: &Job, text: &str) {
        self.respond_in(job, text, None).await;
    }

    /// Answers `job` with `text`; `session_id` is reported to API clients. A chat reply is
    /// durable when this returns; it is sent by the chat's lane, without the caller waiting.
    pub(in crate::gateway::router) async fn respond_in(
        self: &Arc<Self>,
        job: &Job,
        text: &str,
        session_id: Option<&str>,
    ) {
        if let Some(api) = &job.api {
            Self::answer_api(api, text, session_id.unwrap_or(&job.event.source.chat_id));
            return;
        }
        let event = &job.event;
        // A background task's answer says which task it is. A reply that carries the
        // session id is the finished turn's; any other answer says why the task did not
        // finish (a provider failure, a timeout).
        let text = match &event.background {
            Some(tag) => &background::answer_text(tag, text, session_id.is_some()),
            None => text,
        };
        let key = self.session_key(event);
        let (platform, chat_id, thread_id) = destination(event);
        let obligation = NewObligation {
            session_key: key,
            message_ref: event.event_id.clone(),
            platform: platform.clone(),
            chat_id: chat_id.clone(),
            thread_id,
            content: text.to_owned(),
        };
        let ids = match self
            .store
            .answer_inbound(&event.source.platform, &event.event_id, vec![obligation])
            .await
        {
            Ok(ids) => ids,
            Err(e) => {
                Self::reply_not_recorded(event, &e);
                return;
            }
        };
        let replies = ids
            .into_iter()
            .map(|obligation_id| Outgoing {
                obligation_id,
                // A reply elsewhere quotes nothing: the message it answers is not there.
                reply_to: event
                    .reply_target
                    .is_none()
                    .then(|| event.message_id.clone())
                    .flatten(),
                event_id: Some(event.event_id.clone()),
            })
            .collect();
        self.send_later(&platform, &chat_id, replies);
    }

    /// Answers `job` by editing its streamed preview `preview_id` into `text`, through the
    /// ledger (exactly once across a crash: an edit is idempotent). When the text does not
    /// fit one message, the preview is removed and the reply sent as usual.
    pub(in crate::gateway::router) async fn respond_by_edit(
        self: &Arc<Self>,
        job: &Job,
        text: &str,
        session_id: Option<&str>,
        preview_id: String,
    ) {
        let event = &job.event;
        let fits = self
            .link(&event.source.platform)
            .is_some_and(|link| link.deliverer.fits_one_edit(text));
        if job.api.is_some() || !fits || event.reply_target.is_some() {
            self.delete_preview(&event.source, preview_id).await;
            self.respond_in(job, text, session_id).await;
            return;
        }
        let obligation = NewObligation {
            session_key: self.session_key(event),
            message_ref: event.event_id.clone(),
            platform: event.source.platform.clone(),
            chat_id: event.source.chat_id.clone(),
            thread_id: event.source.thread_id.clone(),
            content: text.to_owned(),
        };
        let recorded = self
            .store
            .answer_inbound_by_edit(
                &event.source.platform,
                &event.event_id,
                obligation,
                &preview_id,
            )
            .await;
        match recorded {
            // Sent by the chat's lane like any reply; the lane finds the edit target.
            Ok(obligation_id) => self.send_later(
                &event.source.platform,
                &event.source.chat_id,
                vec![Outgoing {
                    obligation_id,
                    reply_to: event.message_id.clone(),
                    event_id: Some(event.event_id.clone()),
                }],
            ),
            Err(e) => Self::reply_not_recorded(event, &e),
        }
    }

    /// A reply that could not be recorded is not sent: the event stays unfinished in the
    /// journal and is retried after a restart — or, when another instance took the session
    /// over (PostgreSQL), answered by that instance.
    fn reply_not_recorded(event: &hermes_adapter::MessageEvent, e: &crate::state::StoreError) {
        if e.is_lease_lost() {
            tracing::warn!(platform = %event.source.platform, event_id = %event.event_id, error = %e, "session lease lost mid-turn; another instance answers this event");
        } else {
            tracing::error!(platform = %event.source.platform, event_id = %event.event_id, error = %e, "cannot record a reply");
        }
    }

    /// Removes a streamed preview that will not become the reply (best effort).
    pub(in crate::gateway::router) async fn delete_preview(
        &self,
        source: &hermes_adapter::SessionSource,
        message_id: String,
    ) {
        if let Some(link) = self.link(&source.platform) {
            let outbound = hermes_adapter::Outbound {
                chat_id: source.chat_id.clone(),
                thread_id: source.thread_id.clone(),
                kind: hermes_adapter::OutboundKind::Delete { message_id },
            };
            let _ = crate::gateway::delivery::send_checked(link.adapter.as_ref(), outbound).await;
        }
    }

    /// Closes an event that needs no reply of its own (an interrupted turn whose message the
    /// next turn answers, a clarify answer, a discarded queued message).
    pub(in crate::gateway::router) async fn answer_silently(&self, job: &Job) {
        if let Some(api) = &job.api {
            Self::answer_api_error(api, ApiTurnError::Cancelled);
            return;
        }
        let event = &job.event;
        if let Err(e) = self
            .store
            .mark_inbound(
                &event.source.platform,
                &event.event_id,
                InboundState::Answered,
            )
            .await
        {
            tracing::error!(event_id = %event.event_id, error = %e, "cannot close an inbound event");
        }
    }

    pub(in crate::gateway::router) fn answer_api(
        api: &crate::gateway::router::slot::ApiResponder,
        text: &str,
        session_id: &str,
    ) {
        api.answer(Ok(ApiReply {
            text: text.to_owned(),
            session_id: session_id.to_owned(),
        }));
    }

    pub(in crate::gateway::router) fn answer_api_error(
        api: &crate::gateway::router::slot::ApiResponder,
        error: ApiTurnError,
    ) {
        api.answer(Err(error));
    }
}
