//! The Discord end-to-end rig: a wire-level fake Discord, the fake model and the REAL
//! `hermesd run` binary pointed at both through `discord.extra.api_base_url` /
//! `gateway_url`. Tests wait on the fake's change notifications (never sleep) and read
//! what the daemon sent from the fake's recorded REST calls.
#![allow(dead_code)]

use std::time::Duration;

use fake_discord::{FakeDiscord, FakeUser, Incoming, RestCall};
use serde_json::Value;

use crate::support::daemon::{Daemon, base_env};
use crate::support::fake_model::FakeModel;

pub const TOKEN: &str = "discord-e2e-bot-token-5e1f0c2a";
pub const CREATE_MESSAGE: &str = "POST /channels/{id}/messages";
pub const START_THREAD: &str = "POST /channels/{id}/messages/{id}/threads";
pub const MODIFY_CHANNEL: &str = "PATCH /channels/{id}";
pub const INTERACTION_CALLBACK: &str = "POST /interactions/{id}/{token}/callback";
pub const EDIT_ORIGINAL: &str = "PATCH /webhooks/{id}/{token}/messages/@original";
pub const TYPING: &str = "POST /channels/{id}/typing";

pub struct Rig {
    pub fake: FakeDiscord,
    pub model: FakeModel,
    pub home: tempfile::TempDir,
    /// The allowed user (DISCORD_ALLOWED_USERS).
    pub owner: FakeUser,
    pub bot: FakeUser,
    pub env: Vec<(String, String)>,
    pub daemon: Option<Daemon>,
}

impl Rig {
    /// The fakes and a home; the daemon is started by [`Rig::launch`] (so channels can be
    /// created first and named in the env).
    pub async fn new(heartbeat: Duration) -> Rig {
        let fake = FakeDiscord::start(TOKEN, heartbeat).await;
        let model = FakeModel::start().await;
        let home = tempfile::tempdir().expect("home");
        let owner = fake.new_user("ada", false, &[]);
        let bot = fake.bot_user();
        std::fs::write(
            home.path().join("config.yaml"),
            format!(
                "discord:\n  enabled: true\n  extra:\n    api_base_url: {}\n    gateway_url: {}\n",
                fake.api_base_url(),
                fake.gateway_url()
            ),
        )
        .expect("config.yaml");
        let mut env = base_env(home.path());
        env.extend(
            [
                ("DISCORD_BOT_TOKEN", TOKEN.to_owned()),
                ("DISCORD_ALLOWED_USERS", owner.id.clone()),
                ("API_SERVER_ENABLED", "false".to_owned()),
                ("OPENAI_BASE_URL", model.base_url()),
                ("OPENAI_API_KEY", "sk-test-discord-e2e".to_owned()),
                ("HERMES__MODEL__PROVIDER", "openai".to_owned()),
                ("HERMES__MODEL__DEFAULT", "fake-model".to_owned()),
            ]
            .map(|(k, v)| (k.to_owned(), v)),
        );
        Rig {
            fake,
            model,
            home,
            owner,
            bot,
            env,
            daemon: None,
        }
    }

    /// Adds `key: value` to `discord.extra` in config.yaml (before [`Rig::launch`]).
    pub fn add_extra(&self, key: &str, value: &str) {
        let path = self.home.path().join("config.yaml");
        let mut yaml = std::fs::read_to_string(&path).expect("config.yaml");
        yaml.push_str(&format!("    {key}: {value}\n"));
        std::fs::write(&path, yaml).expect("config.yaml");
    }

    /// Appends top-level YAML to config.yaml (before [`Rig::launch`]).
    pub fn append_config(&self, yaml: &str) {
        let path = self.home.path().join("config.yaml");
        let mut text = std::fs::read_to_string(&path).expect("config.yaml");
        text.push_str(yaml);
        std::fs::write(&path, text).expect("config.yaml");
    }

