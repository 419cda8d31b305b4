//! `TelegramAdapter`: start-up (getMe, command menu, webhook or polling), the run loop, and
//! `send`. One instance per bot token.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Capabilities, Guarded, LengthUnit, Outbound, SendResult,
};
use serde_json::json;

use crate::api::types::Me;
use crate::api::{ApiError, BotApi};
use crate::commands;
use crate::gating::BotIdentity;
use crate::inbound::PLATFORM;
use crate::intake;
use crate::migrations::Migrations;
use crate::outbound::Sender;
use crate::polling::Poller;
use crate::settings::Settings;
use crate::webhook::{self, WebhookSlot};

/// Telegram's text limit, in UTF-16 code units.
pub const MESSAGE_LIMIT: usize = 4096;
/// How often webhook mode confirms the Bot API still answers (getWebhookInfo).
const WEBHOOK_CHECK_INTERVAL: Duration = Duration::from_secs(30);

pub struct TelegramAdapter {
    settings: Arc<Settings>,
    api: BotApi,
    webhook_slot: WebhookSlot,
    /// Groups that became supergroups (learnt from sends), so replies follow them.
    migrations: Migrations,
}

impl std::fmt::Debug for TelegramAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramAdapter")
            .field("settings", &self.settings)
            .finish()
    }
}

impl TelegramAdapter {
    pub fn new(settings: Settings) -> Self {
        let api = BotApi::new(&settings.net, &settings.endpoints, settings.token.clone());
        Self {
            settings: Arc::new(settings),
            api,
            webhook_slot: WebhookSlot::default(),
            migrations: Migrations::default(),
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// In webhook mode, the router the core mounts in its HTTP server: it serves `POST` on
    /// the path of `TELEGRAM_WEBHOOK_URL` (e.g. `/telegram/webhook`). `None` when polling.
    pub fn webhook_router(&self) -> Option<axum::Router> {
        let webhook = self.settings.webhook.as_ref()?;
        let path = webhook_path(&webhook.url);
        Some(webhook::router(
            &path,
            webhook.secret.clone(),
            self.webhook_slot.clone(),
        ))
    }

    /// The window within which a healthy adapter reports progress.
    pub fn liveness_window(&self) -> Duration {
        self.settings.liveness_window()
    }

    async fn start(&self) -> Result<BotIdentity, AdapterError> {
        let me = self
            .api
            .call("getMe", &json!({}), self.settings.request_timeout)
            .await
            .map_err(|e| self.get_me_error(&e))?;
        let me: Me = serde_json::from_value(me).map_err(|e| {
            AdapterError::Retryable(format!("telegram: getMe answer not understood: {e}"))
        })?;
        if me.can_read_all_group_messages == Some(false) && self.settings.needs_group_messages() {
            tracing::warn!(
                platform = PLATFORM,
                "the bot has privacy mode on (getMe can_read_all_group_messages=false): in groups Telegram delivers only commands, replies to the bot and @mentions, so require_mention=false, free_response_chats, free_response_topics and mention_patterns never see other messages; turn privacy off with @BotFather (/setprivacy) and re-add the bot to the group"
            );
        }
        let bot = BotIdentity {
            id: me.id,
            username: me.username.unwrap_or_default().to_lowercase(),
        };
        if !self.settings.commands.is_empty() {
            let menu = commands::menu(&self.settings.commands);
            if let Err(e) = self
                .api
                .call(
                    "setMyCommands",
                    &json!({"commands": menu}),
                    self.settings.request_timeout,
                )
                .await
            {
                tracing::warn!(platform = PLATFORM, error = %e, "setMyCommands failed; the command menu is unchanged");
            }
        }
        tracing::info!(platform = PLATFORM, bot = %bot.username, "connected to the Bot API");
        Ok(bot)
    }

    async fn run_inner(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
        let bot = tokio::select! {
            bot = self.start() => bot?,
            _ = ctx.shutdown.cancelled() => return Ok(()),
        };
        let bot_id = bot.id;
        let (intake, intake_task) =
            intake::spawn(self.api.clone(), self.settings.clone(), bot, ctx.clone());
        let result = match &self.settings.webhook {
            Some(webhook) => {
                let params = json!({"url": webhook.url, "secret_token": webhook.secret.expose(),
                    "allowed_updates": ["message", "channel_post", "callback_query"]});
                // Ready before Telegram is told: it may POST the moment setWebhook returns.
                self.webhook_slot.install(intake, ctx.clone());
                match self
                    .api
                    .call("setWebhook", &params, self.settings.request_timeout)
                    .await
                {
                    Ok(_) => {
                        ctx.progress.report();
                        self.watch_webhook(&ctx).await
                    }
                    Err(e) => Err(start_error("setWebhook", &e)),
                }
            }
            None => match self
                .api
                .call(
                    "deleteWebhook",
                    &json!({"drop_pending_updates": false}),
                    self.settings.request_timeout,
                )
                .await
            {
                Ok(_) => self.poll_while_leader(bot_id, intake, &ctx).await,
                Err(e) => Err(start_error("deleteWebhook", &e)),
            },
        };
        self.webhook_slot.clear();
        intake_task.abort();
        result
    }

    /// Polls only while this instance holds the bot's polling claim: Telegram serves one
    /// `getUpdates` caller per bot (a second one gets 409 Conflict), so of several instances
    /// sharing the state one is elected; the others only send. A leader that loses its claim
    /// stops polling at once; what it had not confirmed (offsets move only once the core has
    /// journaled an update) is fetched again by the next leader, and the journal drops what
    /// it already has. A solo instance always holds the claim.
    async fn poll_while_leader(
        &self,
        bot_id: i64,
        intake: intake::IntakeHandle,
        ctx: &AdapterContext,
    ) -> Result<(), AdapterError> {
        let key = format!("telegram-poll:{bot_id}");
        // Waiting for the claim is healthy: the supervisor must not restart a follower.
        let waiting = || ctx.progress.report();
        let outcome = ctx
            .ingress
            .run_while_holding(&key, &ctx.shutdown, waiting, |lost| {
                let term = AdapterContext {
                    shutdown: lost,
                    ..ctx.clone()
                };
                let intake = intake.clone();
                async move {
                    Poller {
                        api: &self.api,
                        settings: &self.settings,
                        intake,
                        ctx: &term,
                    }
                    .run()
                    .await
                }
            })
            .await;
        match outcome {
            Guarded::Shutdown => Ok(()),
            Guarded::Failed(e) => Err(e),
        }
    }

    /// Why start-up stopped at getMe. A 404 means nothing answers Bot API methods at the
    /// configured prefix (or the token is malformed): retrying cannot help, so it is fatal,
    /// and the message shows the URL that was tried, the token masked.
    fn get_me_error(&self, e: &ApiError) -> AdapterError {
        if e.status() == Some(404) {
            return AdapterError::Fatal(format!(
                "telegram: getMe answered 404 at {}: no Bot API answers there. extra.base_url is the prefix the token is appended to (python-telegram-bot's convention), e.g. https://api.telegram.org/bot or http://localhost:8081/bot for a local Bot API server; a malformed bot token also gets 404 ({e})",
                self.api.method_url_shape("getMe")
            ));
        }
        if e.is_unauthorized() {
            AdapterError::Fatal(format!("telegram: the bot token was rejected (getMe): {e}"))
        } else {
            AdapterError::Retryable(format!("telegram: getMe failed: {e}"))
        }
    }

    /// Webhook mode has nothing to poll: confirm the Bot API answers now and then.
    async fn watch_webhook(&self, ctx: &AdapterContext) -> Result<(), AdapterError> {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(WEBHOOK_CHECK_INTERVAL) => {}
                _ = ctx.shutdown.cancelled() => return Ok(()),
            }
            match self
                .api
                .call("getWebhookInfo", &json!({}), self.settings.request_timeout)
                .await
            {
                Ok(_) => ctx.progress.report(),
                Err(e) if e.is_unauthorized() => {
                    return Err(AdapterError::Fatal(format!(
                        "telegram: the bot token was rejected: {e}"
                    )));
                }
                Err(e) => tracing::warn!(platform = PLATFORM, error = %e, "getWebhookInfo failed"),
            }
        }
    }
}

