//! Picking up after a crash or restart: replies recorded but not confirmed delivered are
//! sent again (ambiguous ones with Hermes's recovered marker), and turns whose events were
//! journaled but never answered run again — a started turn continues from its stored
//! history instead of repeating the user's message.

use hermes_adapter::MessageEvent;

use super::Router;
use super::outbox::Outgoing;
use super::slot::Job;
use crate::state::{InboundState, now_epoch};

/// What recovery found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    pub replies_resent: usize,
    pub turns_resumed: usize,
    pub turns_restarted: usize,
}

impl Router {
    /// Queues the unfinished turns; call before adapters deliver new events so each
    /// session's recovered work runs first.
    pub async fn recover_turns(&self) -> Recovered {
        let mut report = Recovered::default();
        let unfinished = match self.store.unfinished_inbound().await {
            Ok(events) => events,
            Err(e) => {
                tracing::error!(error = %e, "cannot read unfinished turns");
                return report;
            }
        };
        for journaled in unfinished {
            if self.link(&journaled.platform).is_none() {
                continue;
            }
            let event: MessageEvent = match serde_json::from_value(journaled.payload.clone()) {
                Ok(event) => event,
                Err(e) => {
                    tracing::warn!(event_id = %journaled.event_id, error = %e, "unreadable journaled event; closing it");
                    let _ = self
                        .store
                        .mark_inbound(
                            &journaled.platform,
                            &journaled.event_id,
                            InboundState::Ignored,
                        )
                        .await;
                    continue;
                }
            };
            let resumed = journaled.state == InboundState::Processing;
            if resumed {
                report.turns_resumed += 1;
            } else {
                report.turns_restarted += 1;
            }
            self.dispatch(
                journaled.session_key.clone(),
                Job {
                    event,
                    resumed,
                    api: None,
                },
            );
        }
        report
    }

    /// Queues every reply still owed on its chat's lane (after adapters can send).
    pub async fn resend_replies(&self) -> usize {
        let now = now_epoch();
        if let Err(e) = self.store.abandon_stale(now).await {
            tracing::warn!(error = %e, "cannot abandon stale replies");
        }
        let owed = match self.store.undelivered(now).await {
            Ok(owed) => owed,
            Err(e) => {
                tracing::error!(error = %e, "cannot read undelivered replies");
                return 0;
            }
        };
        let mut sent = 0;
        for obligation in owed {
            if self.link(&obligation.platform).is_none() {
                continue;
            }
            // Each chat's lane sends them oldest first; chats do not wait for each other.
            let reply = Outgoing {
                obligation_id: obligation.obligation_id,
                reply_to: None,
                event_id: None,
            };
            self.send_later(&obligation.platform, &obligation.chat_id, vec![reply]);
            sent += 1;
        }
        sent
    }
}