    pub fn set_env(&mut self, name: &str, value: &str) {
        self.env.retain(|(k, _)| k != name);
        self.env.push((name.to_owned(), value.to_owned()));
    }

    /// Starts the daemon and waits until it identified (or resumed) on the fake gateway.
    pub async fn launch(&mut self) {
        let sessions_before = self.fake.frames_with_op(2).len();
        let (home, env) = (self.home.path().to_path_buf(), self.env.clone());
        let daemon = tokio::task::spawn_blocking(move || Daemon::start(&home, &env))
            .await
            .expect("daemon start");
        self.daemon = Some(daemon);
        self.fake.wait_for_frames(2, sessions_before + 1).await;
    }

    /// SIGTERM; asserts a clean exit and that the token never reached the logs.
    pub async fn stop(&mut self) -> Vec<String> {
        let daemon = self.daemon.take().expect("a running daemon");
        let (status, logs) = tokio::task::spawn_blocking(move || daemon.terminate())
            .await
            .expect("terminate");
        assert_eq!(status.code(), Some(0), "{logs:#?}");
        assert!(
            !logs.join("\n").contains(TOKEN),
            "the bot token never reaches the logs"
        );
        logs
    }

    pub fn logs(&self) -> Vec<String> {
        self.daemon.as_ref().map(Daemon::logs).unwrap_or_default()
    }

    pub fn dm(&self, user: &FakeUser) -> String {
        self.fake.add_dm_channel(user)
    }

    /// `user` writes `text` in `channel`.
    pub fn say(&self, channel: &str, user: &FakeUser, text: &str) -> String {
        self.fake.push_message(Incoming::new(channel, user, text))
    }

    /// `user` writes `<@bot> text` in `channel`, the mention resolved as Discord does.
    pub fn mention(&self, channel: &str, user: &FakeUser, text: &str) -> String {
        let content = format!("<@{}> {text}", self.bot.id);
        self.fake
            .push_message(Incoming::new(channel, user, &content).mentioning(&self.bot))
    }

    /// Successful message creations in `channel`, in order.
    pub fn sent_to(&self, channel: &str) -> Vec<RestCall> {
        self.fake.read(|s| sent_in(&s.calls, channel))
    }

    pub fn texts_in(&self, channel: &str) -> Vec<String> {
        self.sent_to(channel).iter().map(content).collect()
    }

    /// Waits until `channel` got at least `n` messages; returns their texts.
    pub async fn wait_texts(&self, channel: &str, n: usize) -> Vec<String> {
        self.fake
            .wait_for(&format!("{n} messages in channel {channel}"), |s| {
                let texts: Vec<String> = sent_in(&s.calls, channel).iter().map(content).collect();
                (texts.len() >= n).then_some(texts)
            })
            .await
    }

    /// The last user text of every conversation request the model received.
    pub fn model_saw(&self) -> Vec<String> {
        self.model
            .requests()
            .iter()
            .map(|r| last_user_text(&r.body))
            .collect()
    }
}

fn sent_in(calls: &[RestCall], channel: &str) -> Vec<RestCall> {
    let path = format!("/api/v10/channels/{channel}/messages");
    calls
        .iter()
        .filter(|c| c.route == CREATE_MESSAGE && c.path == path && c.status < 300)
        .cloned()
        .collect()
}

pub fn content(call: &RestCall) -> String {
    call.body["content"].as_str().unwrap_or_default().to_owned()
}

pub fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

/// Every (role, text) of a conversation request, system prompt excluded.
pub fn conversation(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

impl Drop for Rig {
    /// A failing test shows what the daemon logged and what the fake recorded.
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- daemon log ----\n{}", self.logs().join("\n"));
            let calls: Vec<String> = self.fake.read(|s| {
                s.calls
                    .iter()
                    .map(|c| format!("{} {} {} {}", c.status, c.method, c.path, c.body))
                    .collect()
            });
            eprintln!("---- fake discord calls ----\n{}", calls.join("\n"));
        }
    }
}
