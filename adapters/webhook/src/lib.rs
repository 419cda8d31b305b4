//! hermesd's webhook platform: an HTTP listener (`platforms.webhook`, port 8644 by default)
//! that takes signed events from GitHub, GitLab, Svix senders and generic HMAC senders, and
//! hands each to the core as one journaled event whose answer goes where its route says: the
//! log, a GitHub pull request or issue comment, or a chat on another platform.
//!
//! Protocol only, like every adapter: the core journals the event under the sender's
//! delivery id before the sender hears `202` (a redelivery is a duplicate, a crash resumes
//! it), runs the agent and records the answer in the delivery ledger; this crate's `send`
//! then writes the log line or posts the comment.

mod filters;
pub mod github;
mod render;
pub mod route;
mod server;
pub mod settings;
pub mod signature;
mod subscriptions;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use hermes_adapter::listener::{LIVENESS_WINDOW, watch_listener};
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Capabilities, LengthUnit, Outbound, OutboundKind,
    SendErrorKind, SendResult, WEBHOOK_PLATFORM,
};

pub use settings::{DeliverTarget, Settings, SkillMessage};

/// The longest a log-only answer is written into one log line.
const LOG_TEXT_LIMIT: usize = 4000;

#[derive(Clone)]
pub struct WebhookAdapter {
    settings: Settings,
    client: reqwest::Client,
    bound: Arc<Mutex<Option<SocketAddr>>>,
}

impl std::fmt::Debug for WebhookAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookAdapter")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl WebhookAdapter {
    pub fn new(settings: Settings) -> Self {
        let client = settings
            .net
            .http_client()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        Self {
            settings,
            client,
            bound: Arc::new(Mutex::new(None)),
        }
    }

    /// Where the listener accepts requests, once it runs (port 0 picks a free one).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        *self.bound.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    async fn serve(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
        let listener = tokio::net::TcpListener::bind(self.settings.addr)
            .await
            .map_err(|e| {
                AdapterError::Retryable(format!(
                    "cannot listen on {} for webhooks: {e}; set platforms.webhook.extra.port \
                     (or WEBHOOK_PORT) to a free port",
                    self.settings.addr
                ))
            })?;
        let addr = listener
            .local_addr()
            .map_err(|e| AdapterError::Retryable(e.to_string()))?;
        *self.bound.lock().unwrap_or_else(|p| p.into_inner()) = Some(addr);
        let stop = ctx.shutdown.clone();
        let shared = Arc::new(server::Shared::new(self.settings.clone(), ctx.clone()));
        tracing::info!(
            %addr,
            routes = %shared.routes.names(&self.settings).join(", "),
            "webhook listener ready"
        );
        let app = server::router(shared);
        let serving = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        });
        watch_listener(addr, serving, &ctx, "webhook listener").await
    }

    async fn deliver(&self, outbound: Outbound) -> SendResult {
        let chat = outbound.chat_id.as_str();
        let text = match outbound.kind {
            OutboundKind::Text { text, .. } | OutboundKind::Prompt { text, .. } => text,
            OutboundKind::Media { path, caption } | OutboundKind::Voice { path, caption, .. } => {
                format!(
                    "{}[attachment not delivered: {path}]",
                    caption.map(|c| c + "\n").unwrap_or_default()
                )
            }
            // No typing indicator to show.
            OutboundKind::Typing => return SendResult::sent(None),
            // Not declared (`edits: false`), so never reported done.
            OutboundKind::Edit { .. } | OutboundKind::Delete { .. } => {
                return SendResult::failed(
                    SendErrorKind::Unknown,
                    "webhook answers are not edited or removed",
                );
            }
        };
        if let Some(thread) = github::Thread::from_chat_id(chat) {
            let Some(token) = &self.settings.github_token else {
                return SendResult::failed(
                    SendErrorKind::Forbidden,
                    "no GITHUB_TOKEN or GH_TOKEN to comment with",
                );
            };
            return github::comment(
                &self.client,
                &self.settings.github_api,
                token.expose(),
                &thread,
                &text,
            )
            .await;
        }
        if chat.starts_with("webhook:") {
            let shown: String = text.chars().take(LOG_TEXT_LIMIT).collect();
            tracing::info!(chat, answer = %shown, "webhook answer (route delivers to the log)");
            return SendResult::sent(None);
        }
        SendResult::failed(SendErrorKind::NotFound, "not a webhook destination")
    }
}

impl Adapter for WebhookAdapter {
    fn platform(&self) -> &'static str {
        WEBHOOK_PLATFORM
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            message_limit: github::COMMENT_LIMIT,
            length_unit: LengthUnit::Chars,
            edits: false,
            typing: false,
            buttons: false,
            threads: false,
            command_prefix: '/',
            voice_caption_limit: None,
        }
    }

    fn liveness_window(&self) -> Duration {
        LIVENESS_WINDOW
    }

    fn run(&self, ctx: AdapterContext) -> BoxFuture<'_, Result<(), AdapterError>> {
        Box::pin(self.serve(ctx))
    }

    fn send(&self, outbound: Outbound) -> BoxFuture<'_, SendResult> {
        Box::pin(self.deliver(outbound))
    }
}
