//! Fault injection: every few seconds (seeded jitter) one fault, chosen seeded-randomly,
//! on one of the fakes (among them a Telegram flood-wait: one user's chat refused with a
//! `retry_after` of 20–90 s, which the daemon must wait out without giving the reply up); `kill -9` + restart of the daemon on its own schedule; and Slack's
//! redelivery of envelopes whose ack is overdue (what Slack does after a client died or
//! went silent, which the fake leaves to its driver).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_discord::Fault as DiscordFault;
use fake_slack::Fault as SlackFault;
use fake_telegram::Fault as TelegramFault;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

use crate::incarnations::Supervisor;
use crate::load::LastSlackEnvelope;
use crate::world::World;

/// Every fault kind, by the name the report counts it under.
const KINDS: [&str; 14] = [
    "discord_socket_dropped",
    "discord_heartbeat_acks_stopped",
    "discord_send_429",
    "discord_duplicate_dispatches",
    "slack_disconnect_frame",
    "slack_silent_socket",
    "slack_send_429",
    "slack_duplicate_envelope",
    "telegram_stalled_poll",
    "telegram_poll_5xx",
    "telegram_poll_429",
    "telegram_send_429",
    "telegram_duplicate_updates",
    "telegram_flood_wait",
];

/// The range of a flood-wait's `retry_after` (Telegram's group flood control asks for
/// tens of seconds to minutes); under the end's quiescence bound, so the last one can pass.
const FLOOD_WAIT_SECS: std::ops::RangeInclusive<u64> = 20..=90;

/// A Slack envelope unacked this long is sent again (Slack retries after a few seconds).
const SLACK_ACK_OVERDUE: Duration = Duration::from_secs(10);

pub type FaultCounts = Arc<Mutex<BTreeMap<&'static str, u64>>>;

fn inject(world: &World, last_slack: &LastSlackEnvelope, kind: &str, rng: &mut StdRng) {
    match kind {
        "discord_socket_dropped" => world.discord.drop_socket(),
        "discord_heartbeat_acks_stopped" => world.discord.stop_acking_heartbeats(),
        "discord_send_429" => world.discord.fail_next(
            "POST /channels/{id}/messages",
            DiscordFault::RateLimited { retry_after: 1.0 },
            1,
        ),
        "discord_duplicate_dispatches" => world.discord.duplicate_next_dispatches(3),
        "slack_disconnect_frame" => world.slack.send_disconnect("refresh_requested"),
        "slack_silent_socket" => world.slack.go_silent(),
        "slack_send_429" => world.slack.fail_next(
            "chat.postMessage",
            SlackFault::RateLimited {
                retry_after_secs: 1,
            },
        ),
        "slack_duplicate_envelope" => {
            if let Some(envelope) = last_slack.0.lock().unwrap().clone() {
                world.slack.redeliver_envelope(&envelope, "timeout");
            }
        }
        "telegram_stalled_poll" => world
            .telegram
            .fail_next("getUpdates", TelegramFault::Stall, 1),
        "telegram_poll_5xx" => {
            world
                .telegram
                .fail_next("getUpdates", TelegramFault::ServerError, 2)
        }
        "telegram_poll_429" => world.telegram.fail_next(
            "getUpdates",
            TelegramFault::TooManyRequests { retry_after: 1 },
            1,
        ),
        "telegram_send_429" => world.telegram.fail_next(
            "sendMessage",
            TelegramFault::TooManyRequests { retry_after: 1 },
            1,
        ),
        "telegram_flood_wait" => {
            let user = rng.random_range(0..world.users());
            let retry_after = rng.random_range(FLOOD_WAIT_SECS);
            world
                .telegram
                .flood_chat(crate::world::telegram_user(user), retry_after, 1);
        }
        "telegram_duplicate_updates" => {
            world
                .telegram
                .fail_next("getUpdates", TelegramFault::DuplicateUpdates, 1)
        }
        other => unreachable!("unknown fault {other}"),
    }
}

/// Injects a fault every `every` (±50 %, seeded) until `stop`.
pub async fn injector(
    world: Arc<World>,
    last_slack: Arc<LastSlackEnvelope>,
    every: Duration,
    seed: u64,
    counts: FaultCounts,
    stop: CancellationToken,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    loop {
        let gap = every.mul_f64(rng.random_range(0.5..1.5));
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(gap) => {}
        }
        let kind = KINDS[rng.random_range(0..KINDS.len())];
        inject(&world, &last_slack, kind, &mut rng);
        *counts.lock().unwrap().entry(kind).or_default() += 1;
    }
}

/// When the kills land, seconds into the load: one every `every` (±20 %, seeded), none in
/// the last 20 s; a run shorter than two gaps gets one kill between 30 % and 60 % of it.
pub fn kill_times(duration: Duration, every: Duration, seed: u64) -> Vec<Duration> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6b69_6c6c);
    let latest = duration.saturating_sub(Duration::from_secs(20));
    let mut times = Vec::new();
    let mut at = Duration::ZERO;
    loop {
        at += every.mul_f64(rng.random_range(0.8..1.2));
        if at > latest {
            break;
        }
        times.push(at);
    }
    if times.is_empty() {
        times.push(duration.mul_f64(rng.random_range(0.3..0.6)));
    }
    times
}

/// Kills and restarts the daemon at `times` (from `start`); returns how many kills ran.
pub async fn killer(
    supervisor: Arc<Supervisor>,
    times: Vec<Duration>,
    start: tokio::time::Instant,
    stop: CancellationToken,
) -> u64 {
    let mut kills = 0;
    for at in times {
        tokio::select! {
            _ = stop.cancelled() => return kills,
            _ = tokio::time::sleep_until(start + at) => {}
        }
        println!("soak: kill -9 #{} at {:.0} s", kills + 1, at.as_secs_f64());
        supervisor.kill_and_restart().await;
        kills += 1;
    }
    kills
}

/// Slack's retry of overdue envelopes, every 2 s until `stop`; returns how many it resent.
pub async fn slack_redelivery(world: Arc<World>, stop: CancellationToken) -> u64 {
    let mut resent = 0;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return resent,
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
        resent += world
            .slack
            .redeliver_unacked_older_than(SLACK_ACK_OVERDUE, "timeout") as u64;
    }
}
