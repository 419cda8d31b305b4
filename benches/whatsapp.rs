//! WhatsApp Cloud benchmark: `hermesd run` with WhatsApp Cloud enabled against the wire-level
//! fake Meta (tests/support/fake_whatsapp.rs), answering with the instant fake model. Reports:
//! - turns/s: rounds in which every one of `users` users writes once (signed webhook
//!   deliveries, sent concurrently), each round ending when every answer reached the Graph
//!   `messages` endpoint;
//! - first-reply latency, one new user at a time: from the webhook POST to the answer's Graph
//!   call (signature check, journal, agent turn, ledger, Graph send), with direct calls to the
//!   same fake model for comparison;
//! - RSS after the load.
//!
//! Prints one JSON line (also `target/bench-whatsapp.json`); `-- --quick` is the CI size.

#[path = "../tests/support/fake_model.rs"]
mod fake_model;
#[path = "../tests/support/fake_whatsapp.rs"]
mod fake_whatsapp;
mod support;

use std::time::{Duration, Instant};

use fake_model::FakeModel;
use fake_whatsapp::FakeMeta;
use serde_json::json;
use support::{Daemon, daemon_command, direct_model, free_port, percentiles, round, rss_kib};

const WAIT: Duration = Duration::from_secs(180);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (users, rounds, sequential) = if quick { (50, 4, 30) } else { (200, 5, 200) };
    let meta = FakeMeta::start().await;
    let model = FakeModel::start().await;
    let home = support::bench_dir();
    let (port, admin_port) = (free_port(), free_port());
    let mut command = daemon_command(home.path(), admin_port, &model.base_url());
    command
        .env("API_SERVER_ENABLED", "false")
        .env(
            "WHATSAPP_CLOUD_PHONE_NUMBER_ID",
            fake_whatsapp::PHONE_NUMBER_ID,
        )
        .env("WHATSAPP_CLOUD_ACCESS_TOKEN", fake_whatsapp::TOKEN)
        .env("WHATSAPP_CLOUD_APP_SECRET", fake_whatsapp::APP_SECRET)
        .env("WHATSAPP_CLOUD_VERIFY_TOKEN", fake_whatsapp::VERIFY_TOKEN)
        .env("WHATSAPP_CLOUD_WEBHOOK_HOST", "127.0.0.1")
        .env("WHATSAPP_CLOUD_WEBHOOK_PORT", port.to_string())
        .env("WHATSAPP_CLOUD_GRAPH_API_URL", meta.url())
        .env("WHATSAPP_CLOUD_ALLOW_ALL_USERS", "true");
    let daemon = Daemon::spawn(command, admin_port);
    daemon.wait_answering("/ready").await;
    meta.set_webhook(&format!("http://127.0.0.1:{port}/whatsapp/webhook"));

    // Turns/s: every user writes once per round, all at once.
    let started = Instant::now();
    for r in 0..rounds {
        for u in 0..users {
            meta.push_text(&format!("49150{u:06}"), &format!("round {r}"));
        }
        tokio::time::timeout(WAIT, meta.wait_sent(users * (r + 1)))
            .await
            .expect("every answer of the round sent");
    }
    let burst_secs = started.elapsed().as_secs_f64();
    let turns = users * rounds;

    // First-reply latency: a new user at a time.
    let mut latencies = Vec::new();
    for k in 0..sequential {
        let before = meta.sent().len();
        let started = Instant::now();
        meta.push_text(&format!("49160{k:06}"), "hello");
        meta.wait_sent(before + 1).await;
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let direct = direct_model(&model.base_url(), sequential).await;
    let sent = meta.sent().len();
    assert_eq!(sent, turns + sequential, "an answer was lost or doubled");
    let report = json!({
        "bench": "whatsapp",
        "quick": quick,
        "users": users,
        "turns": turns,
        "turns_per_s": round(turns as f64 / burst_secs),
        "first_reply_ms": percentiles(latencies),
        "direct_model_ms": percentiles(direct),
        "answers": sent,
        "rss_kib_after": rss_kib(daemon.child.id()),
    });
    println!("{report}");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-whatsapp.json");
    let _ = std::fs::write(out, report.to_string());
}
