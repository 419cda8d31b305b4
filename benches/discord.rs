//! Discord through the real binary: the release `hermesd run` connected to the fake Discord
//! gateway, many authorised users (one DM channel each) writing at once, the fake model
//! answering instantly (every turn persisted to state.db). Reports messages/s with all users
//! writing at once; at 1 and 16 users at a time, the latency from a MESSAGE_CREATE dispatch
//! to the reply's `POST /channels/{id}/messages`, and that minus a direct call to the same
//! fake model ("gateway-side"); and the daemon's RSS with Discord
//! connected vs the same daemon serving only the HTTP API. Title generation is off so every
//! model call is a conversation turn. The fake enforces Discord's rate limits (per-bucket
//! and the global 50 requests/s); the report counts the 429s and invalid requests seen. Prints one JSON line (also written to
//! `target/bench-discord.json`); `-- --quick` is the CI size.

#[path = "../tests/support/fake_model.rs"]
mod fake_model;
mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_discord::{FakeDiscord, FakeUser, Incoming};
use fake_model::FakeModel;
use serde_json::json;
use support::{Daemon, bench_dir, daemon_command, direct_model, free_port, percentiles, rss_kib};
use tokio::sync::mpsc;

const TOKEN: &str = "bench-discord-token-0123456789";
const API_KEY: &str = "bench-api-key-0123456789abcdef";

/// Spawns the daemon and waits until it is ready; with `discord`, the adapter points at the
/// fake and `allowed` may talk.
async fn spawn(
    home: &std::path::Path,
    model: &FakeModel,
    discord: Option<(&FakeDiscord, &str)>,
) -> Daemon {
    let admin_port = free_port();
    let mut command = daemon_command(home, admin_port, &model.base_url());
    command
        .env("API_SERVER_KEY", API_KEY)
        .env("API_SERVER_PORT", free_port().to_string())
        .env("HERMES__AUXILIARY__TITLE_GENERATION__ENABLED", "false");
    if let Some((fake, allowed)) = discord {
        std::fs::write(
            home.join("config.yaml"),
            format!(
                "discord:\n  enabled: true\n  extra:\n    api_base_url: {}\n    gateway_url: {}\n",
                fake.api_base_url(),
                fake.gateway_url()
            ),
        )
        .unwrap();
        command
            .env("DISCORD_BOT_TOKEN", TOKEN)
            .env("DISCORD_ALLOWED_USERS", allowed);
    }
    let daemon = Daemon::spawn(command, admin_port);
    daemon.wait_answering("/ready").await;
    daemon
}

/// Routes every reply the fake stores to the waiting user's channel.
fn route_replies(
    fake: &FakeDiscord,
    channels: &[String],
) -> HashMap<String, mpsc::UnboundedReceiver<Instant>> {
    let mut senders = HashMap::new();
    let mut receivers = HashMap::new();
    for channel in channels {
        let (tx, rx) = mpsc::unbounded_channel();
        senders.insert(channel.clone(), tx);
        receivers.insert(channel.clone(), rx);
    }
    let mut tap = fake.tap_created();
    tokio::spawn(async move {
        while let Some(created) = tap.recv().await {
            if let Some(tx) = senders.get(&created.channel_id) {
                let _ = tx.send(created.at);
            }
        }
    });
    receivers
}

