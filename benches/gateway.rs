//! Gateway benchmark, through the real binary's HTTP API with a fake model that answers
//! instantly (every turn persisted to state.db): turns/s at concurrency 1, 16 and 64; the
//! gateway's added latency (end-to-end minus a direct call to the same fake model); RSS idle
//! and with 10,000 sessions in the routing index; time from spawn to `/ready`; and, under
//! saturation (many more clients than `max_concurrent_runs`, a model answering slowly),
//! how many requests were shed with 429 and whether RSS stays flat. Prints one JSON report
//! (also written to `target/bench-gateway.json`). `-- --quick` is the CI size;
//! `-- --saturation-only` and `-- --routes-only` run one part.

#[path = "../tests/support/fake_model.rs"]
mod fake_model;
mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fake_model::FakeModel;
use serde_json::{Value, json};
use support::{bench_dir, direct_model, percentiles, round, rss_kib};

const KEY: &str = "bench-api-key-0123456789abcdef";

struct Daemon {
    child: Child,
    api: String,
    admin: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

fn ports(home: &std::path::Path) -> (u16, u16) {
    // Fixed ports for the whole run: chosen free now, by binding 127.0.0.1:0.
    let _ = home;
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    )
}

/// Spawns the daemon and returns it with the time until `/ready` answered 200. The
/// throughput runs lift the API's concurrency cap (`max_concurrent_runs: 0`).
async fn spawn(home: &std::path::Path, model: &FakeModel) -> (Daemon, Duration) {
    spawn_capped(home, model, 0).await
}

async fn spawn_capped(
    home: &std::path::Path,
    model: &FakeModel,
    max_concurrent_runs: u32,
) -> (Daemon, Duration) {
    let (api_port, admin_port) = ports(home);
    let started = Instant::now();
    let child = Command::new(support::hermesd())
        .arg("run")
        .env_clear()
        .env("HOME", home.join("user"))
        .env("HERMES_HOME", home)
        .env("HERMES_TEST_ISOLATION", "1")
        .env("RUST_LOG", "warn")
        .env("API_SERVER_KEY", KEY)
        .env("API_SERVER_PORT", api_port.to_string())
        .env("HERMES__ADMIN__PORT", admin_port.to_string())
        .env("OPENAI_BASE_URL", model.base_url())
        .env("OPENAI_API_KEY", "sk-bench")
        .env("HERMES__MODEL__PROVIDER", "openai")
        .env("HERMES__MODEL__DEFAULT", "fake-model")
        .env(
            "HERMES__PLATFORMS__API_SERVER__MAX_CONCURRENT_RUNS",
            max_concurrent_runs.to_string(),
        )
        .env("HERMES__AUXILIARY__TITLE_GENERATION__ENABLED", "false")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn hermesd");
    let daemon = Daemon {
        child,
        api: format!("http://127.0.0.1:{api_port}"),
        admin: format!("http://127.0.0.1:{admin_port}"),
    };
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = client.get(format!("{}/ready", daemon.admin)).send().await
            && r.status().is_success()
        {
            break;
        }
        assert!(Instant::now() < deadline, "daemon never became ready");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    (daemon, started.elapsed())
}

/// `clients` concurrent clients, each in its own session, `per_client` turns each.
async fn throughput(daemon: &Daemon, clients: usize, per_client: usize) -> Value {
    let url = format!("{}/v1/chat/completions", daemon.api);
    support::api_throughput(&[url], KEY, clients, per_client).await
}

