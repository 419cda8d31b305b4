//! The harness the Slack end-to-end tests share: the real `hermesd run` binary with Slack
//! enabled against a wire-level fake Slack (`tests/fake-slack`: Web API + Socket Mode) and
//! the fake model, in a temp home. Tests push envelopes through the fake and wait on what it
//! recorded (posted messages, acks, socket timeline) — never on a clock.
//!
//! Why one harness: every Slack scenario needs the same wiring (config pointing
//! `slack.extra.api_base_url` at the fake, both tokens, an allowlist, the fake model), and
//! the same exact observables (which channel/thread got which text, what the model saw).
#![allow(dead_code)]

use std::time::Duration;

use fake_slack::{FakeSlack, Posted, Pushed, events};
use serde_json::Value;

use crate::support::daemon::{Daemon, base_env};
use crate::support::fake_model::{FakeModel, RecordedRequest};

/// Bound on every wait: a debug binary on a loaded 2-core machine is slow, never stuck.
pub const WAIT: Duration = Duration::from_secs(60);
/// The authorised user (`SLACK_ALLOWED_USERS`).
pub const OWNER: &str = "U0OWNER";
/// A second authorised user.
pub const FRIEND: &str = "U0FRIEND";
/// A user nobody authorised.
pub const STRANGER: &str = "U0STRANGER";
/// The bot's mention as Slack writes it.
pub const MENTION: &str = "<@UBOT>";

/// One daemon talking to one fake Slack and one fake model.
pub struct SlackRun {
    pub slack: FakeSlack,
    pub model: FakeModel,
    pub daemon: Option<Daemon>,
    pub home: tempfile::TempDir,
    pub env: Vec<(String, String)>,
}

