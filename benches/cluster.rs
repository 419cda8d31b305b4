//! Cluster benchmark (issues 22 and 28), through the real binary: turns/s and latency on
//! two paths, the HTTP API (`/v1/chat/completions`) and a chat (Telegram webhook updates
//! posted through a round-robin balancer, answered through a fake Telegram), with a fake
//! model that answers at once; for one instance on SQLite, one instance on PostgreSQL and
//! three instances sharing one PostgreSQL. On PostgreSQL each instance reaches the database
//! through a wire proxy (`tests/support/pg_proxy.rs`) that counts round trips, so each path
//! reports round trips per turn, and the cluster's round trips per second when idle (10 s
//! without traffic). Also the CPU each turn costs hermesd and PostgreSQL (from `/proc`), from
//! which the report derives where PostgreSQL becomes the limit; and failover time: an
//! instance is killed (SIGKILL) in the middle of a session's turn, and the clock runs until
//! another instance has answered that session's next message. A private PostgreSQL cluster
//! (`tests/support/postgres.rs`) is started per run. Prints one JSON report (also written to
//! `target/bench-cluster.json`). `-- --quick` is the CI size, `-- --tiny` the smallest.

#[path = "../tests/support/fake_model.rs"]
mod fake_model;
#[path = "../tests/support/pg_proxy.rs"]
#[allow(dead_code)]
mod pg_proxy;
#[path = "../tests/support/postgres.rs"]
#[allow(dead_code)]
mod postgres;
#[path = "../tests/support/round_robin.rs"]
#[allow(dead_code)]
mod round_robin;
mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use fake_model::{FakeModel, Step};
use fake_telegram::{FakeTelegram, TOKEN};
use pg_proxy::PgProxy;
use postgres::PgCluster;
use round_robin::RoundRobin;
use serde_json::{Value, json};
use support::{Daemon, bench_dir, daemon_command, free_port, percentiles, round};

const KEY: &str = "bench-api-key-0123456789abcdef";
/// The webhook secret every instance checks.
const SECRET: &str = "bench-webhook-secret-0123456789ab";
/// Telegram users allowed to talk to the bot: chat client `c` is user `c + 1`.
const CHAT_USERS: usize = 64;
/// The shortest quiet window the Telegram adapter allows before a text's turn starts.
const BATCH_DELAY_S: f64 = 0.08;
/// Bound on waiting for one reply.
const WAIT: Duration = Duration::from_secs(120);
/// How long the idle cluster is watched.
const IDLE: Duration = Duration::from_secs(10);

/// Where an instance keeps its state.
#[derive(Clone, Copy)]
enum Backend<'a> {
    Sqlite,
    Postgres { url: &'a str, lease_seconds: u64 },
}

struct Instance {
    daemon: Daemon,
    api: String,
    /// The Telegram webhook's base URL (scheme, host, port), with a fake Telegram.
    hook: Option<String>,
    /// The proxy in front of PostgreSQL (PostgreSQL with a fake Telegram only).
    proxy: Option<PgProxy>,
    _home: tempfile::TempDir,
}

async fn spawn(model: &FakeModel, backend: Backend<'_>, name: &str) -> Instance {
    spawn_with(model, backend, name, None).await
}

