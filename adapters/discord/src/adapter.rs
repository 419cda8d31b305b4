//! `DiscordAdapter`: checks the token, finds the gateway, then runs two tasks joined in
//! `run` — the gateway session (socket, heartbeats, reconnects) and the event loop that
//! handles dispatches in order (directory updates, messages). Interactions run in tasks
//! of their own (Discord wants their answer within 3 s, whatever the loop is doing), and
//! so does the backfill after every new session. The gateway keeps heartbeating while the
//! event loop waits on the core.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Capabilities, LengthUnit, Outbound, RecordOutcome,
    SendResult,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::directory::ChannelInfo;
use crate::gateway::Dispatch;
use crate::gateway::budget::IdentifyBudget;
use crate::inner::Inner;
use crate::model::{Channel, Guild, Interaction, Message, Ready};
use crate::place::Origin;
use crate::rest::RestError;
use crate::settings::Settings;
use crate::shards::Shards;
use crate::{backfill, inbound, interactions, outbound};

/// Dispatches buffered between the gateway and the event loop. When the core is slower
/// than Discord for this long, the gateway stops reading (backpressure).
const DISPATCH_BUFFER: usize = 1024;

/// The Discord platform adapter.
#[derive(Debug, Clone)]
pub struct DiscordAdapter {
    inner: Arc<Inner>,
}

impl DiscordAdapter {
    pub fn new(settings: Settings) -> Self {
        Self {
            inner: Arc::new(Inner::new(settings)),
        }
    }

    /// DM channels and threads of existing sessions (the core knows them from its
    /// store): backfill scans them after a restart, when the adapter has not seen them yet.
    pub fn remember_conversations<I: IntoIterator<Item = String>>(&self, channel_ids: I) {
        self.inner
            .with_directory(|d| d.known_conversations.extend(channel_ids));
    }

    /// Renames a thread from the session title (called by the core after the first turn).
    pub async fn rename_thread(&self, thread_id: &str, name: &str) -> Result<(), RestError> {
        outbound::rename_thread(&self.inner, thread_id, name).await
    }

    async fn run_inner(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
        let inner = &self.inner;
        let me = inner.rest.get_me().await.map_err(|e| {
            if e.is_unauthorized() {
                AdapterError::Fatal("Discord rejected the bot token (401 on GET /users/@me)".into())
            } else {
                AdapterError::Retryable(format!("Discord is unreachable: {e}"))
            }
        })?;
        inner.set_identity(&me.id, None);
        ctx.progress.report();
        let (gateway_url, budget) = match &inner.settings.gateway_url {
            Some(url) => (url.clone(), None),
            None => inner.rest.gateway_bot().await.map(|(url, limit)| {
                let window = Some(inner.settings.identify_window);
                (url, IdentifyBudget::from_lookup(&limit, window))
            }).map_err(|e| {
                let message = format!(
                    "could not look up the Discord gateway URL (GET /gateway/bot): {e}; set discord.extra.gateway_url to skip the lookup"
                );
                if e.is_unauthorized() {
                    AdapterError::Fatal(message)
                } else {
                    AdapterError::Retryable(message)
                }
            })?,
        };
        let (dispatch_tx, dispatch_rx) = mpsc::channel(DISPATCH_BUFFER);
        let shards = Shards {
            settings: &inner.settings,
            gateway_url: &gateway_url,
            ctx: &ctx,
            dispatches: &dispatch_tx,
            budget: budget.map(|budget| Arc::new(std::sync::Mutex::new(budget))),
            application_id: &me.id,
            held: Arc::default(),
        };
        let gateway = shards.run();
        let events = event_loop(inner, &ctx, dispatch_rx);
        tokio::pin!(events);
        // The gateway owns the only sender: when it returns, the event loop drains and ends.
        let result = tokio::select! {
            result = gateway => result,
            () = &mut events => Ok(()),
        };
        drop(dispatch_tx);
        result
    }
}

/// How long the backfill waits for the GUILD_CREATEs announced in READY (it needs the
/// channels they carry) before it runs with what it has.
const GUILDS_WAIT: Duration = Duration::from_secs(10);

