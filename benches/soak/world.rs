//! The soak's world: the three wire-level platform fakes and the fake model in this process,
//! the simulated users of each platform, and the home, config and environment the real
//! `hermesd run` binary gets so that it serves all three platforms and the HTTP API.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fake_discord::{FakeDiscord, FakeUser};
use fake_slack::FakeSlack;
use fake_telegram::FakeTelegram;

use crate::fake_model::FakeModel;

pub const DISCORD_TOKEN: &str = "soak-discord-bot-token-5f2b7c9e";
pub const API_KEY: &str = "soak-api-key-0123456789abcdef";
/// Discord heartbeat interval the fake announces: short, so a zombie is noticed quickly.
const DISCORD_HEARTBEAT: Duration = Duration::from_secs(3);
/// Guild channels the Discord users talk in (free-response, so no mention is needed, and
/// scanned by the missed-message backfill after a restart).
const DISCORD_CHANNELS: usize = 4;

/// A simulated Discord user and the channel it writes in.
#[derive(Debug, Clone)]
pub struct DiscordUser {
    pub user: FakeUser,
    pub channel: String,
}

#[derive(Debug)]
pub struct World {
    pub telegram: Arc<FakeTelegram>,
    pub discord: Arc<FakeDiscord>,
    pub slack: Arc<FakeSlack>,
    pub model: FakeModel,
    pub discord_users: Vec<DiscordUser>,
    discord_channels: Vec<String>,
    users: usize,
}

/// Telegram user (and private chat) id of user `i`.
pub fn telegram_user(i: usize) -> i64 {
    70_001 + i as i64
}

/// Slack user id and DM channel of user `i`.
pub fn slack_user(i: usize) -> (String, String) {
    (format!("U{}", 1000 + i), format!("D{}", 1000 + i))
}

impl World {
    /// Simulated users per platform.
    pub fn users(&self) -> usize {
        self.users
    }

    pub async fn start(users: usize) -> World {
        let telegram = Arc::new(FakeTelegram::start().await);
        let discord = Arc::new(FakeDiscord::start(DISCORD_TOKEN, DISCORD_HEARTBEAT).await);
        let slack = Arc::new(FakeSlack::start().await);
        let model = FakeModel::start_in_background();
        let discord_channels: Vec<String> = (0..DISCORD_CHANNELS)
            .map(|c| discord.add_text_channel(&format!("soak-{c}")))
            .collect();
        let discord_users = (0..users)
            .map(|i| DiscordUser {
                user: discord.new_user(&format!("soaker{i}"), false, &[]),
                channel: discord_channels[i % DISCORD_CHANNELS].clone(),
            })
            .collect();
        World {
            telegram,
            discord,
            slack,
            model,
            discord_users,
            discord_channels,
            users,
        }
    }

    /// Writes `config.yaml` into `home`: all three platforms pointed at the fakes.
    /// The fakes' ports by name, to tell the daemon's connections apart.
    pub fn port_names(&self) -> std::collections::HashMap<u16, String> {
        // `scheme://127.0.0.1:PORT/...`: the digits after the authority's last colon.
        let port = |url: &str| -> Option<u16> {
            let authority = url.split("://").nth(1)?.split('/').next()?;
            authority.rsplit(':').next()?.parse().ok()
        };
        [
            ("telegram", self.telegram.url()),
            ("discord", self.discord.api_base_url()),
            ("discord gateway", self.discord.gateway_url()),
            ("slack", self.slack.api_base_url()),
            ("model", self.model.base_url()),
        ]
        .into_iter()
        .filter_map(|(name, url)| Some((port(&url)?, name)))
        .fold(
            std::collections::HashMap::new(),
            |mut names, (port, name)| {
                // Fakes serving two roles on one port are named once.
                names
                    .entry(port)
                    .and_modify(|known: &mut String| {
                        if !name.starts_with(known.as_str()) {
                            known.push_str(&format!(" + {name}"));
                        }
                    })
                    .or_insert_with(|| name.to_owned());
                names
            },
        )
    }

    pub fn write_config(&self, home: &Path) {
        let channels: Vec<String> = self
            .discord_channels
            .iter()
            .map(|c| format!("\"{c}\""))
            .collect();
        // Slack DMs stay one session per user (Hermes's default opens a session per
        // top-level DM message, which would grow the routing index for the whole run and
        // hide a real leak behind expected growth).
        let yaml = format!(
            "telegram:\n  enabled: true\n  extra:\n    base_url: {telegram}\n    poll_timeout_seconds: 2\n\
             discord:\n  enabled: true\n  extra:\n    api_base_url: {discord_api}\n    gateway_url: {discord_gw}\n    \
             free_response_channels: [{channels}]\n    auto_thread: false\n    slash_commands: false\n    \
             missed_message_backfill:\n      limit: 100\n      max_dispatches: 100\n\
             slack:\n  enabled: true\n  extra:\n    api_base_url: {slack_api}\n    dm_top_level_threads_as_sessions: false\n",
            telegram = self.telegram.url(),
            discord_api = self.discord.api_base_url(),
            discord_gw = self.discord.gateway_url(),
            channels = channels.join(", "),
            slack_api = self.slack.api_base_url(),
        );
        std::fs::write(home.join("config.yaml"), yaml).expect("write config.yaml");
    }

    /// Every token and key the daemon is given (none may reach its log).
    pub fn secrets(&self) -> Vec<String> {
        let slack = self.slack.tokens();
        vec![
            self.telegram.token().to_owned(),
            DISCORD_TOKEN.to_owned(),
            slack.bot,
            slack.app,
            API_KEY.to_owned(),
            "sk-soak-model-key".to_owned(),
        ]
    }

    /// The daemon's environment: clean, tokens, allowlists, the fake model, the HTTP API
    /// on an OS-assigned port, short adapter backoff.
    pub fn env(&self, home: &Path) -> Vec<(String, String)> {
        let mut env = crate::daemon::base_env(home);
        let list = |ids: Vec<String>| ids.join(",");
        let slack_tokens = self.slack.tokens();
        env.extend(
            [
                ("RUST_LOG", "info".to_owned()),
                ("TELEGRAM_BOT_TOKEN", self.telegram.token().to_owned()),
                (
                    "TELEGRAM_ALLOWED_USERS",
                    list(
                        (0..self.users)
                            .map(|i| telegram_user(i).to_string())
                            .collect(),
                    ),
                ),
                ("DISCORD_BOT_TOKEN", DISCORD_TOKEN.to_owned()),
                (
                    "DISCORD_ALLOWED_USERS",
                    list(
                        self.discord_users
                            .iter()
                            .map(|u| u.user.id.clone())
                            .collect(),
                    ),
                ),
                ("SLACK_BOT_TOKEN", slack_tokens.bot),
                ("SLACK_APP_TOKEN", slack_tokens.app),
                (
                    "SLACK_ALLOWED_USERS",
                    list((0..self.users).map(|i| slack_user(i).0).collect()),
                ),
                ("API_SERVER_KEY", API_KEY.to_owned()),
                ("OPENAI_BASE_URL", self.model.base_url()),
                ("OPENAI_API_KEY", "sk-soak-model-key".to_owned()),
                ("HERMES__MODEL__PROVIDER", "openai".to_owned()),
                ("HERMES__MODEL__DEFAULT", "fake-model".to_owned()),
                ("HERMESD_ADAPTER_BACKOFF_SECS", "1".to_owned()),
                ("HERMESD_DRAIN_TIMEOUT_SECS", "10".to_owned()),
            ]
            .map(|(k, v)| (k.to_owned(), v)),
        );
        env
    }
}