/// An instance; with `telegram`, also serving that bot's webhook and (on PostgreSQL)
/// reaching the database through a proxy of its own.
async fn spawn_with(
    model: &FakeModel,
    backend: Backend<'_>,
    name: &str,
    telegram: Option<&FakeTelegram>,
) -> Instance {
    let home = bench_dir();
    let (api_port, admin_port) = (free_port(), free_port());
    let mut hook = None;
    if let Some(telegram) = telegram {
        let config = format!(
            "telegram:\n  enabled: true\n  extra:\n    base_url: {}\n    \
             text_batch_delay_seconds: {BATCH_DELAY_S}\n    \
             text_batch_split_delay_seconds: {BATCH_DELAY_S}\n",
            telegram.url()
        );
        std::fs::write(home.path().join("config.yaml"), config).unwrap();
        hook = Some(free_port());
    }
    let mut command = daemon_command(home.path(), admin_port, &model.base_url());
    if let Some(port) = hook {
        let allowed: Vec<String> = (1..=CHAT_USERS).map(|u| u.to_string()).collect();
        command
            .env("TELEGRAM_BOT_TOKEN", TOKEN)
            .env("TELEGRAM_ALLOWED_USERS", allowed.join(","))
            .env(
                "TELEGRAM_WEBHOOK_URL",
                "https://bot.example.com/telegram/hook",
            )
            .env("TELEGRAM_WEBHOOK_SECRET", SECRET)
            .env("TELEGRAM_WEBHOOK_HOST", "127.0.0.1")
            .env("TELEGRAM_WEBHOOK_PORT", port.to_string());
    }
    command
        .env("API_SERVER_KEY", KEY)
        .env("API_SERVER_PORT", api_port.to_string())
        .env("HERMES__PLATFORMS__API_SERVER__MAX_CONCURRENT_RUNS", "0")
        .env("HERMES__AUXILIARY__TITLE_GENERATION__ENABLED", "false");
    let mut proxy = None;
    if let Backend::Postgres { url, lease_seconds } = backend {
        let mut url = url.to_owned();
        if telegram.is_some() {
            let port = postgres_port(&url);
            let started = PgProxy::start(port).await;
            url = started.url_for(&url, port);
            proxy = Some(started);
        }
        command
            .env("HERMES__STATE__BACKEND", "postgres")
            .env("HERMES_DATABASE_URL", url)
            .env("HERMES__STATE__LEASE_SECONDS", lease_seconds.to_string())
            .env("HERMES__STATE__INSTANCE_ID", name);
    }
    let daemon = Daemon::spawn(command, admin_port);
    daemon.wait_answering("/ready").await;
    Instance {
        daemon,
        api: format!("http://127.0.0.1:{api_port}/v1/chat/completions"),
        hook: hook.map(|port| format!("http://127.0.0.1:{port}")),
        proxy,
        _home: home,
    }
}

/// The port of a `postgres://…@127.0.0.1:PORT/…` URL.
fn postgres_port(url: &str) -> u16 {
    url.split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|port| port.parse().ok())
        .expect("a local PostgreSQL URL")
}

/// Round trips and statements every proxy has counted so far.
fn database_traffic(instances: &[Instance]) -> (u64, u64) {
    instances
        .iter()
        .filter_map(|i| i.proxy.as_ref())
        .fold((0, 0), |(r, s), p| {
            (r + p.round_trips(), s + p.statements())
        })
}

/// Through the balancer at `hook` (in front of every instance's webhook): `clients`
/// concurrent Telegram users, each in a DM of their own, `per_client` messages each; a
/// user sends the next message once the bot answered the last one.
async fn chat_throughput(
    telegram: &Arc<FakeTelegram>,
    hook: &str,
    update_ids: &Arc<AtomicI64>,
    clients: usize,
    per_client: usize,
) -> Value {
    assert!(clients <= CHAT_USERS);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (http, hook, telegram, update_ids) = (
            http.clone(),
            format!("{hook}/telegram/hook"),
            telegram.clone(),
            update_ids.clone(),
        );
        let user = c as i64 + 1;
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_client);
            for i in 0..per_client {
                let before = telegram.bot_messages(user).len();
                let update_id = update_ids.fetch_add(1, Ordering::SeqCst);
                let update = json!({"update_id": update_id, "message": {
                    "message_id": update_id, "date": 1_700_000_000,
                    "chat": {"id": user, "type": "private", "first_name": "Bench"},
                    "from": {"id": user, "is_bot": false, "first_name": "Bench"},
                    "text": format!("message {i}")}});
                let t = Instant::now();
                let status = http
                    .post(&hook)
                    .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
                    .json(&update)
                    .send()
                    .await
                    .expect("post the update")
                    .status();
                assert!(status.is_success(), "webhook answered {status}");
                let deadline = Instant::now() + WAIT;
                loop {
                    let change = telegram.next_change(WAIT);
                    if telegram.bot_messages(user).len() > before {
                        break;
                    }
                    assert!(Instant::now() < deadline, "user {user} got no reply");
                    change.await;
                }
                latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    let turns = latencies.len();
    json!({"instances_behind_balancer": true, "concurrency": clients, "turns": turns,
           "turns_per_s": (turns as f64 / elapsed).round(),
           "latency": percentiles(latencies)})
}

/// CPU time (user + system) of `pid` in milliseconds, from `/proc/<pid>/stat`.
fn cpu_ms(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum())
        .unwrap_or(0.0);
    // USER_HZ is 100 on Linux.
    ticks * 10.0
}