/// Starts a backfill scan in its own task. A scan still running from an earlier session
/// is finished first, not cut short: stopped between handing a message over and opening
/// its thread, it would leave the answer nowhere to go.
fn start_backfill(inner: &Arc<Inner>, ctx: &AdapterContext, scan: &mut Option<AbortOnDrop>) {
    let (inner, ctx) = (inner.clone(), ctx.clone());
    let mut previous = scan.take();
    *scan = Some(AbortOnDrop(tokio::spawn(async move {
        if let Some(previous) = previous.as_mut() {
            let _ = (&mut previous.0).await;
        }
        backfill::run(&inner, &ctx).await;
    })));
}

/// A task stopped when its handle is dropped (the adapter stops).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Routes dispatches: interactions start at once in tasks of their own (whatever the
/// serial loop is busy with: downloads, the core, thread creation), everything else goes to
/// the serial loop in gateway order.
async fn event_loop(
    inner: &Arc<Inner>,
    ctx: &AdapterContext,
    mut dispatches: mpsc::Receiver<Dispatch>,
) {
    let (serial_tx, serial_rx) = mpsc::channel(DISPATCH_BUFFER);
    let serial = serial_loop(inner, ctx, serial_rx);
    tokio::pin!(serial);
    let mut running = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            () = &mut serial => return,
            Some(_) = running.join_next(), if !running.is_empty() => {}
            dispatch = dispatches.recv() => {
                let Some(dispatch) = dispatch else { break };
                if dispatch.name != "INTERACTION_CREATE" {
                    // Waiting here only when the serial loop is 1024 dispatches behind.
                    tokio::select! {
                        () = &mut serial => return,
                        sent = serial_tx.send(dispatch) => if sent.is_err() { return },
                    }
                    continue;
                }
                match serde_json::from_value::<Interaction>(dispatch.data.clone()) {
                    Ok(interaction) => {
                        running.spawn(interactions::handle(inner.clone(), ctx.clone(), interaction));
                    }
                    Err(error) => {
                        keep_dead_letter(ctx, &dispatch.name, &dispatch.data, &error).await
                    }
                }
            }
        }
    }
    // The gateway is gone: the serial loop drains what it has, then ends.
    drop(serial_tx);
    serial.await;
}

/// Handles directory updates, READY and messages one at a time, in gateway order.
async fn serial_loop(
    inner: &Arc<Inner>,
    ctx: &AdapterContext,
    mut dispatches: mpsc::Receiver<Dispatch>,
) {
    let mut commands_registered = false;
    // Guild ids still expected after READY; the backfill runs when none is left.
    let mut awaiting_guilds: Option<HashSet<String>> = None;
    let mut guilds_deadline = Instant::now();
    let mut scan: Option<AbortOnDrop> = None;
    loop {
        let dispatch = tokio::select! {
            dispatch = dispatches.recv() => match dispatch {
                Some(dispatch) => dispatch,
                None => return,
            },
            () = tokio::time::sleep_until(guilds_deadline), if awaiting_guilds.is_some() => {
                awaiting_guilds = None;
                start_backfill(inner, ctx, &mut scan);
                continue;
            }
        };
        if ctx.shutdown.is_cancelled() {
            return;
        }
        let Dispatch { name, data } = dispatch;
        match name.as_str() {
            "READY" => {
                let Ok(ready) = serde_json::from_value::<Ready>(data) else {
                    continue;
                };
                inner.set_identity(&ready.user.id, ready.application.map(|a| a.id));
                if !commands_registered {
                    commands_registered = true;
                    register_commands(inner).await;
                }
                // A new session: whatever was sent meanwhile was not replayed.
                awaiting_guilds = Some(ready.guilds.into_iter().map(|g| g.id).collect());
                guilds_deadline = Instant::now() + GUILDS_WAIT;
            }
            "GUILD_CREATE" => {
                if let Ok(guild) = serde_json::from_value::<Guild>(data) {
                    inner.with_directory(|d| {
                        if let Some(name) = guild.name.clone() {
                            d.guild_names.insert(guild.id.clone(), name);
                        }
                        d.guild_tiers.insert(guild.id.clone(), guild.premium_tier);
                        for channel in guild.channels.iter().chain(&guild.threads) {
                            d.upsert(ChannelInfo::from_channel(channel, Some(&guild.id)));
                        }
                    });
                    if let Some(waiting) = awaiting_guilds.as_mut() {
                        waiting.remove(&guild.id);
                    }
                }
            }
            "CHANNEL_CREATE" | "CHANNEL_UPDATE" | "THREAD_CREATE" | "THREAD_UPDATE" => {
                if let Ok(channel) = serde_json::from_value::<Channel>(data) {
                    inner.with_directory(|d| d.upsert(ChannelInfo::from_channel(&channel, None)));
                }
            }
            "CHANNEL_DELETE" | "THREAD_DELETE" => {
                if let Some(id) = data["id"].as_str() {
                    inner.with_directory(|d| d.channels.remove(id));
                }
            }
            "MESSAGE_CREATE" => match serde_json::from_value::<Message>(data.clone()) {
                Ok(message) => {
                    inbound::handle(inner, ctx, message, Origin::Gateway).await;
                }
                Err(error) => keep_dead_letter(ctx, &name, &data, &error).await,
            },
            _ => {}
        }
        if awaiting_guilds.as_ref().is_some_and(HashSet::is_empty) {
            awaiting_guilds = None;
            start_backfill(inner, ctx, &mut scan);
        }
    }
}

