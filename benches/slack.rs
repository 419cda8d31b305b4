//! Slack gateway benchmark: the real (release) binary connected over Socket Mode to the
//! wire-level fake Slack (in this process), 200 authorised users each in their own DM, the
//! fake model answering instantly. Measures messages/s (a burst of events pushed at once,
//! until every reply is posted), the gateway-side latency (envelope written to the socket →
//! `chat.postMessage` received, one message at a time, minus a direct call to the same fake
//! model), the envelope→ack latency during the bursts as the fake measures it (Slack
//! retries an envelope not acked within 3 s; `slack_retries` counts those), and the
//! daemon's RSS with Slack connected vs the same daemon serving only the HTTP API. Prints
//! one JSON line (also `target/bench-slack.json`); `-- --quick` is the CI size (< 30 s).

#[path = "../tests/support/fake_model.rs"]
mod fake_model;
mod support;

use std::time::{Duration, Instant};

use fake_model::FakeModel;
use fake_slack::{FakeSlack, Records, events};
use serde_json::{Value, json};
use support::{
    Daemon, bench_dir, daemon_command, direct_model, free_port, percentiles, round, rss_kib,
};

const KEY: &str = "bench-api-key-0123456789abcdef";
const USERS: usize = 200;
const WAIT: Duration = Duration::from_secs(120);

fn user(i: usize) -> String {
    format!("U{i:05}")
}

fn dm(i: usize) -> String {
    format!("D{i:05}")
}

/// Spawns the daemon (the HTTP API always; Slack when `slack` is given) and waits until
/// `/health` answers.
async fn spawn(home: &std::path::Path, model: &FakeModel, slack: Option<&FakeSlack>) -> Daemon {
    let admin_port = free_port();
    let mut command = daemon_command(home, admin_port, &model.base_url());
    command
        .env("API_SERVER_KEY", KEY)
        .env("API_SERVER_PORT", free_port().to_string());
    if let Some(slack) = slack {
        std::fs::write(
            home.join("config.yaml"),
            format!(
                "slack:\n  enabled: true\n  extra:\n    api_base_url: {}\n",
                slack.api_base_url()
            ),
        )
        .unwrap();
        let allowed: Vec<String> = (0..USERS).map(user).collect();
        let tokens = slack.tokens();
        command
            .env("SLACK_BOT_TOKEN", tokens.bot)
            .env("SLACK_APP_TOKEN", tokens.app)
            .env("SLACK_ALLOWED_USERS", allowed.join(","));
    }
    let daemon = Daemon::spawn(command, admin_port);
    daemon.wait_answering("/health").await;
    daemon
}

/// Waits until `check` holds on the fake's records.
async fn until(slack: &FakeSlack, what: &str, check: impl Fn(&Records) -> bool) {
    slack
        .wait_within(WAIT, what, |r| check(r).then_some(()))
        .await;
}

/// Every user sends `per_user` messages at once; returns messages/s until all are
/// answered, and the envelope→ack latencies under that load (Slack's deadline is 3 s).
async fn burst(slack: &FakeSlack, per_user: usize, round_no: usize) -> (Value, Vec<f64>) {
    let before = slack.records().posted.len();
    let total = USERS * per_user;
    let started = Instant::now();
    let mut envelopes = Vec::with_capacity(total);
    for n in 0..per_user {
        for i in 0..USERS {
            let ts = slack.next_ts();
            let text = format!("burst {round_no}.{n} from {i}");
            envelopes.push(
                slack
                    .push_event(events::dm(&dm(i), &user(i), &text, &ts))
                    .envelope_id,
            );
        }
    }
    until(slack, "every burst message answered", |r| {
        r.posted.len() >= before + total
    })
    .await;
    let elapsed = started.elapsed().as_secs_f64();
    until(slack, "every burst envelope acked", |r| {
        envelopes.iter().all(|e| r.ack_latency(e).is_some())
    })
    .await;
    let records = slack.records();
    let acks: Vec<f64> = envelopes
        .iter()
        .filter_map(|e| records.ack_latency(e))
        .map(|d| d.as_secs_f64() * 1000.0)
        .collect();
    let report = json!({"messages": total, "seconds": round(elapsed),
           "messages_per_s": (total as f64 / elapsed).round(),
           "envelope_to_ack": percentiles(acks.clone())});
    (report, acks)
}