/// Every user writes `per_user` messages, each after the previous reply; returns the
/// latencies (dispatch → reply stored, ms) and the wall time.
async fn load(
    fake: &Arc<FakeDiscord>,
    users: &[(FakeUser, String)],
    replies: &mut HashMap<String, mpsc::UnboundedReceiver<Instant>>,
    per_user: usize,
    round_name: &str,
) -> (Vec<f64>, f64) {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (user, channel) in users {
        let mut rx = replies.remove(channel).expect("a reply route");
        let (fake, user, channel) = (fake.clone(), user.clone(), channel.clone());
        let round_name = round_name.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_user);
            for i in 0..per_user {
                let sent = Instant::now();
                fake.push_message(Incoming::new(&channel, &user, &format!("{round_name} {i}")));
                let at = tokio::time::timeout(Duration::from_secs(60), rx.recv())
                    .await
                    .expect("a reply within 60 s")
                    .expect("the reply route");
                latencies.push(at.saturating_duration_since(sent).as_secs_f64() * 1000.0);
            }
            (channel, rx, latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        let (channel, rx, samples) = task.await.unwrap();
        replies.insert(channel, rx);
        latencies.extend(samples);
    }
    (latencies, started.elapsed().as_secs_f64())
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(async {
        let model = FakeModel::start_in_background();
        let user_count = 200;
        let per_user = if quick { 5 } else { 20 };

        // The HTTP-API-only daemon first: its idle RSS is the baseline.
        let api_home = bench_dir();
        let api_daemon = spawn(api_home.path(), &model, None).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss_api_only = rss_kib(api_daemon.child.id());
        drop(api_daemon);

        let fake = Arc::new(FakeDiscord::start(TOKEN, Duration::from_secs(30)).await);
        let users: Vec<(FakeUser, String)> = (0..user_count)
            .map(|i| {
                let user = fake.new_user(&format!("user{i}"), false, &[]);
                let channel = fake.add_dm_channel(&user);
                (user, channel)
            })
            .collect();
        let allowed: Vec<&str> = users.iter().map(|(u, _)| u.id.as_str()).collect();
        let channels: Vec<String> = users.iter().map(|(_, c)| c.clone()).collect();
        let mut replies = route_replies(&fake, &channels);
        let home = bench_dir();
        let daemon = spawn(home.path(), &model, Some((&fake, &allowed.join(",")))).await;
        fake.wait_for_frames(2, 1).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss_discord_idle = rss_kib(daemon.child.id());

        // Warm-up: every user's first message creates its session.
        load(&fake, &users, &mut replies, 1, "hello").await;
        // Throughput: all users at once (latency here is mostly queueing behind the others).
        let (latencies, elapsed) = load(&fake, &users, &mut replies, per_user, "turn").await;
        let rss_discord_loaded = rss_kib(daemon.child.id());
        let messages = latencies.len();
        let loaded_latency = percentiles(latencies);
        let direct = percentiles(direct_model(&model.base_url(), 200).await);
        let model_p50 = direct["p50_ms"].as_f64().unwrap_or(0.0);
        // Gateway-side latency with little to queue behind: 1 and 16 users at a time.
        let mut latency_runs = Vec::new();
        // One channel passes 5 messages per 5 s (Discord's per-route limit, waited out), so the
        // single-user run sets the bench's length: the CI size sends 20 there, not 100.
        let single = if quick { 4 * per_user } else { 20 * per_user };
        for (concurrency, per_user) in [(1, single), (16, 2 * per_user)] {
            let (samples, _) = load(
                &fake,
                &users[..concurrency],
                &mut replies,
                per_user,
                &format!("c{concurrency}"),
            )
            .await;
            let gateway_side: Vec<f64> = samples.iter().map(|l| (l - model_p50).max(0.0)).collect();
            latency_runs.push(json!({
                "concurrency": concurrency,
                "dispatch_to_reply": percentiles(samples),
                "gateway_side": percentiles(gateway_side),
            }));
        }
        drop(daemon);
        let unrouted = fake.read(|s| s.unrouted.len());
        // Discord's limits (enforced by the fake): what the limiter let through anyway.
        let (rate_limited, invalid_requests) = fake.read(|s| {
            (
                s.calls.iter().filter(|c| c.status == 429).count(),
                s.limits.invalid_requests,
            )
        });
        assert_eq!(
            unrouted, 0,
            "the daemon called routes the fake does not serve"
        );
        json!({
            "bench": "discord",
            "quick": quick,
            "users": user_count,
            "messages": messages,
            "messages_per_s": (messages as f64 / elapsed).round(),
            "dispatch_to_reply_all_users": loaded_latency,
            "direct_model_call": direct,
            "latency": latency_runs,
            "rss_api_only_idle_kib": rss_api_only,
            "rss_discord_idle_kib": rss_discord_idle,
            "rss_discord_after_load_kib": rss_discord_loaded,
            "adapter_adds_kib": rss_discord_idle as i64 - rss_api_only as i64,
            "responses_429": rate_limited,
            "invalid_requests": invalid_requests,
            "targets": {"messages_per_s": 300, "gateway_side_p99_ms": 50, "adapter_adds_mb": 5},
        })
    });
    let text = report.to_string();
    println!("{text}");
    let _ = std::fs::write(
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-discord.json"),
        &text,
    );
}
