//! hermesd's WhatsApp Cloud API platform (`platforms.whatsapp_cloud`, Hermes's
//! `WHATSAPP_CLOUD_*` keys): Meta pushes signed webhook deliveries to our listener and we
//! answer through the Graph API of one business phone number.
//!
//! Protocol only, like every adapter: each message is journaled under its `wamid` before Meta
//! hears `200` (a redelivery is a duplicate; a crash before the answer leaves it with Meta to
//! send again), attachments are fetched just before the turn, and Meta's rate-limit codes come
//! back as typed waits the core sits out. A send outside the 24-hour customer-service window
//! fails with an error that says so, logged at warning level.

mod format;
pub mod graph;
pub mod inbound;
mod outbound;
pub mod settings;
pub mod signature;
mod webhook;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use hermes_adapter::listener::{LIVENESS_WINDOW, watch_listener};
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Capabilities, LengthUnit, MessageEvent, Outbound,
    OutboundKind, SendErrorKind, SendResult,
};

pub use format::to_whatsapp;
pub use inbound::PLATFORM;
pub use settings::Settings;

/// The largest attachment fetched (Meta's document limit).
const MAX_ATTACHMENT_BYTES: usize = 100 * 1024 * 1024;

#[derive(Clone)]
pub struct WhatsAppAdapter {
    graph: graph::Graph,
    last_inbound: Arc<Mutex<HashMap<String, String>>>,
    bound: Arc<Mutex<Option<SocketAddr>>>,
}

impl std::fmt::Debug for WhatsAppAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WhatsAppAdapter")
            .field("settings", self.graph.settings())
            .finish_non_exhaustive()
    }
}

impl WhatsAppAdapter {
    pub fn new(settings: Settings) -> Self {
        for warning in &settings.warnings {
            tracing::warn!(platform = PLATFORM, "{warning}");
        }
        Self {
            graph: graph::Graph::new(settings),
            last_inbound: Arc::default(),
            bound: Arc::default(),
        }
    }

    pub fn settings(&self) -> &Settings {
        self.graph.settings()
    }

    /// Where the webhook listener accepts requests, once it runs (port 0 picks a free one).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        *self.bound.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes `wamid` as the newest message of `chat` (the webhook does this for each
    /// recorded message; typing and read receipts attach to it).
    pub fn note_inbound(&self, chat: &str, wamid: &str) {
        self.last_inbound
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(chat.to_owned(), wamid.to_owned());
    }

    async fn serve(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
        let settings = self.settings().clone();
        let listener = tokio::net::TcpListener::bind(settings.addr).await.map_err(|e| {
            AdapterError::Retryable(format!(
                "cannot listen on {} for WhatsApp webhooks: {e}; set WHATSAPP_CLOUD_WEBHOOK_PORT \
                 to a free port",
                settings.addr
            ))
        })?;
        let addr = listener
            .local_addr()
            .map_err(|e| AdapterError::Retryable(e.to_string()))?;
        *self.bound.lock().unwrap_or_else(|p| p.into_inner()) = Some(addr);
        tracing::info!(platform = PLATFORM, %addr, path = %settings.webhook_path, "WhatsApp webhook listener ready");
        let stop = ctx.shutdown.clone();
        let shared = Arc::new(webhook::Shared {
            settings,
            ctx: ctx.clone(),
            last_inbound: self.last_inbound.clone(),
        });
        let app = webhook::router(shared);
        let serving = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        });
        watch_listener(addr, serving, &ctx, "WhatsApp listener").await
    }

    async fn deliver(&self, outbound: Outbound) -> SendResult {
        let to = outbound.chat_id.as_str();
        match outbound.kind {
            OutboundKind::Text {
                text,
                reply_to,
                plain,
            } => outbound::text(&self.graph, to, &text, reply_to.as_deref(), plain).await,
            OutboundKind::Prompt { text, buttons } => {
                outbound::prompt(&self.graph, to, &text, &buttons).await
            }
            // A voice note goes as an audio message (Ogg/Opus is a WhatsApp audio type).
            OutboundKind::Media { path, caption } | OutboundKind::Voice { path, caption, .. } => {
                outbound::media(&self.graph, to, &path, caption.as_deref()).await
            }
            OutboundKind::Typing => {
                let wamid = self
                    .last_inbound
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(to)
                    .cloned();
                match wamid {
                    Some(wamid) => outbound::typing(&self.graph, to, &wamid).await,
                    // Nothing to attach the indicator to yet (a restart): nothing to show.
                    None => SendResult::sent(None),
                }
            }
            OutboundKind::Edit { .. } | OutboundKind::Delete { .. } => SendResult::failed(
                SendErrorKind::Unknown,
                "WhatsApp does not let a business edit or delete a sent message",
            ),
        }
    }

    async fn fetch_media(&self, event: &mut MessageEvent) {
        let dir = self.settings().cache_dir.clone();
        let mut notes = Vec::new();
        for pending in std::mem::take(&mut event.pending_media) {
            let id = pending
                .reference
                .get("id")
                .and_then(|v| v.as_str())
                .unwrap_or("");
            let fetched = self.graph.download(id, MAX_ATTACHMENT_BYTES).await;
            let (bytes, mime) = match fetched {
                Ok(got) => got,
                Err(why) => {
                    tracing::warn!(platform = PLATFORM, media = id, error = %why, "attachment not fetched");
                    notes.push(format!(
                        "[attachment {} could not be fetched: {why}]",
                        pending.label
                    ));
                    continue;
                }
            };
            let ext = mime_extension(&mime);
            let name = hermes_adapter::media_cache::safe_file_name(&format!("{id}.{ext}"));
            let path = dir.join(name);
            match hermes_adapter::media_cache::write_private(&dir, &path, &bytes).await {
                Ok(()) => {
                    event.media_paths.push(path.to_string_lossy().into_owned());
                    event.media_types.push(mime);
                }
                Err(e) => notes.push(format!(
                    "[attachment {} could not be stored: {e}]",
                    pending.label
                )),
            }
        }
        for note in notes {
            if !event.text.is_empty() {
                event.text.push('\n');
            }
            event.text.push_str(&note);
        }
    }
}

fn mime_extension(mime: &str) -> &'static str {
    match mime.split(';').next().unwrap_or("").trim() {
        "image/jpeg" => "jpg",
        "image/png" => "png",
        "image/webp" => "webp",
        "video/mp4" => "mp4",
        "audio/ogg" | "audio/opus" => "ogg",
        "audio/mpeg" => "mp3",
        "audio/mp4" => "m4a",
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        _ => "bin",
    }
}

impl Adapter for WhatsAppAdapter {
    fn platform(&self) -> &'static str {
        PLATFORM
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            message_limit: outbound::TEXT_LIMIT,
            length_unit: LengthUnit::Chars,
            edits: false,
            typing: true,
            buttons: true,
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

    fn fetch_pending_media<'a>(&'a self, event: &'a mut MessageEvent) -> BoxFuture<'a, ()> {
        Box::pin(self.fetch_media(event))
    }
}
