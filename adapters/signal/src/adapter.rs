//! `SignalAdapter`: the event stream in (one `GET /api/v1/events` connection, reopened when
//! it drops), JSON-RPC calls out. signal-cli has no acknowledgement and no redelivery: it
//! pushes each message once to whoever listens. So an event is handed to the core before
//! the next one is read, and a hand-over the core could not record is offered again (with
//! a growing pause) until it is recorded or the adapter stops.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Capabilities, DeadLetter, Guarded, LengthUnit,
    MessageEvent, MessageType, Outbound, OutboundKind, RecordOutcome, SendErrorKind, SendResult,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::envelope::{self, Decoded, PLATFORM, Reaction};
use crate::format::to_signal;
use crate::outbound::{self, data_uri, parse_message_id, sent, target, with_account};
use crate::prompts::{Prompts, with_choices};
use crate::rpc::Rpc;
use crate::settings::Settings;
use crate::sse::SseReader;

/// Hermes' Signal text limit, in characters.
pub const MESSAGE_LIMIT: usize = 8000;
/// signal-cli writes a keep-alive comment every 15 s; three missed ones mean the stream is
/// dead even if the socket says otherwise.
const STREAM_SILENCE: Duration = Duration::from_secs(45);
const RECONNECT_FIRST: Duration = Duration::from_millis(200);
const RECONNECT_MAX: Duration = Duration::from_secs(10);
const REDELIVER_MAX: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct SignalAdapter {
    inner: Arc<Inner>,
}

struct Inner {
    settings: Settings,
    rpc: Rpc,
    /// Without a whole-request timeout: the event stream stays open.
    stream_client: reqwest::Client,
    prompts: Prompts,
    /// Held (write) from before a prompt is sent until it is remembered, and (read) while a
    /// reaction is looked up: a reaction that arrives on the stream before the send's own
    /// answer still finds its prompt.
    prompt_sending: tokio::sync::RwLock<()>,
}

impl std::fmt::Debug for SignalAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignalAdapter")
            .field("http_url", &self.inner.settings.http_url.as_str())
            .finish()
    }
}

