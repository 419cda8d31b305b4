//! The router's view of each connected platform: its adapter and how replies go out.

use std::sync::Arc;

use hermes_adapter::{Adapter, Button, Outbound, OutboundKind, SessionSource};

use crate::config::ReplyToMode;
use crate::gateway::delivery::{Deliverer, RetryPolicy};
use crate::gateway::router::responder::Responder;

/// One platform as the router uses it.
#[derive(Clone)]
pub struct PlatformLink {
    pub name: String,
    pub adapter: Arc<dyn Adapter>,
    pub deliverer: Deliverer,
    pub reply_to_mode: ReplyToMode,
    pub typing: bool,
}

impl std::fmt::Debug for PlatformLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlatformLink")
            .field("name", &self.name)
            .field("reply_to_mode", &self.reply_to_mode)
            .finish_non_exhaustive()
    }
}

impl PlatformLink {
    /// Replies on this platform deliver their `MEDIA:` tags as attachments under `policy`.
    pub fn with_media_policy(mut self, policy: crate::gateway::media_tags::MediaPolicy) -> Self {
        self.deliverer = self.deliverer.with_media_policy(policy);
        self
    }

    pub fn new(
        adapter: Arc<dyn Adapter>,
        policy: RetryPolicy,
        reply_to_mode: ReplyToMode,
        typing: bool,
    ) -> Self {
        Self {
            name: adapter.platform().to_owned(),
            deliverer: Deliverer::new(adapter.clone(), policy),
            adapter,
            reply_to_mode,
            typing,
        }
    }
}

impl Responder {
    pub(in crate::gateway::router) fn link(&self, platform: &str) -> Option<&PlatformLink> {
        self.platforms.get(platform)
    }

    /// The chat platforms this gateway runs, sorted (where scheduled jobs can deliver).
    pub(in crate::gateway::router) fn platform_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.platforms.keys().cloned().collect();
        names.sort();
        names
    }

    /// Sends a notice outside the ledger (acks, progress lines, pairing codes): best effort,
    /// never journaled, never retried beyond the delivery policy.
    pub(in crate::gateway::router) async fn send_direct(&self, source: &SessionSource, text: &str) {
        let Some(link) = self.link(&source.platform) else {
            return;
        };
        let report = link
            .deliverer
            .deliver_notice(&source.chat_id, source.thread_id.as_deref(), text)
            .await;
        if !matches!(
            report.outcome,
            crate::gateway::delivery::DeliveryOutcome::Delivered
        ) {
            tracing::warn!(platform = %source.platform, outcome = ?report.outcome, "notice not delivered");
        }
    }

    /// Sends a prompt with buttons (approval, clarify); platforms without buttons get text.
    pub(in crate::gateway::router) async fn send_prompt(
        &self,
        source: &SessionSource,
        text: &str,
        buttons: Vec<Button>,
    ) {
        let Some(link) = self.link(&source.platform) else {
            return;
        };
        if !link.adapter.capabilities().buttons || buttons.is_empty() {
            self.send_direct(source, text).await;
            return;
        }
        let outbound = Outbound {
            chat_id: source.chat_id.clone(),
            thread_id: source.thread_id.clone(),
            kind: OutboundKind::Prompt {
                text: text.to_owned(),
                buttons,
            },
        };
        let Some(result) =
            crate::gateway::delivery::send_checked(link.adapter.as_ref(), outbound).await
        else {
            return;
        };
        if !result.is_ok() {
            tracing::warn!(platform = %source.platform, error = ?result.error, "prompt with buttons failed; sending text");
            self.send_direct(source, text).await;
        }
    }
}