impl SlackRun {
    /// Starts the daemon with `extra` lines under `slack.extra` (YAML `key: value`) and
    /// `env` on top of the defaults, and waits for its first Socket Mode hello.
    pub async fn start(extra: &[(&str, &str)], env: &[(&str, &str)]) -> SlackRun {
        let slack = FakeSlack::start().await;
        let model = FakeModel::start().await;
        let home = tempfile::tempdir().expect("temp home");
        let mut yaml = format!(
            "slack:\n  enabled: true\n  extra:\n    api_base_url: {}\n",
            slack.api_base_url()
        );
        for (key, value) in extra {
            yaml.push_str(&format!("    {key}: {value}\n"));
        }
        std::fs::write(home.path().join("config.yaml"), yaml).expect("write config.yaml");
        let tokens = slack.tokens();
        let mut full_env = base_env(home.path());
        full_env.extend(
            [
                ("SLACK_BOT_TOKEN", tokens.bot.as_str()),
                ("SLACK_APP_TOKEN", tokens.app.as_str()),
                ("SLACK_ALLOWED_USERS", &format!("{OWNER},{FRIEND}")),
                ("API_SERVER_ENABLED", "false"),
                ("OPENAI_BASE_URL", &model.base_url()),
                ("OPENAI_API_KEY", "sk-test-model-key"),
                ("HERMES__MODEL__PROVIDER", "openai"),
                ("HERMES__MODEL__DEFAULT", "fake-model"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        for (key, value) in env {
            full_env.retain(|(k, _)| k != key);
            full_env.push(((*key).to_owned(), (*value).to_owned()));
        }
        let mut run = SlackRun {
            slack,
            model,
            daemon: None,
            home,
            env: full_env,
        };
        run.launch(1).await;
        run
    }

    /// Starts the binary (again) and waits until `hellos` sockets have said hello in total.
    pub async fn launch(&mut self, hellos: usize) {
        let (home, env) = (self.home.path().to_path_buf(), self.env.clone());
        let daemon = tokio::task::spawn_blocking(move || Daemon::start(&home, &env))
            .await
            .expect("start hermesd");
        self.daemon = Some(daemon);
        self.wait_for_hellos(hellos).await;
    }

    pub fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect("daemon running")
    }

    pub async fn wait_for_hellos(&self, count: usize) {
        self.slack
            .wait_within(WAIT, &format!("{count} socket hello(s)"), |r| {
                (r.hellos() >= count).then_some(())
            })
            .await;
    }

    /// Waits until `channel` has at least `count` posted messages; returns all of them.
    pub async fn posts_in(&self, channel: &str, count: usize) -> Vec<Posted> {
        self.slack
            .wait_within(
                WAIT,
                &format!("{count} message(s) posted in {channel}"),
                |r| {
                    let posts: Vec<Posted> = r
                        .posted
                        .iter()
                        .filter(|p| p.channel == channel)
                        .cloned()
                        .collect();
                    (posts.len() >= count).then_some(posts)
                },
            )
            .await
    }

    /// Waits for the next message posted in `channel` after the first `seen`; returns it.
    pub async fn next_post(&self, channel: &str, seen: usize) -> Posted {
        self.posts_in(channel, seen + 1).await[seen].clone()
    }

    pub fn posts(&self, channel: &str) -> Vec<Posted> {
        self.slack
            .posted()
            .into_iter()
            .filter(|p| p.channel == channel)
            .collect()
    }

    pub async fn wait_for_ack(&self, pushed: &Pushed) {
        let id = pushed.envelope_id.clone();
        self.slack
            .wait_within(WAIT, &format!("ack of {id}"), |r| {
                r.acks.iter().any(|a| a.envelope_id == id).then_some(())
            })
            .await;
    }

    /// Waits until the delivery `pushed` began is acked: its envelope, or Slack's own
    /// retry of it (an envelope written to a socket the daemon was closing is never read
    /// there; Slack retries it, on another connection when one is open).
    pub async fn wait_for_delivery_ack(&self, pushed: &Pushed) {
        let id = pushed.envelope_id.clone();
        self.slack
            .wait_within(WAIT, &format!("ack of the delivery of {id}"), |r| {
                r.delivery_acked(&id).then_some(())
            })
            .await;
    }

    /// Waits until the daemon has called `method` (a Web API method, or `file.download`).
    pub async fn wait_for_call(&self, method: &str) {
        self.slack
            .wait_within(WAIT, &format!("a {method} call"), |r| {
                r.calls.iter().any(|c| c.method == method).then_some(())
            })
            .await;
    }

    /// A DM from `user` in `channel`; returns the push and the message ts.
    pub fn dm(&self, channel: &str, user: &str, text: &str) -> (Pushed, String) {
        let ts = self.slack.next_ts();
        (
            self.slack.push_event(events::dm(channel, user, text, &ts)),
            ts,
        )
    }

    /// A DM reply in the DM thread rooted at `thread_ts`.
    pub fn dm_in_thread(&self, channel: &str, user: &str, text: &str, thread_ts: &str) -> Pushed {
        let ts = self.slack.next_ts();
        let mut event = events::dm(channel, user, text, &ts);
        event["thread_ts"] = Value::String(thread_ts.to_owned());
        self.slack.push_event(event)
    }

    /// A channel message mentioning the bot, delivered as Slack does: the `message` event
    /// and the `app_mention` event for the same ts. Returns the ts.
    pub fn mention(&self, channel: &str, user: &str, text: &str) -> String {
        let ts = self.slack.next_ts();
        let text = format!("{MENTION} {text}");
        self.slack
            .push_event(events::channel_message(channel, user, &text, &ts));
        self.slack
            .push_event(events::app_mention(channel, user, &text, &ts));
        ts
    }

    /// A reply in the channel thread rooted at `thread_ts`.
    pub fn thread_reply(&self, channel: &str, user: &str, text: &str, thread_ts: &str) -> Pushed {
        let ts = self.slack.next_ts();
        self.slack
            .push_event(events::thread_reply(channel, user, text, &ts, thread_ts))
    }

    /// Waits until the daemon's delivery ledger recorded the reply to `pushed` as
    /// delivered (a `kill -9` after this resends nothing). Needs
    /// `RUST_LOG=info,hermesd::gateway::router::respond=debug`.
    pub async fn wait_until_delivered(&self, pushed: &Pushed) {
        let event_id = pushed.event_id.clone();
        let daemon = self.daemon();
        let found = tokio::task::block_in_place(|| {
            daemon.wait_for_line_where(
                |l| l.contains("reply delivered") && l.contains(&event_id),
                WAIT,
            )
        });
        assert!(
            found.is_some(),
            "the reply to {event_id} was never marked delivered"
        );
    }

    /// Every model request so far.
    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        self.model.requests()
    }

    /// SIGTERM; asserts a clean exit and that no token reached the logs.
    pub async fn stop(mut self) {
        let daemon = self.daemon.take().expect("daemon running");
        let (status, logs) = tokio::task::spawn_blocking(move || daemon.terminate())
            .await
            .expect("terminate");
        assert_eq!(status.code(), Some(0), "{logs:#?}");
        let all = logs.join("\n");
        let tokens = self.slack.tokens();
        assert!(!all.contains(&tokens.bot), "the bot token reached the logs");
        assert!(!all.contains(&tokens.app), "the app token reached the logs");
        assert!(
            self.slack.records().unexpected.is_empty(),
            "calls the fake does not know: {:?}",
            self.slack.records().unexpected
        );
    }
}

/// The user and assistant turns the model saw in `request`, as `role: text` lines (system
/// prompt and tool plumbing left out).
pub fn conversation(request: &RecordedRequest) -> Vec<String> {
    request.body["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter(|m| m["role"] == "user" || m["role"] == "assistant")
                .filter_map(|m| {
                    let text = match &m["content"] {
                        Value::String(s) => s.clone(),
                        Value::Array(parts) => parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<Vec<_>>()
                            .join(""),
                        _ => return None,
                    };
                    Some(format!("{}: {text}", m["role"].as_str().unwrap_or("")))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The last user text the model saw in `request`.
pub fn last_user_text(request: &RecordedRequest) -> String {
    conversation(request)
        .iter()
        .rev()
        .find_map(|line| line.strip_prefix("user: ").map(str::to_owned))
        .unwrap_or_default()
}