impl SignalAdapter {
    pub fn new(settings: Settings) -> Self {
        let rpc_client = settings
            .net
            .http_client()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap_or_default();
        let stream_client = settings
            .net
            .http_client()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        let rpc = Rpc::new(rpc_client, settings.endpoint("/api/v1/rpc"));
        Self {
            inner: Arc::new(Inner {
                settings,
                rpc,
                stream_client,
                prompts: Prompts::default(),
                prompt_sending: tokio::sync::RwLock::new(()),
            }),
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// Reads the event stream until it ends, fails or `stop` fires.
    async fn stream(&self, ctx: &AdapterContext, stop: &CancellationToken) -> Result<(), String> {
        let settings = &self.inner.settings;
        let mut url =
            url::Url::parse(&settings.endpoint("/api/v1/events")).map_err(|e| e.to_string())?;
        url.query_pairs_mut()
            .append_pair("account", &settings.account);
        let response = self
            .inner
            .stream_client
            .get(url)
            .header("accept", "text/event-stream")
            .send()
            .await
            .map_err(|e| hermes_adapter::net::error_chain(&e))?;
        if !response.status().is_success() {
            return Err(format!(
                "the event stream answered HTTP {}",
                response.status()
            ));
        }
        ctx.progress.report();
        tracing::info!("signal: event stream open");
        let mut body = response.bytes_stream();
        let mut reader = SseReader::default();
        loop {
            let chunk = tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                chunk = tokio::time::timeout(STREAM_SILENCE, body.next()) => chunk,
            };
            let bytes = match chunk {
                Err(_) => return Err("no keep-alive from the event stream".into()),
                Ok(None) => return Err("the event stream ended".into()),
                Ok(Some(Err(e))) => return Err(hermes_adapter::net::error_chain(&e)),
                Ok(Some(Ok(bytes))) => bytes,
            };
            ctx.progress.report();
            for event in reader.feed(&bytes).events {
                if event.event != "receive" {
                    continue;
                }
                if !self.take(ctx, stop, &event.data).await {
                    return Ok(());
                }
            }
        }
    }

    /// Hands one event's data to the core until it is recorded; false when stopped first.
    async fn take(&self, ctx: &AdapterContext, stop: &CancellationToken, data: &str) -> bool {
        let decoded = match envelope::decode(data, &self.inner.settings) {
            Ok(decoded) => decoded,
            Err(error) => {
                let letter = DeadLetter {
                    platform: PLATFORM.to_owned(),
                    item_id: format!("sse:{:016x}", fnv(data)),
                    source: None,
                    raw: data.to_owned(),
                    error,
                };
                return until_recorded(stop, || ctx.dead_letter(letter.clone())).await;
            }
        };
        let event = match decoded {
            Decoded::Skip(why) => {
                tracing::debug!(why, "signal: event not handed over");
                return true;
            }
            Decoded::Message(event) => *event,
            Decoded::Reaction(reaction) => match self.choice_event(&reaction).await {
                Some(event) => event,
                None => return true,
            },
        };
        until_recorded(stop, || ctx.deliver(event.clone())).await
    }

    /// A reaction that picks a choice on one of our prompts, as the click it stands for.
    async fn choice_event(&self, reaction: &Reaction) -> Option<MessageEvent> {
        let ours = reaction.target_author == self.inner.settings.account;
        if reaction.removed || !ours {
            return None;
        }
        let _settled = self.inner.prompt_sending.read().await;
        let data = self.inner.prompts.choice(
            &reaction.source.chat_id,
            reaction.target_timestamp,
            &reaction.emoji,
        )?;
        let mut event = MessageEvent::text(&reaction.event_id, reaction.source.clone(), &data);
        event.message_type = MessageType::Command;
        event.message_id = Some(format!(
            "{}:{}",
            reaction.target_timestamp, reaction.target_author
        ));
        event.timestamp = reaction.timestamp as f64 / 1000.0;
        Some(event)
    }

    async fn run_stream(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
        let key = format!("signal:{}", self.inner.settings.account);
        let progress = ctx.progress.clone();
        let outcome = ctx
            .ingress
            .run_while_holding::<AdapterError, _, _>(
                &key,
                &ctx.shutdown,
                || progress.report(),
                |lost| {
                    let ctx = ctx.clone();
                    async move {
                        let mut pause = RECONNECT_FIRST;
                        loop {
                            match self.stream(&ctx, &lost).await {
                                Ok(()) => return Ok(()),
                                Err(e) => {
                                    tracing::warn!(error = %e, "signal: event stream lost; reconnecting")
                                }
                            }
                            tokio::select! {
                                _ = lost.cancelled() => return Ok(()),
                                _ = tokio::time::sleep(pause) => {}
                            }
                            pause = (pause * 2).min(RECONNECT_MAX);
                        }
                    }
                },
            )
            .await;
        match outcome {
            Guarded::Shutdown => Ok(()),
            Guarded::Failed(e) => Err(e),
        }
    }

    async fn send_text(
        &self,
        chat_id: &str,
        text: &str,
        reply_to: Option<&str>,
        plain: bool,
    ) -> Result<i64, SendResult> {
        let styled = to_signal(text, plain);
        let mut params = with_account(&self.inner.settings, target(chat_id));
        params.insert("message".into(), json!(styled.text));
        if !styled.styles.is_empty() {
            params.insert("textStyle".into(), json!(styled.styles));
        }
        if let Some((ts, author)) = reply_to.and_then(parse_message_id) {
            params.insert("quoteTimestamp".into(), json!(ts));
            params.insert("quoteAuthor".into(), json!(author));
        }
        sent(&self.inner.rpc, "send", params).await
    }

    fn id(&self, timestamp: i64) -> Option<String> {
        Some(format!("{timestamp}:{}", self.inner.settings.account))
    }

    async fn perform(&self, outbound: Outbound) -> SendResult {
        let chat = outbound.chat_id.as_str();
        let settings = &self.inner.settings;
        let result = match outbound.kind {
            OutboundKind::Text {
                text,
                reply_to,
                plain,
            } => {
                self.send_text(chat, &text, reply_to.as_deref(), plain)
                    .await
            }
            OutboundKind::Prompt { text, buttons } => {
                let shown = with_choices(&text, &buttons);
                let _sending = self.inner.prompt_sending.write().await;
                let sent = self.send_text(chat, &shown, None, false).await;
                if let Ok(ts) = sent {
                    self.inner.prompts.remember(chat, ts, buttons);
                }
                sent
            }
            OutboundKind::Typing => {
                let params = with_account(settings, target(chat));
                sent(&self.inner.rpc, "sendTyping", params).await.map(|_| 0)
            }
            // A spoken reply goes as an Ogg/Opus audio attachment; its text follows as its
            // own message (`voice_caption_limit: None`).
            OutboundKind::Media { path, caption } | OutboundKind::Voice { path, caption, .. } => {
                match data_uri(path.as_ref()).await {
                    Err(failed) => Err(failed),
                    Ok(uri) => {
                        let styled = to_signal(caption.as_deref().unwrap_or(""), false);
                        let mut params = with_account(settings, target(chat));
                        params.insert("attachments".into(), json!([uri]));
                        params.insert("message".into(), json!(styled.text));
                        if !styled.styles.is_empty() {
                            params.insert("textStyle".into(), json!(styled.styles));
                        }
                        sent(&self.inner.rpc, "send", params).await
                    }
                }
            }
            OutboundKind::Delete { message_id } => match parse_message_id(&message_id) {
                None => Err(SendResult::failed(
                    SendErrorKind::NotFound,
                    format!("{message_id:?} is not a Signal message id"),
                )),
                Some((ts, _)) => {
                    let mut params = with_account(settings, target(chat));
                    params.insert("targetTimestamp".into(), json!(ts));
                    sent(&self.inner.rpc, "remoteDelete", params)
                        .await
                        .map(|_| 0)
                }
            },
            OutboundKind::Edit { .. } => Err(SendResult::failed(
                SendErrorKind::Unknown,
                "the Signal adapter does not edit sent messages",
            )),
        };
        match result {
            Ok(0) => SendResult::sent(None),
            Ok(ts) => SendResult::sent(self.id(ts)),
            Err(failed) => failed,
        }
    }

    /// Fetches one attachment with `getAttachment` into the cache; its path.
    async fn fetch(&self, reference: &Value) -> Result<String, String> {
        let id = reference["id"].as_str().ok_or("no attachment id")?;
        let mut params = serde_json::Map::new();
        params.insert("id".into(), json!(id));
        for key in ["recipient", "groupId"] {
            if let Some(value) = reference.get(key) {
                params.insert(key.into(), value.clone());
            }
        }
        let params = with_account(&self.inner.settings, params);
        let result = self
            .inner
            .rpc
            .call("getAttachment", Value::Object(params))
            .await
            .map_err(|e| e.to_string())?;
        let encoded = result
            .get("data")
            .and_then(Value::as_str)
            .or_else(|| result.as_str())
            .ok_or("the daemon returned no attachment data")?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| format!("attachment data is not base64: {e}"))?;
        let content_type = reference["contentType"].as_str().unwrap_or("");
        let dir = &self.inner.settings.cache_dir;
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let name = hermes_adapter::media_cache::safe_file_name(id);
        let path = dir.join(format!("{name}.{}", outbound::extension_of(content_type)));
        tokio::fs::write(&path, bytes)
            .await
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path.to_string_lossy().into_owned())
    }
}