/// Hands an undecodable dispatch to the core. The gateway cannot redeliver it, so a failed
/// record is only logged (the raw payload with it).
async fn keep_dead_letter(
    ctx: &AdapterContext,
    name: &str,
    data: &Value,
    error: &serde_json::Error,
) {
    let letter = crate::dead_letter::dead_letter(name, data, error);
    if ctx.dead_letter(letter).await == RecordOutcome::Failed {
        tracing::error!(platform = "discord", dispatch = name, %error, raw = %data, "undecodable dispatch could not be kept");
    }
}

/// Bulk-overwrites the global application commands with the configured list.
async fn register_commands(inner: &Inner) {
    let settings = &inner.settings;
    if !settings.sync_commands || settings.slash_commands.is_empty() {
        return;
    }
    let Some(application_id) = inner.application_id() else {
        tracing::warn!(
            platform = "discord",
            "no application id in READY; slash commands not registered"
        );
        return;
    };
    let commands: Vec<Value> = settings
        .slash_commands
        .iter()
        .map(|c| {
            let description: String = c.description.chars().take(100).collect();
            let mut command = json!({"name": c.name, "description": description, "type": 1});
            if c.takes_args {
                command["options"] = json!([{"type": 3, "name": "args", "description": "Arguments", "required": false}]);
            }
            command
        })
        .collect();
    if let Err(error) = inner
        .rest
        .bulk_overwrite_commands(&application_id, &Value::Array(commands))
        .await
    {
        tracing::warn!(platform = "discord", %error, "slash command registration failed");
    }
}

impl Adapter for DiscordAdapter {
    fn platform(&self) -> &'static str {
        "discord"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            message_limit: 2000,
            length_unit: LengthUnit::Chars,
            edits: true,
            typing: true,
            buttons: true,
            threads: true,
            command_prefix: '/',
            voice_caption_limit: None,
        }
    }

    fn run(&self, ctx: AdapterContext) -> BoxFuture<'_, Result<(), AdapterError>> {
        Box::pin(self.run_inner(ctx))
    }

    /// Attachments are downloaded here, by the process that runs the turn.
    fn fetch_pending_media<'a>(
        &'a self,
        event: &'a mut hermes_adapter::MessageEvent,
    ) -> BoxFuture<'a, ()> {
        Box::pin(crate::attachments::fetch_pending(
            &self.inner.rest,
            &self.inner.settings,
            event,
        ))
    }

    fn send(&self, outbound: Outbound) -> BoxFuture<'_, SendResult> {
        Box::pin(async move {
            outbound::send(
                &self.inner,
                &outbound.chat_id,
                outbound.thread_id.as_deref(),
                outbound.kind,
            )
            .await
        })
    }

    fn rename_thread<'a>(&'a self, thread_id: &'a str, name: &'a str) -> BoxFuture<'a, SendResult> {
        Box::pin(async move {
            let opened_by_us = self
                .inner
                .with_directory(|d| d.auto_threads.contains(thread_id));
            if !opened_by_us {
                return SendResult::sent(None);
            }
            match outbound::rename_thread(&self.inner, thread_id, name).await {
                Ok(()) => SendResult::sent(Some(thread_id.to_owned())),
                Err(error) => SendResult::failed(error.kind, error.to_string()),
            }
        })
    }
}
