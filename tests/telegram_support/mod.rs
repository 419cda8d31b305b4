//! What the Telegram end-to-end tests share: the real `hermesd run` binary polling a
//! wire-level fake Bot API and answering through the fake model, and waits that block on
//! the fake's change notifications (never on sleeps). Included with `#[path]` by each
//! `tests/telegram_*.rs` file, so it is not a test target of its own.
#![allow(dead_code)]

use std::time::Duration;

use fake_telegram::{FakeTelegram, SentMessage, TOKEN};

use crate::support::daemon::{Daemon, base_env};
use crate::support::fake_model::FakeModel;

/// Generous: other builders share this 2-core machine.
pub const WAIT: Duration = Duration::from_secs(60);

/// One daemon with its fakes and home; dropping it kills the daemon.
pub struct Rig {
    pub telegram: FakeTelegram,
    pub model: FakeModel,
    pub home: tempfile::TempDir,
    pub daemon: Option<Daemon>,
    /// The daemon's environment, to start it again on the same home.
    vars: Vec<(String, String)>,
}

/// Starts the fakes and the daemon. `extra` is YAML for `telegram.extra` (one key per
/// line, unindented), `tail` is appended to config.yaml at the top level, `env` adds to
/// the environment. Users 7, 8 and 9001 are authorised (`TELEGRAM_ALLOWED_USERS`).
pub async fn start(extra: &str, tail: &str, env: &[(&str, &str)]) -> Rig {
    start_at(|url| url.to_owned(), extra, tail, env).await
}

/// As [`start`], with `telegram.extra.base_url` computed from the fake's address.
pub async fn start_at(
    base_url: impl FnOnce(&str) -> String,
    extra: &str,
    tail: &str,
    env: &[(&str, &str)],
) -> Rig {
    start_inner(base_url, |_| {}, extra, tail, env).await
}

/// As [`start`], with `prepare` run on the home after config.yaml is written and before
/// the daemon starts (files the daemon reads at start-up).
pub async fn start_prepared(
    prepare: impl FnOnce(&std::path::Path),
    extra: &str,
    tail: &str,
    env: &[(&str, &str)],
) -> Rig {
    start_inner(|url| url.to_owned(), prepare, extra, tail, env).await
}

async fn start_inner(
    base_url: impl FnOnce(&str) -> String,
    prepare: impl FnOnce(&std::path::Path),
    extra: &str,
    tail: &str,
    env: &[(&str, &str)],
) -> Rig {
    let telegram = FakeTelegram::start().await;
    let base_url = base_url(&telegram.url());
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().expect("temp home");
    let extra: String = extra
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("    {l}\n"))
        .collect();
    let config = format!(
        "telegram:\n  enabled: true\n  extra:\n    base_url: \"{base_url}\"\n    poll_timeout_seconds: 1\n{extra}{tail}"
    );
    std::fs::write(home.path().join("config.yaml"), config).expect("write config.yaml");
    prepare(home.path());
    let mut vars = daemon_env(home.path(), &model);
    for (k, v) in env {
        vars.retain(|(key, _)| key != k);
        vars.push(((*k).to_owned(), (*v).to_owned()));
    }
    let path = home.path().to_path_buf();
    let env = vars.clone();
    let daemon = tokio::task::spawn_blocking(move || Daemon::start(&path, &env))
        .await
        .expect("start daemon");
    Rig {
        telegram,
        model,
        home,
        daemon: Some(daemon),
        vars,
    }
}