/// Offers `hand_over` again (pausing longer each time) until the core records it (or
/// already had it); false when `stop` fired first.
async fn until_recorded<F, Fut>(stop: &CancellationToken, mut hand_over: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = RecordOutcome>,
{
    let mut pause = Duration::from_millis(50);
    loop {
        let outcome = tokio::select! {
            _ = stop.cancelled() => return false,
            outcome = hand_over() => outcome,
        };
        if outcome != RecordOutcome::Failed {
            return true;
        }
        tracing::warn!("signal: the core could not record an event; offering it again");
        tokio::select! {
            _ = stop.cancelled() => return false,
            _ = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(REDELIVER_MAX);
    }
}

/// FNV-1a, a stable id for a payload that carries none.
fn fnv(data: &str) -> u64 {
    data.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Adapter for SignalAdapter {
    fn platform(&self) -> &'static str {
        PLATFORM
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            message_limit: MESSAGE_LIMIT,
            length_unit: LengthUnit::Chars,
            edits: false,
            typing: true,
            // Shown as numbered reaction choices under the prompt's text (`prompts`): one
            // tap answers, as a button would.
            buttons: true,
            threads: false,
            command_prefix: '/',
            voice_caption_limit: None,
        }
    }

    fn liveness_window(&self) -> Duration {
        STREAM_SILENCE + Duration::from_secs(30)
    }

    fn run(&self, ctx: AdapterContext) -> BoxFuture<'_, Result<(), AdapterError>> {
        Box::pin(self.run_stream(ctx))
    }

    fn send(&self, outbound: Outbound) -> BoxFuture<'_, SendResult> {
        Box::pin(self.perform(outbound))
    }

    fn fetch_pending_media<'a>(&'a self, event: &'a mut MessageEvent) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for pending in std::mem::take(&mut event.pending_media) {
                let content_type = pending.reference["contentType"]
                    .as_str()
                    .unwrap_or("application/octet-stream")
                    .to_owned();
                match self.fetch(&pending.reference).await {
                    Ok(path) => {
                        event.media_paths.push(path);
                        event.media_types.push(content_type);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "signal: attachment not fetched");
                        let note = format!("[attachment {} could not be fetched]", pending.label);
                        event.text = if event.text.is_empty() {
                            note
                        } else {
                            format!("{}\n{note}", event.text)
                        };
                    }
                }
            }
        })
    }
}