/// Saturation: `clients` clients (far more than the cap of `cap` runs) send turns back to
/// back for `seconds` against a model taking 200 ms per reply. Counts answered and shed
/// (429 + Retry-After) requests and samples the daemon's RSS every 100 ms: with load
/// shedding the excess is refused at once instead of queueing, so RSS stays flat.
async fn saturation(model: &FakeModel, cap: u32, clients: usize, seconds: u64) -> Value {
    let home = bench_dir();
    for _ in 0..(clients as u64 * seconds * 10) {
        model.push(fake_model::Step::Slow {
            reply: fake_model::Reply::text("slow reply"),
            delay: Duration::from_millis(200),
        });
    }
    let (daemon, _) = spawn_capped(home.path(), model, cap).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = daemon.child.id();
    let rss_before = rss_kib(pid);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .unwrap();
    let stop = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let http = http.clone();
        let url = format!("{}/v1/chat/completions", daemon.api);
        tasks.push(tokio::spawn(async move {
            let (mut answered, mut shed, mut other) = (0u64, 0u64, 0u64);
            let mut i = 0;
            while Instant::now() < stop {
                i += 1;
                let body =
                    json!({"messages": [{"role": "user", "content": format!("c{c} turn {i}")}]});
                match http.post(&url).bearer_auth(KEY).json(&body).send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        answered += 1;
                    }
                    Ok(r) if r.status() == reqwest::StatusCode::TOO_MANY_REQUESTS => {
                        assert!(r.headers().contains_key("retry-after"));
                        shed += 1;
                        // A polite client waits; a short pause keeps the flood going.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    _ => other += 1,
                }
            }
            (answered, shed, other)
        }));
    }
    let mut samples = Vec::new();
    while Instant::now() < stop {
        samples.push(rss_kib(pid));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (mut answered, mut shed, mut other) = (0, 0, 0);
    for task in tasks {
        let (a, s, o) = task.await.unwrap();
        answered += a;
        shed += s;
        other += o;
    }
    let rss_after = rss_kib(pid);
    drop(daemon);
    let peak = samples.iter().copied().max().unwrap_or(0);
    json!({"max_concurrent_runs": cap, "clients": clients, "seconds": seconds,
           "answered": answered, "shed_429": shed, "other_errors": other,
           "rss_before_kib": rss_before, "rss_peak_kib": peak, "rss_after_kib": rss_after,
           "rss_samples": samples.len()})
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// `-- --saturation-only`: just the saturation figures.
fn saturation_only(quick: bool) {
    let runtime = runtime();
    let report = runtime.block_on(async {
        let model = FakeModel::start_in_background();
        let (clients, seconds) = if quick { (100, 5) } else { (400, 20) };
        json!({"bench": "gateway", "quick": quick,
               "saturation": saturation(&model, 10, clients, seconds).await})
    });
    println!("{report}");
}

/// Writes `count` routing entries for `home` (as a long-running gateway accumulates them).
async fn seed_routes(home: &std::path::Path, count: usize) {
    let store = hermesd::state::Store::open(&home.join("state.db")).unwrap();
    store.ensure_gateway_schema().await.unwrap();
    let sessions = home.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let scope = std::fs::canonicalize(&sessions)
        .unwrap()
        .display()
        .to_string();
    let entries: std::collections::BTreeMap<String, Value> = (0..count)
        .map(|i| {
            let key = format!("agent:main:telegram:dm:{i}");
            let entry = json!({"session_key": key, "session_id": format!("20261129_000000_{i:08x}"),
                "created_at": "2026-11-29T00:00:00.000000", "updated_at": "2026-11-29T00:00:00.000000",
                "origin": {"platform": "telegram", "chat_id": i.to_string(), "chat_type": "dm",
                           "user_id": i.to_string()},
                "platform": "telegram", "chat_type": "dm"});
            (key, entry)
        })
        .collect();
    store.replace_routing(&scope, &entries).await.unwrap();
    store.close().await;
}

/// `-- --routes-only`: just RSS and start-up time with 10,000 routes in the index.
fn routes_only() {
    let runtime = runtime();
    let report = runtime.block_on(async {
        let model = FakeModel::start_in_background();
        let (rss, ready) = routes_10k(&model).await;
        json!({"bench": "gateway", "rss_10k_routes_kib": rss,
               "ready_10k_routes_ms": ready.as_millis(), "targets": {"rss_10k_mb": 60}})
    });
    println!("{report}");
}

/// The daemon started on a home holding 10,000 routing entries: its RSS once ready and
/// settled, and the time to `/ready`.
async fn routes_10k(model: &FakeModel) -> (u64, Duration) {
    let home = bench_dir();
    seed_routes(home.path(), 10_000).await;
    let (daemon, ready) = spawn(home.path(), model).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss = rss_kib(daemon.child.id());
    drop(daemon);
    (rss, ready)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    if std::env::args().any(|a| a == "--saturation-only") {
        return saturation_only(quick);
    }
    if std::env::args().any(|a| a == "--routes-only") {
        return routes_only();
    }
    let runtime = runtime();
    let report = runtime.block_on(async {
        let model = FakeModel::start_in_background();
        let home = bench_dir();
        let (daemon, ready) = spawn(home.path(), &model).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let idle_rss = rss_kib(daemon.child.id());
        let scale = if quick { 1 } else { 4 };
        let mut runs = Vec::new();
        // Warm-up: connections, caches, the first session rows.
        throughput(&daemon, 4, 10).await;
        for (clients, per_client) in [(1, 200 * scale), (16, 40 * scale), (64, 12 * scale)] {
            runs.push(throughput(&daemon, clients, per_client).await);
        }
        let busy_rss = rss_kib(daemon.child.id());
        let direct = direct_model(&model.base_url(), 200).await;
        let direct_summary = percentiles(direct.clone());
        drop(daemon);

        let (rss_10k, ready_10k) = routes_10k(&model).await;

        let slow_model = FakeModel::start_in_background();
        let (clients, seconds) = if quick { (100, 5) } else { (400, 20) };
        let saturated = saturation(&slow_model, 10, clients, seconds).await;

        let model_p50 = direct_summary["p50_ms"].as_f64().unwrap_or(0.0);
        let added: Vec<Value> = runs
            .iter()
            .map(|run| {
                let lat = &run["latency"];
                json!({"concurrency": run["concurrency"],
                       "added_p50_ms": round(lat["p50_ms"].as_f64().unwrap() - model_p50),
                       "added_p99_ms": round(lat["p99_ms"].as_f64().unwrap() - model_p50)})
            })
            .collect();
        json!({
            "bench": "gateway",
            "quick": quick,
            "home_dir": std::env::var("HERMESD_BENCH_DIR").unwrap_or_else(|_| "/dev/shm".into()),
            "throughput": runs,
            "direct_model_call": direct_summary,
            "added_latency": added,
            "rss_idle_kib": idle_rss,
            "rss_after_load_kib": busy_rss,
            "rss_10k_routes_kib": rss_10k,
            "ready_ms": ready.as_millis(),
            "ready_10k_routes_ms": ready_10k.as_millis(),
            "saturation": saturated,
            "targets": {"turns_per_s": 800, "added_p99_ms_at_16": 5, "rss_idle_mb": 25,
                        "rss_10k_mb": 60, "ready_ms": 150}
        })
    });
    let text = report.to_string();
    println!("{text}");
    let _ = std::fs::write(
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-gateway.json"),
        &text,
    );
}
