//! `SlackAdapter`: the `hermes_adapter::Adapter` implementation tying the socket loop
//! (inbound) and the Web API sends (outbound) to one shared state.

use std::sync::{Arc, RwLock};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Capabilities, LengthUnit, Outbound, SendResult,
};

use crate::api::WebApi;
use crate::connection::{OpenGate, Tunables};
use crate::gating::{BotIdentity, Gates};
use crate::memory::{Memory, SharedMemory};
use crate::settings::Settings;

/// The reference's `MAX_MESSAGE_LENGTH`: Slack allows 40,000 characters; leave a margin.
pub const MESSAGE_LIMIT: usize = 39_000;

/// State shared by `run` and `send`.
#[derive(Debug)]
pub(crate) struct Shared {
    pub settings: Settings,
    pub api: WebApi,
    pub gates: Gates,
    pub tunables: Tunables,
    /// Learned from `auth.test` when `run` starts.
    pub me: RwLock<BotIdentity>,
    pub memory: SharedMemory,
    /// When Slack allows the next `apps.connections.open` (after a `Retry-After`).
    pub open_gate: Arc<OpenGate>,
}

impl Shared {
    pub fn me(&self) -> BotIdentity {
        self.me.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Slack over Socket Mode (inbound) and the Web API (outbound).
#[derive(Debug, Clone)]
pub struct SlackAdapter {
    shared: Arc<Shared>,
}

impl SlackAdapter {
    /// The adapter with the socket timings the settings name (defaults otherwise).
    pub fn new(settings: Settings) -> Self {
        let tunables = Tunables {
            ping_interval: settings.socket_ping_interval,
            silence_window: settings.socket_silence_window,
            ..Tunables::default()
        };
        Self::with_tunables(settings, tunables)
    }

    /// As [`SlackAdapter::new`] with socket timings changed (tests, benchmarks).
    pub fn with_tunables(settings: Settings, tunables: Tunables) -> Self {
        let api = WebApi::new(
            &settings.net,
            &settings.api_base_url,
            settings.bot_token.clone(),
            settings.app_token.clone(),
        )
        .with_timeouts(tunables.request_timeout, tunables.transfer_timeout);
        let gates = Gates::new(&settings);
        Self {
            shared: Arc::new(Shared {
                settings,
                api,
                gates,
                tunables,
                me: RwLock::new(BotIdentity::default()),
                memory: SharedMemory::default(),
                open_gate: Arc::default(),
            }),
        }
    }

    /// The bot's user id once `run` has called `auth.test` (empty before).
    pub fn bot_user_id(&self) -> String {
        self.shared.me().user_id
    }
}

impl Adapter for SlackAdapter {
    fn platform(&self) -> &'static str {
        "slack"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            message_limit: MESSAGE_LIMIT,
            length_unit: LengthUnit::Chars,
            edits: true,
            // Slack's equivalent is the assistant thread status ("is thinking...").
            typing: true,
            buttons: true,
            threads: true,
            command_prefix: '!',
            voice_caption_limit: Some(4000),
        }
    }

    /// Twice the socket's own detection bound (silence window plus one ping interval): a
    /// healthy socket reports a pong every ping interval and a silent one is replaced within
    /// that bound, so only a run whose sockets cannot be reopened trips the supervisor
    /// (without this the contract's 90 s default applied whatever the settings said).
    fn liveness_window(&self) -> std::time::Duration {
        let tunables = &self.shared.tunables;
        2 * (tunables.silence_window + tunables.ping_interval)
    }

    fn run(&self, ctx: AdapterContext) -> BoxFuture<'_, Result<(), AdapterError>> {
        crate::socket_mode::run(self.shared.clone(), ctx).boxed()
    }

    fn send(&self, outbound: Outbound) -> BoxFuture<'_, SendResult> {
        crate::outbound::send(&self.shared, outbound).boxed()
    }

    /// Shared files are downloaded here, after their envelope was acknowledged.
    fn fetch_pending_media<'a>(
        &'a self,
        event: &'a mut hermes_adapter::MessageEvent,
    ) -> BoxFuture<'a, ()> {
        crate::pending::fetch(&self.shared, event).boxed()
    }

    /// The session's title becomes the assistant thread's title (Slack's split view lists
    /// threads by it); other threads are left alone.
    fn rename_thread<'a>(&'a self, thread_id: &'a str, name: &'a str) -> BoxFuture<'a, SendResult> {
        crate::assistant::set_title(&self.shared, thread_id, name).boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_supervisor_window_follows_the_socket_timings() {
        let extra =
            serde_json::json!({"socket_ping_interval_seconds": 0.5, "socket_silence_seconds": 2});
        let settings = Settings::from_config(
            "xoxb-t",
            "xapp-t",
            extra.as_object().unwrap(),
            &BTreeMap::new(),
        )
        .unwrap();
        let adapter: Arc<dyn Adapter> = Arc::new(SlackAdapter::new(settings));
        assert_eq!(adapter.liveness_window(), Duration::from_secs(5));
        let defaults =
            Settings::from_config("xoxb-t", "xapp-t", &Default::default(), &BTreeMap::new())
                .unwrap();
        let adapter: Arc<dyn Adapter> = Arc::new(SlackAdapter::new(defaults));
        assert_eq!(adapter.liveness_window(), Duration::from_secs(80));
    }
}