/// The environment of a daemon on `home` polling the fake Bot API with its token and
/// answering through `model`; users 7, 8 and 9001 are authorised.
pub fn daemon_env(home: &std::path::Path, model: &FakeModel) -> Vec<(String, String)> {
    let mut vars = base_env(home);
    vars.extend(
        [
            ("TELEGRAM_BOT_TOKEN", TOKEN.to_owned()),
            ("TELEGRAM_ALLOWED_USERS", "7,8,9001".to_owned()),
            ("API_SERVER_ENABLED", "false".to_owned()),
            ("OPENAI_BASE_URL", model.base_url()),
            ("OPENAI_API_KEY", "sk-test".to_owned()),
            ("HERMES__MODEL__PROVIDER", "openai".to_owned()),
            ("HERMES__MODEL__DEFAULT", "fake-model".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    vars
}

impl Rig {
    /// SIGKILLs the daemon (no shutdown at all) and starts a new one on the same home.
    pub async fn crash_and_restart(&mut self) {
        let daemon = self.daemon.take().expect("daemon running");
        tokio::task::spawn_blocking(move || daemon.kill9())
            .await
            .expect("kill -9");
        let (path, env) = (self.home.path().to_path_buf(), self.vars.clone());
        let daemon = tokio::task::spawn_blocking(move || Daemon::start(&path, &env))
            .await
            .expect("restart daemon");
        self.daemon = Some(daemon);
    }

    pub fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect("daemon running")
    }

    /// Waits until `check` returns `Some`, re-checking whenever the fake sees a call or
    /// answers one; panics with `what` and the daemon's log after [`WAIT`].
    pub async fn wait_for<T>(&self, what: &str, mut check: impl FnMut(&Self) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            // Subscribed before checking, so a change in between is not missed.
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let change = self.telegram.next_change(left);
            if let Some(found) = check(self) {
                return found;
            }
            if !change.await {
                panic!(
                    "timed out waiting for {what}; sent {:#?}; daemon log {:#?}",
                    self.telegram.sent_messages(),
                    self.daemon().logs()
                );
            }
        }
    }

    /// Messages the bot sent to `chat` (accepted by the fake), in order.
    pub fn sent_to(&self, chat: i64) -> Vec<SentMessage> {
        self.telegram
            .sent_messages()
            .into_iter()
            .filter(|m| m.chat_id == chat)
            .collect()
    }

    /// Waits until `chat` has received at least `n` messages; returns them all.
    pub async fn wait_sent_to(&self, chat: i64, n: usize) -> Vec<SentMessage> {
        self.wait_for(&format!("{n} messages to chat {chat}"), |rig| {
            let sent = rig.sent_to(chat);
            (sent.len() >= n).then_some(sent)
        })
        .await
    }

    /// Waits until a `getUpdates` offset has passed `update_id`: the adapter has disposed
    /// of it (recorded, or dropped by gating) and can never hand it over again.
    pub async fn wait_confirmed(&self, update_id: i64) {
        self.wait_for(&format!("update {update_id} confirmed"), |rig| {
            (rig.telegram.confirmed_offset() > update_id).then_some(())
        })
        .await;
    }

    /// The user texts of the last user message of every model request so far.
    pub fn model_saw(&self) -> Vec<String> {
        self.model
            .requests()
            .iter()
            .map(|r| last_user_text(&r.body))
            .collect()
    }

    /// Every distinct tool result the model was sent, in order (a result is repeated in
    /// every later request of its turn; call ids repeat across turns, so both are compared).
    pub fn tool_results(&self) -> Vec<String> {
        let mut seen: Vec<(String, String)> = Vec::new();
        for request in self.model.requests() {
            for message in request.body["messages"].as_array().into_iter().flatten() {
                if message["role"] != "tool" {
                    continue;
                }
                let id = message["tool_call_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let content = match &message["content"] {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                if !seen.iter().any(|(i, c)| *i == id && *c == content) {
                    seen.push((id, content));
                }
            }
        }
        seen.into_iter().map(|(_, c)| c).collect()
    }

    /// Sends `text` from user `id` in their private chat and waits for a later reply there
    /// containing `needle`.
    pub async fn say_privately(&self, id: i64, text: &str, needle: &str) {
        let before = self.sent_to(id).len();
        self.telegram.push_message(fake_telegram::MessageSpec::text(
            fake_telegram::Chat::private(id),
            fake_telegram::User::new(id, "Person"),
            text,
        ));
        self.wait_for(&format!("{needle:?} in chat {id}"), |rig| {
            rig.sent_to(id)
                .into_iter()
                .skip(before)
                .find(|m| m.text.contains(needle))
        })
        .await;
    }

    /// Every model request's whole message list, as one string each.
    pub fn model_transcripts(&self) -> Vec<String> {
        self.model
            .requests()
            .iter()
            .map(|r| r.body["messages"].to_string())
            .collect()
    }

    /// SIGTERM, asserting a clean exit; the fakes and the home stay. Returns the log.
    pub async fn stop_daemon(&mut self) -> Vec<String> {
        let daemon = self.daemon.take().expect("daemon running");
        let (status, logs) = tokio::task::spawn_blocking(move || daemon.terminate())
            .await
            .expect("terminate");
        assert_eq!(status.code(), Some(0), "{logs:#?}");
        logs
    }

    /// Starts the daemon again on the same home and fakes (after [`Rig::stop_daemon`]).
    pub async fn start_daemon(&mut self) {
        let (path, vars) = (self.home.path().to_path_buf(), self.vars.clone());
        let daemon = tokio::task::spawn_blocking(move || Daemon::start(&path, &vars))
            .await
            .expect("start daemon");
        self.daemon = Some(daemon);
    }

    /// SIGTERM; asserts a clean exit and that the bot token never reached the log.
    pub async fn stop(mut self) -> Vec<String> {
        let daemon = self.daemon.take().expect("daemon running");
        let (status, logs) = tokio::task::spawn_blocking(move || daemon.terminate())
            .await
            .expect("terminate");
        assert_eq!(status.code(), Some(0), "{logs:#?}");
        assert!(
            !logs.join("\n").contains(TOKEN),
            "the token never reaches the logs"
        );
        logs
    }
}

/// The text of the last `user` message in a chat-completions request body.
pub fn last_user_text(body: &serde_json::Value) -> String {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let Some(last) = messages.iter().rev().find(|m| m["role"] == "user") else {
        return String::new();
    };
    match &last["content"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}
