//! Several real `hermesd run` instances sharing one private PostgreSQL cluster, each in its
//! own home, all serving one fake Telegram bot in webhook mode (the test posts each update
//! to the instance it picks, or through `support::round_robin`) and answering through one
//! fake model; with [`ClusterRig::start_all_platforms`] also one fake Discord bot with two
//! shards and one fake Slack app (a Socket Mode connection per instance). Included with
//! `#[path]` by `tests/cluster_*.rs` (it needs the platform fake crates, which the shared
//! `support` module does not).
#![allow(dead_code)]

use std::time::Duration;

use fake_discord::{FakeDiscord, FakeUser};
use fake_slack::FakeSlack;
use fake_telegram::{FakeTelegram, SentMessage, TOKEN};
use serde_json::{Value, json};

use crate::support::daemon::{API_KEY, Daemon, base_env};
use crate::support::fake_model::FakeModel;
use crate::support::pg_proxy::PgProxy;
use crate::support::postgres::PgCluster;

/// Generous: other builders share this 2-core machine.
pub const WAIT: Duration = Duration::from_secs(90);
/// The webhook secret every instance checks.
pub const SECRET: &str = "cluster-webhook-secret-0123456789";
/// The first authorised Telegram user (a DM: chat id = user id).
pub const USER: i64 = 9001;
/// Every authorised user, [`USER`] first: one DM session each.
pub const USERS: [i64; 4] = [USER, 9002, 9003, 9004];

/// The Discord bot token every instance uses.
pub const DISCORD_TOKEN: &str = "cluster-discord-bot-token-7c1d";
/// The Discord shard count every instance is configured with.
pub const SHARDS: u64 = 2;
/// The authorised Slack users, each writing in a DM channel of their own.
pub const SLACK_USERS: [(&str, &str); 2] = [("U0OWNER", "D0OWNER"), ("U0FRIEND", "D0FRIEND")];

/// Discord and Slack next to Telegram ([`ClusterRig::start_all_platforms`]).
pub struct MorePlatforms {
    pub discord: FakeDiscord,
    /// The authorised Discord user.
    pub owner: FakeUser,
    /// A text channel in a guild of each shard: `channels[n]` is served by shard `n`.
    pub channels: Vec<String>,
    pub slack: FakeSlack,
}

/// One instance: its home, its process, its webhook endpoint.
pub struct Instance {
    pub name: String,
    pub home: tempfile::TempDir,
    pub daemon: Option<Daemon>,
    pub webhook: String,
    /// The fake Slack's id of this instance's Socket Mode connection (all platforms only).
    pub slack_socket: Option<u64>,
    /// The proxy between this instance and PostgreSQL ([`ClusterRig::start_proxied`] only).
    pub proxy: Option<PgProxy>,
    vars: Vec<(String, String)>,
}

impl Instance {
    pub fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect("instance running")
    }
}

/// The database, the fakes and the instances.
pub struct ClusterRig {
    pub pg: PgCluster,
    pub telegram: FakeTelegram,
    pub model: FakeModel,
    pub more: Option<MorePlatforms>,
    pub instances: Vec<Instance>,
    http: reqwest::Client,
    /// Whether each instance reaches PostgreSQL through a proxy of its own.
    proxied: bool,
}

impl ClusterRig {
    /// Starts the database, the fakes and `count` instances with `lease_seconds`.
    pub async fn start(count: usize, lease_seconds: f64) -> Self {
        Self::start_with(count, lease_seconds, "").await
    }

    /// As [`ClusterRig::start`], with `tail` appended to each instance's config.yaml.
    pub async fn start_with(count: usize, lease_seconds: f64, tail: &str) -> Self {
        Self::start_on(count, lease_seconds, tail, None, false, Vec::new()).await
    }