/// One message at a time, round-robin over the users: envelope written → reply posted.
async fn sequential(slack: &FakeSlack, count: usize) -> Vec<f64> {
    let mut samples = Vec::with_capacity(count);
    for n in 0..count {
        let i = n % USERS;
        let ts = slack.next_ts();
        let text = format!("single {n}");
        let pushed = slack.push_event(events::dm(&dm(i), &user(i), &text, &ts));
        let expected = format!("echo: {text}");
        let posted_at = slack
            .wait_within(WAIT, &format!("the reply to {text}"), |r| {
                r.posted
                    .iter()
                    .rev()
                    .find(|p| p.text == expected)
                    .map(|p| p.at)
            })
            .await;
        let sent_at = slack.sent_at(&pushed.envelope_id).expect("envelope sent");
        samples.push(posted_at.duration_since(sent_at).as_secs_f64() * 1000.0);
    }
    samples
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(async {
        let model = FakeModel::start_in_background();

        // The same daemon with only the HTTP API: the baseline for memory.
        let api_home = bench_dir();
        let api_only = spawn(api_home.path(), &model, None).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss_api_only = rss_kib(api_only.child.id());
        drop(api_only);

        let slack = FakeSlack::start().await;
        let home = bench_dir();
        let daemon = spawn(home.path(), &model, Some(&slack)).await;
        until(&slack, "the socket hello", |r| r.hellos() >= 1).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss_connected = rss_kib(daemon.child.id());

        // Warm-up: every user's name looked up, connections and caches in place.
        burst(&slack, 1, 0).await;
        let (per_user, singles) = if quick { (5, 200) } else { (25, 1_000) };
        let (first, mut acks_under_load) = burst(&slack, per_user, 1).await;
        let (second, more) = burst(&slack, per_user, 2).await;
        acks_under_load.extend(more);
        let bursts = vec![first, second];
        let latencies = sequential(&slack, singles).await;
        let rss_after = rss_kib(daemon.child.id());
        let direct = direct_model(&model.base_url(), 200).await;
        let direct_summary = percentiles(direct);
        let end_to_end = percentiles(latencies);
        let model_p50 = direct_summary["p50_ms"].as_f64().unwrap_or(0.0);
        let records = slack.records();
        drop(daemon);

        let best = bursts
            .iter()
            .filter_map(|b| b["messages_per_s"].as_f64())
            .fold(0.0, f64::max);
        json!({
            "bench": "slack",
            "quick": quick,
            "users": USERS,
            "bursts": bursts,
            "messages_per_s": best,
            "envelope_to_post": end_to_end,
            "direct_model_call": direct_summary,
            "gateway_side": {
                "p50_ms": round(end_to_end["p50_ms"].as_f64().unwrap() - model_p50),
                "p99_ms": round(end_to_end["p99_ms"].as_f64().unwrap() - model_p50),
            },
            "rss_kib": {
                "api_only": rss_api_only,
                "slack_connected": rss_connected,
                "slack_added": rss_connected as i64 - rss_api_only as i64,
                "slack_after_load": rss_after,
            },
            "envelope_to_ack_under_load": percentiles(acks_under_load),
            "slack_retries": records.auto_retries.len(),
            "posted": records.posted.len(),
            "acks": records.acks.len(),
            "unexpected_calls": records.unexpected.len(),
            "targets": {"messages_per_s": 300, "gateway_side_p99_ms": 50, "slack_added_kib": 5120,
                        "envelope_to_ack_p99_ms": 1000},
        })
    });
    let text = report.to_string();
    println!("{text}");
    let _ = std::fs::write(
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-slack.json"),
        &text,
    );
}
