//! Slack adapter benchmark: the real adapter against the wire-level fake, with a recording
//! context that answers `Recorded` at once (what a fast local journal write does).
//!
//! Measures envelopes/s handed over and acked (a burst), envelope-to-ack latency (one at a
//! time), send latency (`chat.postMessage`, one at a time), and process RSS before the
//! adapter exists vs. connected. Prints one JSON line. `-- --quick` finishes in seconds.

use std::time::{Duration, Instant};

use fake_slack::{FakeSlack, events};
use hermes_adapter::{Adapter, AdapterContext, Outbound, OutboundKind, Progress, RecordOutcome};
use hermes_slack::{Settings, SlackAdapter};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1000.0
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (burst, sequential) = if quick { (2_000, 200) } else { (20_000, 2_000) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench(burst, sequential, quick));
}

async fn bench(burst: usize, sequential: usize, quick: bool) {
    let fake = FakeSlack::start().await;
    let cache = std::env::temp_dir().join("hermes-slack-bench");
    let rss_before = rss_kib();

    let tokens = fake.tokens();
    let extra = json!({"api_base_url": fake.api_base_url(), "cache_dir": cache.to_string_lossy()});
    let settings = Settings::from_config(
        &tokens.bot,
        &tokens.app,
        extra.as_object().expect("object"),
        &Default::default(),
    )
    .expect("settings");
    let adapter = SlackAdapter::new(settings);
    let (inbound, mut inbound_rx) = mpsc::channel(1024);
    let ctx = AdapterContext {
        inbound,
        dead_letters: tokio::sync::mpsc::channel(1).0,
        progress: Progress::new(),
        shutdown: CancellationToken::new(),
        ingress: hermes_adapter::Ingress::solo(),
    };
    let shutdown = ctx.shutdown.clone();
    let runner = adapter.clone();
    let run = tokio::spawn(async move { runner.run(ctx).await });
    // The recording context: answer at once, count.
    let recorder = tokio::spawn(async move {
        let mut handed_over = 0u64;
        while let Some(item) = inbound_rx.recv().await {
            let _ = item.recorded.send(RecordOutcome::Recorded);
            handed_over += 1;
        }
        handed_over
    });
    fake.wait_for_hellos(1).await;
    let rss_connected = rss_kib();

    // Burst: every envelope pushed at once, until all are acked.
    let started = Instant::now();
    for i in 0..burst {
        let ts = fake.next_ts();
        fake.push_event(events::dm("D1", "U1", &format!("message {i}"), &ts));
    }
    fake.wait_for("every burst envelope acked", |r| {
        (r.acks.len() >= burst).then_some(())
    })
    .await;
    let burst_secs = started.elapsed().as_secs_f64();

    // Envelope-to-ack latency, one envelope in flight at a time.
    let mut ack_latency = Vec::with_capacity(sequential);
    for i in 0..sequential {
        let ts = fake.next_ts();
        let pushed = fake.push_event(events::dm("D1", "U1", &format!("single {i}"), &ts));
        let ack = fake.wait_for_ack(&pushed.envelope_id).await;
        let sent = fake
            .sent_at(&pushed.envelope_id)
            .expect("envelope was sent");
        ack_latency.push(ack.at.duration_since(sent));
    }
    ack_latency.sort();

    // Send latency: chat.postMessage through the adapter.
    let mut send_latency = Vec::with_capacity(sequential);
    for i in 0..sequential {
        let outbound = Outbound {
            chat_id: "C1".into(),
            thread_id: Some("1.1".into()),
            kind: OutboundKind::Text {
                text: format!("**reply** {i}"),
                reply_to: None,
                plain: false,
            },
        };
        let started = Instant::now();
        let result = adapter.send(outbound).await;
        send_latency.push(started.elapsed());
        assert!(result.is_ok(), "{result:?}");
    }
    send_latency.sort();
    let rss_after = rss_kib();

    shutdown.cancel();
    let _ = run.await;
    drop(adapter);
    let handed_over = recorder.await.unwrap_or(0);

    let report = json!({
        "bench": "slack_adapter",
        "mode": if quick { "quick" } else { "full" },
        "burst_envelopes": burst,
        "handed_over": handed_over,
        "envelopes_per_sec": (burst as f64 / burst_secs).round(),
        "envelope_to_ack_ms": {
            "p50": percentile(&ack_latency, 0.50),
            "p99": percentile(&ack_latency, 0.99),
        },
        "send_ms": {
            "p50": percentile(&send_latency, 0.50),
            "p99": percentile(&send_latency, 0.99),
        },
        "rss_kib": {
            "before_adapter": rss_before,
            "connected": rss_connected,
            "connected_delta": rss_connected.saturating_sub(rss_before),
            "after_traffic": rss_after,
        },
        "note": "fake Slack runs in the same process; its recorded calls are in after_traffic",
    });
    println!("{report}");
}