    /// As [`ClusterRig::start_with`], each instance reaching PostgreSQL through its own
    /// [`PgProxy`] (`instances[n].proxy`), for faults on one instance's database traffic
    /// (latency, stalls, traps) and round-trip counts.
    pub async fn start_proxied(count: usize, lease_seconds: f64, tail: &str) -> Self {
        Self::start_on(count, lease_seconds, tail, None, true, Vec::new()).await
    }

    /// As [`ClusterRig::start_proxied`], instance `n` also getting the environment variables
    /// `extra_env[n]` (kept across [`ClusterRig::restart`]), e.g. a shifted wall clock.
    pub async fn start_proxied_with_env(
        count: usize,
        lease_seconds: f64,
        tail: &str,
        extra_env: Vec<Vec<(String, String)>>,
    ) -> Self {
        Self::start_on(count, lease_seconds, tail, None, true, extra_env).await
    }

    /// Instance `n`'s proxy ([`ClusterRig::start_proxied`]).
    pub fn proxy(&self, n: usize) -> &PgProxy {
        self.instances[n].proxy.as_ref().expect("started proxied")
    }

    /// As [`ClusterRig::start_with`], every instance also serving a fake Discord bot
    /// (`discord.extra.shard_count: 2`, free response in two guilds, one per shard) and a
    /// fake Slack app. Returns once every shard is identified and every instance's Slack
    /// socket said hello.
    pub async fn start_all_platforms(count: usize, lease_seconds: f64, tail: &str) -> Self {
        let discord = FakeDiscord::start(DISCORD_TOKEN, Duration::from_secs(30)).await;
        let owner = discord.new_user("ada", false, &[]);
        let channels = (0..SHARDS)
            .map(|shard| {
                let guild = discord.add_guild_in_shard(&format!("guild{shard}"), shard, SHARDS);
                discord.add_text_channel_in(&guild, "general")
            })
            .collect();
        let more = MorePlatforms {
            discord,
            owner,
            channels,
            slack: FakeSlack::start().await,
        };
        let rig = Self::start_on(count, lease_seconds, tail, Some(more), false, Vec::new()).await;
        let more = rig.more.as_ref().expect("more platforms");
        more.slack
            .wait_within(WAIT, "a Slack socket per instance", |r| {
                (r.hellos() >= count).then_some(())
            })
            .await;
        more.discord
            .wait_for("every shard identified", |s| {
                (s.shard_sessions.len() as u64 == SHARDS).then_some(())
            })
            .await;
        rig
    }

    async fn start_on(
        count: usize,
        lease_seconds: f64,
        tail: &str,
        more: Option<MorePlatforms>,
        proxied: bool,
        extra_env: Vec<Vec<(String, String)>>,
    ) -> Self {
        let pg = tokio::task::spawn_blocking(PgCluster::start)
            .await
            .expect("start PostgreSQL");
        let telegram = FakeTelegram::start().await;
        let model = FakeModel::start().await;
        let mut rig = Self {
            pg,
            telegram,
            model,
            more,
            instances: Vec::new(),
            http: reqwest::Client::new(),
            proxied,
        };
        for n in 0..count {
            let extra = extra_env.get(n).cloned().unwrap_or_default();
            let instance = rig
                .start_instance(&format!("i{n}"), lease_seconds, tail, extra)
                .await;
            rig.instances.push(instance);
        }
        rig
    }

