//! Telegram adapter benchmark against the fake Bot API: inbound updates/s through polling,
//! the intake and a recording context; p50/p99 latency of one `send`; process RSS before and
//! after the adapter connected. Prints one JSON line. `-- --quick` finishes in seconds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_telegram::{Chat, FakeTelegram, User};
use hermes_adapter::{
    Adapter, AdapterContext, Inbound, Outbound, OutboundKind, Progress, RecordOutcome,
};
use hermes_telegram::{Settings, TelegramAdapter};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (updates, sends) = if quick { (2_000, 300) } else { (20_000, 3_000) };
    let fake = FakeTelegram::start().await;
    let rss_before = rss_kib();

    let (inbound_tx, mut inbound_rx) = mpsc::channel::<Inbound>(1024);
    let ctx = AdapterContext {
        inbound: inbound_tx,
        dead_letters: tokio::sync::mpsc::channel(1).0,
        progress: Progress::new(),
        shutdown: CancellationToken::new(),
        ingress: hermes_adapter::Ingress::solo(),
    };
    let extra = json!({"base_url": fake.url(), "poll_timeout_seconds": 1});
    let settings = Settings::from_config(
        fake.token(),
        extra.as_object().unwrap(),
        &Default::default(),
    )
    .unwrap();
    let adapter = Arc::new(TelegramAdapter::new(settings));
    let runner = adapter.clone();
    let run_ctx = ctx.clone();
    let task = tokio::spawn(async move { runner.run(run_ctx).await });
    fake.wait_for_calls("getUpdates", 2, Duration::from_secs(30))
        .await
        .expect("polling");
    let rss_connected = rss_kib();

    // Inbound: commands from many users (commands skip the paste-merge window).
    let started = Instant::now();
    for n in 0..updates {
        let user = 1_000 + (n % 500) as i64;
        fake.push_text(
            Chat::private(user),
            User::new(user, "u"),
            &format!("/cmd {n}"),
        );
    }
    let mut received = 0;
    while received < updates {
        let inbound = tokio::time::timeout(Duration::from_secs(60), inbound_rx.recv())
            .await
            .expect("inbound within 60 s")
            .expect("channel open");
        let _ = inbound.recorded.send(RecordOutcome::Recorded);
        received += 1;
    }
    let inbound_secs = started.elapsed().as_secs_f64();
    let rss_after_inbound = rss_kib();

    // Outbound: one send at a time, as a single chat's replies go out.
    let mut latencies = Vec::with_capacity(sends);
    for n in 0..sends {
        let outbound = Outbound {
            chat_id: "42".into(),
            thread_id: None,
            kind: OutboundKind::Text {
                text: format!("reply number {n}. **bold** and `code`"),
                reply_to: None,
                plain: false,
            },
        };
        let t = Instant::now();
        let result = adapter.send(outbound).await;
        latencies.push(t.elapsed());
        assert!(result.is_ok(), "{result:?}");
    }
    latencies.sort();
    ctx.shutdown.cancel();
    let _ = task.await;

    println!(
        "{}",
        json!({
            "bench": "telegram_adapter",
            "mode": if quick { "quick" } else { "full" },
            "inbound_updates": updates,
            "inbound_updates_per_s": (updates as f64 / inbound_secs).round(),
            "sends": sends,
            "send_p50_ms": (percentile(&latencies, 0.50) * 1000.0).round() / 1000.0,
            "send_p99_ms": (percentile(&latencies, 0.99) * 1000.0).round() / 1000.0,
            "rss_before_kib": rss_before,
            "rss_connected_idle_kib": rss_connected,
            "rss_after_inbound_kib": rss_after_inbound,
            "note": "fake Bot API in-process on 127.0.0.1; rss_after_inbound includes the fake's copies of every pushed update",
        })
    );
}