/// CPU time of the PostgreSQL server: the postmaster and every backend it forked.
fn postgres_cpu_ms(cluster: &PgCluster) -> f64 {
    let pid_file = cluster.dir().join("data/postmaster.pid");
    let Some(postmaster) = std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|s| s.lines().next().and_then(|l| l.trim().parse::<u32>().ok()))
    else {
        return 0.0;
    };
    let mut total = cpu_ms(postmaster);
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let parent = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                let rest = s[s.rfind(')')? + 2..].to_owned();
                rest.split_whitespace().nth(1)?.parse::<u32>().ok()
            });
        if parent == Some(postmaster) {
            // Backends that exited took their CPU time with them into the postmaster's
            // children counters, which `cpu_ms` does not read: a lower bound, noted below.
            total += cpu_ms(pid);
        }
    }
    total
}

/// As [`support::api_throughput`] over the instances' APIs.
async fn throughput(instances: &[Instance], clients: usize, per_client: usize) -> Value {
    let urls: Vec<String> = instances.iter().map(|i| i.api.clone()).collect();
    support::api_throughput(&urls, KEY, clients, per_client).await
}

/// CPU time of every instance, in milliseconds.
fn hermesd_cpu(instances: &[Instance]) -> f64 {
    instances.iter().map(|i| cpu_ms(i.daemon.child.id())).sum()
}

/// A measured run of `path` (the API or the chat), with its CPU per turn and, on
/// PostgreSQL, its database round trips and statements per turn (every proxy's counts over
/// the run, background work included: renewals, sweeps and polls are a few per second).
async fn measured<F: std::future::Future<Output = Value>>(
    instances: &[Instance],
    cluster: Option<&PgCluster>,
    path: F,
) -> Value {
    let (h0, p0) = (hermesd_cpu(instances), cluster.map_or(0.0, postgres_cpu_ms));
    let (r0, s0) = database_traffic(instances);
    let mut run = path.await;
    let (r1, s1) = database_traffic(instances);
    let (h1, p1) = (hermesd_cpu(instances), cluster.map_or(0.0, postgres_cpu_ms));
    let turns = run["turns"].as_f64().unwrap_or(1.0).max(1.0);
    run["hermesd_cpu_ms_per_turn"] = json!(round((h1 - h0) / turns));
    if cluster.is_some() {
        run["postgres_cpu_ms_per_turn"] = json!(round((p1 - p0) / turns));
        run["round_trips_per_turn"] = json!(round((r1 - r0) as f64 / turns));
        run["statements_per_turn"] = json!(round((s1 - s0) as f64 / turns));
    }
    run
}

/// One scenario: `count` instances on `backend`, each serving the API and a Telegram
/// webhook; a warm-up, then the measured API run, then the measured chat run (through a
/// balancer); on PostgreSQL, then the idle cluster's database traffic. The API run's figures
/// are the scenario's top-level fields (as before the chat path was added).
async fn scenario(
    model: &FakeModel,
    backend: Backend<'_>,
    cluster: Option<&PgCluster>,
    count: usize,
    clients: usize,
    per_client: usize,
) -> Value {
    let telegram = Arc::new(FakeTelegram::start().await);
    let mut instances = Vec::new();
    for n in 0..count {
        instances.push(spawn_with(model, backend, &format!("bench-{n}"), Some(&telegram)).await);
    }
    let balancer =
        RoundRobin::start(instances.iter().filter_map(|i| i.hook.clone()).collect()).await;
    let update_ids = Arc::new(AtomicI64::new(1));
    throughput(&instances, 4, 5).await;
    let mut run = measured(
        &instances,
        cluster,
        throughput(&instances, clients, per_client),
    )
    .await;
    let hook = balancer.url();
    chat_throughput(&telegram, &hook, &update_ids, 4, 3).await;
    let chat = chat_throughput(&telegram, &hook, &update_ids, clients, per_client);
    run["chat"] = measured(&instances, cluster, chat).await;
    run["backend"] = json!(if cluster.is_some() {
        "postgres"
    } else {
        "sqlite"
    });
    if cluster.is_some() {
        let (r0, s0) = database_traffic(&instances);
        tokio::time::sleep(IDLE).await;
        let (r1, s1) = database_traffic(&instances);
        let seconds = IDLE.as_secs_f64();
        run["idle"] = json!({
            "seconds": seconds,
            "round_trips_per_s": round((r1 - r0) as f64 / seconds),
            "statements_per_s": round((s1 - s0) as f64 / seconds),
        });
    }
    run
}

/// Each path's turns/s on one PostgreSQL instance as a share of one SQLite instance's.
fn postgres_share(runs: &[Value]) -> Value {
    let share = |path: &dyn Fn(&Value) -> f64| {
        let (sqlite, postgres) = (path(&runs[0]), path(&runs[1]));
        if sqlite > 0.0 {
            (postgres / sqlite * 100.0).round()
        } else {
            0.0
        }
    };
    json!({
        "api_percent": share(&|r| r["turns_per_s"].as_f64().unwrap_or(0.0)),
        "chat_percent": share(&|r| r["chat"]["turns_per_s"].as_f64().unwrap_or(0.0)),
    })
}