    async fn start_instance(
        &self,
        name: &str,
        lease_seconds: f64,
        tail: &str,
        extra_env: Vec<(String, String)>,
    ) -> Instance {
        let home = tempfile::tempdir().expect("temp home");
        let mut config = format!(
            "telegram:\n  enabled: true\n  extra:\n    base_url: \"{}\"\n\
             state:\n  backend: postgres\n  lease_seconds: {lease_seconds}\n  instance_id: {name}\n{tail}",
            self.telegram.url()
        );
        if let Some(more) = &self.more {
            config.push_str(&format!(
                "discord:\n  enabled: true\n  extra:\n    api_base_url: {}\n    gateway_url: {}\n    \
                 shard_count: {SHARDS}\n    require_mention: false\n    auto_thread: false\n\
                 slack:\n  enabled: true\n  extra:\n    api_base_url: {}\n",
                more.discord.api_base_url(),
                more.discord.gateway_url(),
                more.slack.api_base_url()
            ));
        }
        std::fs::write(home.path().join("config.yaml"), config).expect("write config.yaml");
        let proxy = match self.proxied {
            true => Some(PgProxy::start(self.pg.port()).await),
            false => None,
        };
        let database_url = match &proxy {
            Some(proxy) => proxy.url_for(&self.pg.url(), self.pg.port()),
            None => self.pg.url(),
        };
        let mut vars = base_env(home.path());
        vars.extend(
            [
                ("HERMES_DATABASE_URL", database_url),
                ("TELEGRAM_BOT_TOKEN", TOKEN.to_owned()),
                (
                    "TELEGRAM_ALLOWED_USERS",
                    USERS.map(|u| u.to_string()).join(","),
                ),
                (
                    "TELEGRAM_WEBHOOK_URL",
                    "https://bot.example.com/telegram/hook".to_owned(),
                ),
                ("TELEGRAM_WEBHOOK_SECRET", SECRET.to_owned()),
                ("TELEGRAM_WEBHOOK_HOST", "127.0.0.1".to_owned()),
                ("TELEGRAM_WEBHOOK_PORT", "0".to_owned()),
                ("API_SERVER_ENABLED", "true".to_owned()),
                ("API_SERVER_KEY", API_KEY.to_owned()),
                ("OPENAI_BASE_URL", self.model.base_url()),
                ("OPENAI_API_KEY", "sk-test".to_owned()),
                ("HERMES__MODEL__PROVIDER", "openai".to_owned()),
                ("HERMES__MODEL__DEFAULT", "fake-model".to_owned()),
            ]
            .map(|(k, v)| (k.to_owned(), v)),
        );
        if let Some(more) = &self.more {
            let tokens = more.slack.tokens();
            vars.extend(
                [
                    ("DISCORD_BOT_TOKEN", DISCORD_TOKEN.to_owned()),
                    ("DISCORD_ALLOWED_USERS", more.owner.id.clone()),
                    ("SLACK_BOT_TOKEN", tokens.bot),
                    ("SLACK_APP_TOKEN", tokens.app),
                    (
                        "SLACK_ALLOWED_USERS",
                        SLACK_USERS.map(|(user, _)| user).join(","),
                    ),
                ]
                .map(|(k, v)| (k.to_owned(), v)),
            );
        }
        vars.extend(extra_env);
        let (daemon, slack_socket) = self.launch(home.path(), &vars).await;
        let webhook = webhook_of(&daemon);
        Instance {
            name: name.to_owned(),
            home,
            daemon: Some(daemon),
            webhook,
            slack_socket,
            proxy,
            vars,
        }
    }

    /// Starts instance `n` again (after [`ClusterRig::kill9`]) on its home and settings; its
    /// webhook moves to the new process's port.
    pub async fn restart(&mut self, n: usize) {
        assert!(
            self.instances[n].daemon.is_none(),
            "instance {n} still runs"
        );
        let (daemon, slack_socket) = self
            .launch(self.instances[n].home.path(), &self.instances[n].vars)
            .await;
        self.instances[n].webhook = webhook_of(&daemon);
        self.instances[n].daemon = Some(daemon);
        self.instances[n].slack_socket = slack_socket;
    }

    /// Starts an instance; with all platforms, also waits for its Slack socket's hello
    /// and returns that connection's id.
    async fn launch(
        &self,
        home: &std::path::Path,
        vars: &[(String, String)],
    ) -> (Daemon, Option<u64>) {
        let Some(more) = &self.more else {
            return (launch(home, vars).await, None);
        };
        let before = more.slack.records().hellos();
        let daemon = launch(home, vars).await;
        more.slack
            .wait_within(WAIT, "the new instance's Slack socket", |r| {
                (r.hellos() > before).then_some(())
            })
            .await;
        (daemon, more.slack.newest_connection())
    }