fn start_error(method: &str, e: &ApiError) -> AdapterError {
    if e.is_unauthorized() {
        AdapterError::Fatal(format!(
            "telegram: the bot token was rejected ({method}): {e}"
        ))
    } else {
        AdapterError::Retryable(format!("telegram: {method} failed: {e}"))
    }
}

/// The path part of the public webhook URL (`/` when it has none).
fn webhook_path(url: &str) -> String {
    let without_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    match without_scheme.find('/') {
        Some(i) => without_scheme[i..]
            .split(['?', '#'])
            .next()
            .unwrap_or("/")
            .to_owned(),
        None => "/".to_owned(),
    }
}

impl Adapter for TelegramAdapter {
    fn platform(&self) -> &'static str {
        PLATFORM
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            message_limit: MESSAGE_LIMIT,
            length_unit: LengthUnit::Utf16,
            edits: true,
            typing: true,
            buttons: true,
            threads: true,
            command_prefix: '/',
            voice_caption_limit: Some(1024),
        }
    }

    /// The supervisor's silence limit: a poll's timeout plus twice its margin (without
    /// this the contract's 90 s default applied and a stalled poll went unnoticed).
    fn liveness_window(&self) -> Duration {
        self.settings.liveness_window()
    }

    fn take_chat_migrations(&self) -> Vec<(String, String)> {
        self.migrations.take_untold()
    }

    fn run(&self, ctx: AdapterContext) -> BoxFuture<'_, Result<(), AdapterError>> {
        self.run_inner(ctx).boxed()
    }

    /// A message's file is downloaded here, by the process that runs its turn, after the
    /// update was acknowledged (`pending.rs`).
    fn fetch_pending_media<'a>(
        &'a self,
        event: &'a mut hermes_adapter::MessageEvent,
    ) -> BoxFuture<'a, ()> {
        crate::pending::fetch(&self.api, &self.settings, event).boxed()
    }

    fn send(&self, outbound: Outbound) -> BoxFuture<'_, SendResult> {
        async move {
            let sender = Sender {
                api: &self.api,
                settings: &self.settings,
                migrations: &self.migrations,
            };
            sender
                .send(
                    &outbound.chat_id,
                    outbound.thread_id.as_deref(),
                    outbound.kind,
                )
                .await
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_paths() {
        assert_eq!(
            webhook_path("https://example.com/telegram/hook?x=1"),
            "/telegram/hook"
        );
        assert_eq!(webhook_path("https://example.com"), "/");
    }

    #[test]
    fn the_supervisor_sees_the_configured_liveness_window() {
        let extra = serde_json::json!({"poll_timeout_seconds": 1, "poll_margin_seconds": 1});
        let settings =
            Settings::from_config("1:x", extra.as_object().unwrap(), &Default::default()).unwrap();
        let adapter: Arc<dyn Adapter> = Arc::new(TelegramAdapter::new(settings));
        assert_eq!(adapter.liveness_window(), Duration::from_secs(3));
    }
}