/// Kill -9 of the instance running a session's turn, then the time until another instance
/// answers that session's next message (the dead holder's session lease must expire first).
async fn failover(model: &FakeModel, url: &str, lease_seconds: u64) -> Value {
    let backend = Backend::Postgres { url, lease_seconds };
    let mut doomed = spawn(model, backend, "doomed").await;
    let survivor = spawn(model, backend, "survivor").await;
    let session = format!("failover-{}", rand::random::<u32>());
    let (held, _gate) = Step::gated("never sent");
    model.push(held);
    let before = model.requests().len();
    let http = reqwest::Client::new();
    let body = json!({"messages": [{"role": "user", "content": "a turn that dies"}]});
    let dying = tokio::spawn({
        let (http, url, session, body) = (http.clone(), doomed.api.clone(), session.clone(), body);
        async move {
            let _ = http
                .post(url)
                .bearer_auth(KEY)
                .header("X-Hermes-Session-Id", session)
                .json(&body)
                .send()
                .await;
        }
    });
    model
        .wait_for_requests(before + 1, Duration::from_secs(60))
        .await;
    doomed.daemon.child.kill().expect("kill -9");
    let _ = doomed.daemon.child.wait();
    let killed = Instant::now();
    let _ = dying.await;
    let response = http
        .post(&survivor.api)
        .bearer_auth(KEY)
        .header("X-Hermes-Session-Id", &session)
        .timeout(Duration::from_secs(lease_seconds * 4 + 60))
        .json(&json!({"messages": [{"role": "user", "content": "anyone there?"}]}))
        .send()
        .await
        .expect("the survivor answers");
    assert!(response.status().is_success(), "{}", response.status());
    let _ = response.bytes().await;
    let took = killed.elapsed().as_secs_f64();
    json!({"lease_seconds": lease_seconds, "kill_to_first_reply_s": (took * 100.0).round() / 100.0})
}

/// The written model's inputs: per-turn CPU, and what one PostgreSQL core could carry.
fn scaling_model(runs: &[Value], cores: f64) -> Value {
    let pg_runs: Vec<&Value> = runs.iter().filter(|r| r["backend"] == "postgres").collect();
    let Some(widest) = pg_runs.last() else {
        return json!(null);
    };
    let h = widest["hermesd_cpu_ms_per_turn"].as_f64().unwrap_or(0.0);
    let p = widest["postgres_cpu_ms_per_turn"].as_f64().unwrap_or(0.0);
    json!({
        "cores_here": cores,
        "hermesd_cpu_ms_per_turn": h,
        "postgres_cpu_ms_per_turn": p,
        "cpu_bound_turns_per_s_here": if h + p > 0.0 { (cores * 1000.0 / (h + p)).round() } else { 0.0 },
        "turns_per_s_per_postgres_core": if p > 0.0 { (1000.0 / p).round() } else { 0.0 },
        "note": "postgres CPU counts live backends only (a lower bound)"
    })
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // The smallest run, to check the harness in a debug build.
    let tiny = std::env::args().any(|a| a == "--tiny");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(async {
        let model = FakeModel::start_in_background();
        let (clients, per_client) = match (tiny, quick) {
            (true, _) => (4, 5),
            (false, true) => (16, 10),
            (false, false) => (16, 60),
        };
        let mut runs = Vec::new();
        runs.push(scenario(&model, Backend::Sqlite, None, 1, clients, per_client).await);
        for count in [1, 3] {
            let cluster = PgCluster::start();
            let url = cluster.url();
            let backend = Backend::Postgres {
                url: &url,
                lease_seconds: 15,
            };
            runs.push(scenario(&model, backend, Some(&cluster), count, clients, per_client).await);
        }
        let cluster = PgCluster::start();
        let lease_seconds = if quick || tiny { 3 } else { 15 };
        let failover = failover(&model, &cluster.url(), lease_seconds).await;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        json!({"benchmark": "cluster", "quick": quick, "tiny": tiny, "runs": runs,
               "one_postgres_instance_vs_sqlite": postgres_share(&runs),
               "failover": failover, "scaling_model": scaling_model(&runs, cores)})
    });
    let text = serde_json::to_string_pretty(&report).unwrap();
    println!("{text}");
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-cluster.json");
    let _ = std::fs::write(out, text);
}
