//! The steady mixed load: per platform, `users` simulated users, each writing its next
//! message a seeded 1–4 s after the previous one was answered (as people do; a user never
//! has two messages in flight, so Hermes's busy handling never merges or interrupts
//! them), plus two HTTP API clients. A user whose reply does not come within
//! `GIVE_UP` moves on; the message stays in the ledger and counts as lost unless a reply
//! arrives by the end.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fake_discord::Incoming;
use fake_telegram::{Chat, User};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::incarnations::Supervisor;
use crate::ledger::{Ledger, Platform};
use crate::world::{self, World};

const GIVE_UP: Duration = Duration::from_secs(90);

/// The last Slack envelope pushed (a duplicate-delivery fault resends it).
#[derive(Debug, Default)]
pub struct LastSlackEnvelope(pub std::sync::Mutex<Option<String>>);

/// HTTP API outcomes.
#[derive(Debug, Default)]
pub struct ApiCounts {
    pub sent: AtomicU64,
    pub ok: AtomicU64,
    /// The connection failed or dropped (the daemon was being killed or restarted).
    pub connection_errors: AtomicU64,
    /// An HTTP error status or a reply without the request's token.
    pub bad: AtomicU64,
}

impl ApiCounts {
    pub fn to_json(&self) -> Value {
        json!({
            "sent": self.sent.load(Ordering::Relaxed),
            "ok": self.ok.load(Ordering::Relaxed),
            "connection_errors_around_kills": self.connection_errors.load(Ordering::Relaxed),
            "bad": self.bad.load(Ordering::Relaxed),
        })
    }
}

fn push(
    world: &World,
    last_slack: &LastSlackEnvelope,
    platform: Platform,
    user: usize,
    text: &str,
) {
    match platform {
        Platform::Telegram => {
            let id = world::telegram_user(user);
            world.telegram.push_text(
                Chat::private(id),
                User::new(id, &format!("soaker{user}")),
                text,
            );
        }
        Platform::Discord => {
            let who = &world.discord_users[user];
            world
                .discord
                .push_message(Incoming::new(&who.channel, &who.user, text));
        }
        Platform::Slack => {
            let (user_id, channel) = world::slack_user(user);
            let ts = world.slack.next_ts();
            let pushed = world
                .slack
                .push_event(fake_slack::events::dm(&channel, &user_id, text, &ts));
            *last_slack.0.lock().unwrap() = Some(pushed.envelope_id);
        }
    }
}

/// One user's loop until `stop`.
pub async fn user(
    world: Arc<World>,
    ledger: Arc<Ledger>,
    last_slack: Arc<LastSlackEnvelope>,
    platform: Platform,
    user: usize,
    seed: u64,
    stop: CancellationToken,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut changes = ledger.changed.subscribe();
    for seq in 0.. {
        let think = Duration::from_millis(rng.random_range(1000..4000));
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(think) => {}
        }
        let token = ledger.token(platform, user, seq);
        push(
            &world,
            &last_slack,
            platform,
            user,
            &format!("soak message {token} please echo"),
        );
        let deadline = tokio::time::Instant::now() + GIVE_UP;
        while !ledger.is_answered(&token) {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep_until(deadline) => break,
                _ = changes.changed() => {}
            }
        }
    }
}

/// One HTTP API client (its own conversation) until `stop`.
pub async fn api_client(
    supervisor: Arc<Supervisor>,
    counts: Arc<ApiCounts>,
    client: usize,
    seed: u64,
    stop: CancellationToken,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("http client");
    let session = format!("soak-api-{client}-{seed}");
    for seq in 0u64.. {
        let think = Duration::from_millis(rng.random_range(1000..3000));
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(think) => {}
        }
        let Some(api) = supervisor.api_url() else {
            continue;
        };
        let token = format!("api{client}n{seq}");
        let body = json!({"model": "hermes-agent",
            "messages": [{"role": "user", "content": format!("api {token} please")}]});
        counts.sent.fetch_add(1, Ordering::Relaxed);
        let response = http
            .post(format!("{api}/v1/chat/completions"))
            .bearer_auth(world::API_KEY)
            .header("X-Hermes-Session-Id", &session)
            .json(&body)
            .send()
            .await;
        let outcome = match response {
            Err(_) => None,
            Ok(r) if !r.status().is_success() => Some(false),
            Ok(r) => match r.json::<Value>().await {
                Err(_) => None,
                Ok(v) => Some(
                    v["choices"][0]["message"]["content"]
                        .as_str()
                        .is_some_and(|c| c.contains(&token)),
                ),
            },
        };
        let counter = match outcome {
            None => &counts.connection_errors,
            Some(true) => &counts.ok,
            Some(false) => &counts.bad,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