    /// Runs `hermesd ARGS` on instance `n`'s home with that instance's settings (its
    /// database too), as its operator would on that machine; the instance need not run.
    pub fn cli(&self, n: usize, args: &[&str]) -> std::process::Output {
        std::process::Command::new(crate::support::daemon::HERMESD)
            .args(args)
            .env_clear()
            .envs(self.instances[n].vars.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("run hermesd")
    }

    /// Whether instance `n` runs.
    pub fn is_running(&self, n: usize) -> bool {
        self.instances[n].daemon.is_some()
    }

    /// Posts `text` from `user` as update `update_id` to instance `n`'s webhook, once: the
    /// status, or the connection error a load balancer would see for a dead backend.
    pub async fn post_as(
        &self,
        n: usize,
        update_id: i64,
        user: i64,
        text: &str,
    ) -> Result<u16, reqwest::Error> {
        self.post_update_to(&self.instances[n].webhook, update_id, user, text)
            .await
    }

    /// Posts `text` as Telegram update `update_id` from the user to instance `n`'s webhook;
    /// returns the HTTP status. A 503 (the adapter is not serving yet) is retried, as
    /// Telegram retries an unsuccessful webhook delivery
    /// (https://core.telegram.org/bots/api#setwebhook), within a bounded wait.
    pub async fn post(&self, n: usize, update_id: i64, text: &str) -> u16 {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let status = self
                .post_as(n, update_id, USER, text)
                .await
                .expect("POST the update");
            if status != 503 || tokio::time::Instant::now() >= deadline {
                if status != 200 {
                    eprintln!("webhook answered {status}; logs: {:#?}", self.all_logs());
                }
                return status;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A chat completion through instance `n`'s HTTP API (conversation `conversation`).
    pub async fn api_chat(&self, n: usize, conversation: &str, text: &str) -> Value {
        let base = self.instances[n].daemon().api_url();
        self.api_chat_at(&base, conversation, text).await.1
    }

    /// The webhook endpoint's base URL (scheme, host, port) of instance `n`.
    pub fn webhook_base(&self, n: usize) -> String {
        let url = &self.instances[n].webhook;
        url.strip_suffix(WEBHOOK_PATH).unwrap_or(url).to_owned()
    }

    /// Posts `text` from `user` as update `update_id` to `url` (a balancer in front of
    /// the webhooks), once: the status, or the connection error.
    pub async fn post_update_to(
        &self,
        url: &str,
        update_id: i64,
        user: i64,
        text: &str,
    ) -> Result<u16, reqwest::Error> {
        post_update(&self.http, url, update_id, user, text).await
    }

    /// A chat completion (conversation `conversation`) through `base` (an instance's or a
    /// balancer's API address); the HTTP status and the JSON answer.
    pub async fn api_chat_at(&self, base: &str, conversation: &str, text: &str) -> (u16, Value) {
        let response = self
            .http
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(API_KEY)
            .header("X-Hermes-Session-Id", conversation)
            .json(&json!({"model": "hermes-agent",
                "messages": [{"role": "user", "content": text}]}))
            .send()
            .await
            .expect("POST a chat completion");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// The bot's messages to every chat, in order.
    pub fn sent_to_anyone(&self) -> Vec<SentMessage> {
        self.telegram.sent_messages()
    }

    /// The bot's messages to the user, in order.
    pub fn sent(&self) -> Vec<SentMessage> {
        self.telegram
            .sent_messages()
            .into_iter()
            .filter(|m| m.chat_id == USER)
            .collect()
    }

    /// Waits (bounded) until the user has at least `n` messages; returns them.
    pub async fn wait_sent(&self, n: usize) -> Vec<SentMessage> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            // Armed before looking, so a call answered while we look ends the wait below at
            // once. (`sent()` lists answered calls; the fake logs a send before answering it,
            // so waiting on the send count could miss the answer that completes `sent()`.)
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            let change = self.telegram.next_change(remaining);
            let sent = self.sent();
            if sent.len() >= n {
                return sent;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{n} replies never came; got {sent:#?}\nlogs: {:#?}",
                self.all_logs()
            );
            change.await;
        }
    }

    /// Every running instance's log, by name.
    pub fn all_logs(&self) -> Vec<(String, Vec<String>)> {
        self.instances
            .iter()
            .filter_map(|i| i.daemon.as_ref().map(|d| (i.name.clone(), d.logs())))
            .collect()
    }

    /// kill -9 of instance `n`.
    pub fn kill9(&mut self, n: usize) {
        let daemon = self.instances[n].daemon.take().expect("running");
        daemon.kill9();
    }

    /// SIGSTOP / SIGCONT of instance `n`.
    pub fn signal(&self, n: usize, signal: &str) {
        let pid = self.instances[n].daemon().pid().to_string();
        let status = std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// A SQL count in the shared database.
    pub async fn count(&self, sql: &'static str) -> i64 {
        let pool = sqlx::postgres::PgPool::connect(&self.pg.url())
            .await
            .expect("connect");
        let n: i64 = sqlx::query_scalar(sql)
            .fetch_one(&pool)
            .await
            .expect("count");
        pool.close().await;
        n
    }

    /// SIGTERM to every instance still running; asserts clean exits.
    pub async fn stop(mut self) {
        for instance in &mut self.instances {
            if let Some(daemon) = instance.daemon.take() {
                let (status, logs) = tokio::task::spawn_blocking(move || daemon.terminate())
                    .await
                    .expect("terminate");
                assert_eq!(status.code(), Some(0), "{}: {logs:#?}", instance.name);
            }
        }
    }
}

/// Starts `hermesd run` on `home` with `vars` (blocking work, off the runtime).
async fn launch(home: &std::path::Path, vars: &[(String, String)]) -> Daemon {
    let (path, env) = (home.to_path_buf(), vars.to_vec());
    tokio::task::spawn_blocking(move || Daemon::start(&path, &env))
        .await
        .expect("start an instance")
}

/// The path of the Telegram webhook on every instance.
pub const WEBHOOK_PATH: &str = "/telegram/hook";

/// Posts `text` from `user` as update `update_id` to the webhook at `url`, once: the
/// status, or the connection error.
pub async fn post_update(
    http: &reqwest::Client,
    url: &str,
    update_id: i64,
    user: i64,
    text: &str,
) -> Result<u16, reqwest::Error> {
    Ok(http
        .post(url)
        .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
        .json(&update_of(update_id, user, text))
        .send()
        .await?
        .status()
        .as_u16())
}

/// A Telegram update: a DM of `text` from `user`.
fn update_of(update_id: i64, user: i64, text: &str) -> Value {
    json!({"update_id": update_id, "message": {
        "message_id": 1000 + update_id, "date": 1_700_000_000,
        "chat": {"id": user, "type": "private", "first_name": "Ada"},
        "from": {"id": user, "is_bot": false, "first_name": "Ada"},
        "text": text}})
}

/// The webhook URL a started instance serves, from its start-up log.
fn webhook_of(daemon: &Daemon) -> String {
    let line = daemon
        .logs()
        .into_iter()
        .find(|l| l.contains("webhook endpoint listening"))
        .expect("the webhook endpoint is served before start-up completes");
    let port: String = line
        .split("127.0.0.1:")
        .nth(1)
        .expect("bound address in the log")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    format!("http://127.0.0.1:{port}{WEBHOOK_PATH}")
}

/// The base64 images a model request carries (chat completions' `image_url` parts).
pub fn images_in(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter_map(|part| part["image_url"]["url"].as_str())
        .filter_map(|url| url.split_once(";base64,").map(|(_, data)| data.to_owned()))
        .collect()
}
