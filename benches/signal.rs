//! Signal gateway benchmark: the real (release) binary connected to the wire-level fake
//! signal-cli daemon (in this process), 200 authorised users each in their own DM, the fake
//! model answering instantly. Measures turns/s (a burst of messages pushed on the event
//! stream at once, until every reply is sent) and the first-reply latency (message written
//! to the stream → `send` received by the daemon, one at a time, minus a direct call to the
//! same fake model). Prints one JSON line (also `target/bench-signal.json`); `-- --quick`
//! is the CI size.

#[path = "../tests/support/fake_model.rs"]
mod fake_model;
mod support;

use std::time::{Duration, Instant};

use fake_model::FakeModel;
use fake_signal::FakeSignal;
use serde_json::json;
use support::{Daemon, bench_dir, daemon_command, direct_model, free_port, percentiles, round};

const BOT: &str = "+15550000001";
const USERS: usize = 200;
const WAIT: Duration = Duration::from_secs(120);

fn user(i: usize) -> String {
    // Never the bot's own number: its messages are echoes and are not answered.
    format!("+1666{i:07}")
}

async fn spawn(home: &std::path::Path, model: &FakeModel, signal: &FakeSignal) -> Daemon {
    let admin_port = free_port();
    let mut command = daemon_command(home, admin_port, &model.base_url());
    let allowed: Vec<String> = (0..USERS).map(user).collect();
    command
        .env("API_SERVER_ENABLED", "false")
        .env("SIGNAL_HTTP_URL", signal.url())
        .env("SIGNAL_ACCOUNT", BOT)
        .env("SIGNAL_ALLOWED_USERS", allowed.join(","));
    let daemon = Daemon::spawn(command, admin_port);
    daemon.wait_answering("/health").await;
    daemon
}

/// Waits until the fake has taken `count` sends in all.
async fn sends(signal: &FakeSignal, count: usize) {
    tokio::time::timeout(WAIT, signal.wait_sent(count))
        .await
        .expect("every reply sent");
}

/// Every user sends `per_user` messages at once; turns/s until all are answered.
async fn burst(signal: &FakeSignal, per_user: usize, round_no: usize) -> serde_json::Value {
    let before = signal.sent().len();
    let total = USERS * per_user;
    let started = Instant::now();
    for n in 0..per_user {
        for i in 0..USERS {
            signal.push_dm(&user(i), &format!("burst {round_no}.{n} from {i}"));
        }
    }
    sends(signal, before + total).await;
    let elapsed = started.elapsed().as_secs_f64();
    json!({"turns": total, "seconds": round(elapsed),
           "turns_per_s": (total as f64 / elapsed).round()})
}

/// One message at a time: written to the stream → its reply taken by the daemon.
async fn sequential(signal: &FakeSignal, count: usize) -> Vec<f64> {
    let mut samples = Vec::with_capacity(count);
    for n in 0..count {
        let before = signal.sent().len();
        let text = format!("single {n}");
        let pushed = Instant::now();
        signal.push_dm(&user(n % USERS), &text);
        sends(signal, before + 1).await;
        let expected = format!("echo: {text}");
        let reply = signal
            .sent()
            .into_iter()
            .rev()
            .find(|s| s.message == expected)
            .expect("the reply");
        samples.push(reply.at.duration_since(pushed).as_secs_f64() * 1000.0);
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
        let signal = FakeSignal::start(BOT).await;
        let home = bench_dir();
        let daemon = spawn(home.path(), &model, &signal).await;
        signal.wait_listeners(1).await;
        burst(&signal, 1, 0).await;
        let (per_user, singles) = if quick { (5, 200) } else { (25, 1_000) };
        let bursts = vec![
            burst(&signal, per_user, 1).await,
            burst(&signal, per_user, 2).await,
        ];
        let latencies = sequential(&signal, singles).await;
        let direct = percentiles(direct_model(&model.base_url(), 200).await);
        let end_to_end = percentiles(latencies);
        let model_p50 = direct["p50_ms"].as_f64().unwrap_or(0.0);
        let unexpected = signal.unexpected().len();
        drop(daemon);
        let best = bursts
            .iter()
            .filter_map(|b| b["turns_per_s"].as_f64())
            .fold(0.0, f64::max);
        json!({
            "bench": "signal",
            "quick": quick,
            "users": USERS,
            "bursts": bursts,
            "turns_per_s": best,
            "message_to_reply": end_to_end,
            "direct_model_call": direct,
            "gateway_side": {
                "p50_ms": round(end_to_end["p50_ms"].as_f64().unwrap() - model_p50),
                "p99_ms": round(end_to_end["p99_ms"].as_f64().unwrap() - model_p50),
            },
            "unexpected_calls": unexpected,
        })
    });
    let text = report.to_string();
    println!("{text}");
    let _ = std::fs::write(
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-signal.json"),
        &text,
    );
}
