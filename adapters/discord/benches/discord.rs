//! Discord adapter benchmark: the adapter against the fake Discord on 127.0.0.1 with a
//! recording context that answers like the core. Prints one JSON line:
//! - `dispatches_per_s`: MESSAGE_CREATE dispatches handed over per second (burst);
//! - `handover_ms`: dispatch-to-handover latency, paced one at a time (p50/p99), and under
//!   the burst (p50/p99, includes queueing);
//! - `send_ms`: latency of one text send (p50/p99);
//! - `rss_kb`: resident memory before the adapter exists, once it is connected, and after
//!   the load (the fake lives in the same process and keeps every message).
//!
//! `-- --quick` uses smaller counts (finishes in a few seconds).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_discord::{FakeDiscord, Incoming};
use hermes_adapter::{
    Adapter, AdapterContext, Inbound, Outbound, OutboundKind, Progress, RecordOutcome,
};
use hermes_discord::{DiscordAdapter, Settings};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "bench-token";

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map(|pages| pages * 4)
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    (sorted[index] * 1000.0).round() / 1000.0
}

fn summary(mut samples: Vec<f64>) -> Value {
    samples.sort_by(f64::total_cmp);
    json!({"p50": percentile(&samples, 0.5), "p99": percentile(&samples, 0.99), "n": samples.len()})
}

type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (burst, paced, sends) = if quick {
        (2_000, 200, 200)
    } else {
        (10_000, 1_000, 1_000)
    };

    let fake = FakeDiscord::start(TOKEN, Duration::from_secs(30)).await;
    let rss_before = rss_kb();

    let mut extra = Map::new();
    extra.insert("api_base_url".into(), json!(fake.api_base_url()));
    let cache = std::env::temp_dir().join("hermesd-discord-bench-cache");
    extra.insert("cache_dir".into(), json!(cache.to_string_lossy()));
    let settings = Settings::from_config(TOKEN, &extra, &BTreeMap::new()).expect("settings");
    let adapter = DiscordAdapter::new(settings);

    // The recording context: answers Recorded at once and notes when each id arrived.
    let arrivals: Arrivals = Arc::default();
    let (inbound_tx, mut inbound_rx) = mpsc::channel::<Inbound>(1024);
    let (count_tx, mut count_rx) = mpsc::unbounded_channel::<()>();
    let recorder_arrivals = arrivals.clone();
    tokio::spawn(async move {
        while let Some(Inbound { event, recorded }) = inbound_rx.recv().await {
            recorder_arrivals
                .lock()
                .unwrap()
                .insert(event.event_id, Instant::now());
            let _ = recorded.send(RecordOutcome::Recorded);
            let _ = count_tx.send(());
        }
    });
    let shutdown = CancellationToken::new();
    let ctx = AdapterContext {
        inbound: inbound_tx,
        dead_letters: tokio::sync::mpsc::channel(1).0,
        progress: Progress::new(),
        shutdown: shutdown.clone(),
        ingress: hermes_adapter::Ingress::solo(),
    };
    let runner = adapter.clone();
    let task = tokio::spawn(async move { runner.run(ctx).await });
    fake.wait_for_frames(2, 1).await;

    let user = fake.new_user("bench", false, &[]);
    let dm = fake.add_dm_channel(&user);
    // Warm-up (and proof the path works) before measuring memory "connected".
    fake.push_message(Incoming::new(&dm, &user, "warm-up"));
    count_rx.recv().await.expect("warm-up handed over");
    let rss_connected = rss_kb();

    // Paced: one dispatch at a time.
    let mut paced_ms = Vec::with_capacity(paced);
    for i in 0..paced {
        let pushed = Instant::now();
        let id = fake.push_message(Incoming::new(&dm, &user, &format!("paced {i}")));
        count_rx.recv().await.expect("handed over");
        let arrived = arrivals.lock().unwrap()[&id];
        paced_ms.push(arrived.duration_since(pushed).as_secs_f64() * 1000.0);
    }

    // Burst: push everything, wait for all.
    let mut pushed_at = Vec::with_capacity(burst);
    let start = Instant::now();
    for i in 0..burst {
        let at = Instant::now();
        let id = fake.push_message(Incoming::new(&dm, &user, &format!("burst {i}")));
        pushed_at.push((id, at));
    }
    for _ in 0..burst {
        tokio::time::timeout(Duration::from_secs(120), count_rx.recv())
            .await
            .expect("burst handed over in time")
            .expect("recorder alive");
    }
    let elapsed = start.elapsed().as_secs_f64();
    let burst_ms: Vec<f64> = {
        let arrivals = arrivals.lock().unwrap();
        pushed_at
            .iter()
            .map(|(id, at)| arrivals[id].duration_since(*at).as_secs_f64() * 1000.0)
            .collect()
    };

    // Sends.
    let mut send_ms = Vec::with_capacity(sends);
    for i in 0..sends {
        let started = Instant::now();
        let result = adapter
            .send(Outbound {
                chat_id: dm.clone(),
                thread_id: None,
                kind: OutboundKind::Text {
                    text: format!("reply {i}"),
                    reply_to: None,
                    plain: false,
                },
            })
            .await;
        assert!(result.is_ok(), "{result:?}");
        send_ms.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let rss_after = rss_kb();
    shutdown.cancel();
    let _ = task.await;

    let report = json!({
        "bench": "discord",
        "quick": quick,
        "dispatches": burst,
        "dispatches_per_s": (burst as f64 / elapsed).round(),
        "handover_ms": {"paced": summary(paced_ms), "burst": summary(burst_ms)},
        "send_ms": summary(send_ms),
        "rss_kb": {
            "before_adapter": rss_before,
            "connected": rss_connected,
            "after_load": rss_after,
            "adapter_connected_delta": rss_connected.saturating_sub(rss_before),
        },
    });
    println!("{report}");
}
