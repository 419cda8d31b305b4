//! Cluster benchmark (issue 22), through the real binary's HTTP API with a fake model that
//! answers at once: turns/s and latency for one instance on SQLite, one instance on
//! PostgreSQL and three instances sharing one PostgreSQL; the CPU each turn costs hermesd and
//! PostgreSQL (from `/proc`), from which the report derives where PostgreSQL becomes the
//! limit; and failover time: an instance is killed (SIGKILL) in the middle of a session's
//! turn, and the clock runs until another instance has answered that session's next
//! message. A private PostgreSQL cluster (`tests/support/postgres.rs`) is started per run.
//! Prints one JSON report (also written to `target/bench-cluster.json`). `-- --quick` is the
//! CI size.

#[path = "../tests/support/fake_model.rs"]
mod fake_model;
#[path = "../tests/support/postgres.rs"]
#[allow(dead_code)]
mod postgres;
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use fake_model::{FakeModel, Step};
use postgres::PgCluster;
use serde_json::{Value, json};
use support::{Daemon, bench_dir, daemon_command, free_port, round};

const KEY: &str = "bench-api-key-0123456789abcdef";

/// Where an instance keeps its state.
#[derive(Clone, Copy)]
enum Backend<'a> {
    Sqlite,
    Postgres { url: &'a str, lease_seconds: u64 },
}

struct Instance {
    daemon: Daemon,
    api: String,
    _home: tempfile::TempDir,
}

async fn spawn(model: &FakeModel, backend: Backend<'_>, name: &str) -> Instance {
    let home = bench_dir();
    let (api_port, admin_port) = (free_port(), free_port());
    let mut command = daemon_command(home.path(), admin_port, &model.base_url());
    command
        .env("API_SERVER_KEY", KEY)
        .env("API_SERVER_PORT", api_port.to_string())
        .env("HERMES__PLATFORMS__API_SERVER__MAX_CONCURRENT_RUNS", "0")
        .env("HERMES__AUXILIARY__TITLE_GENERATION__ENABLED", "false");
    if let Backend::Postgres { url, lease_seconds } = backend {
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
        _home: home,
    }
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

/// One scenario: `count` instances on `backend`, a warm-up, then the measured run with the
/// CPU spent per turn by hermesd and (on PostgreSQL) the server.
async fn scenario(
    model: &FakeModel,
    backend: Backend<'_>,
    cluster: Option<&PgCluster>,
    count: usize,
    clients: usize,
    per_client: usize,
) -> Value {
    let mut instances = Vec::new();
    for n in 0..count {
        instances.push(spawn(model, backend, &format!("bench-{n}")).await);
    }
    throughput(&instances, 4, 5).await;
    let hermesd_cpu = |instances: &[Instance]| -> f64 {
        instances.iter().map(|i| cpu_ms(i.daemon.child.id())).sum()
    };
    let (h0, p0) = (
        hermesd_cpu(&instances),
        cluster.map_or(0.0, postgres_cpu_ms),
    );
    let mut run = throughput(&instances, clients, per_client).await;
    let (h1, p1) = (
        hermesd_cpu(&instances),
        cluster.map_or(0.0, postgres_cpu_ms),
    );
    let turns = run["turns"].as_f64().unwrap_or(1.0).max(1.0);
    run["backend"] = json!(if cluster.is_some() {
        "postgres"
    } else {
        "sqlite"
    });
    run["hermesd_cpu_ms_per_turn"] = json!(round((h1 - h0) / turns));
    if cluster.is_some() {
        run["postgres_cpu_ms_per_turn"] = json!(round((p1 - p0) / turns));
    }
    run
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(async {
        let model = FakeModel::start_in_background();
        let (clients, per_client) = if quick { (16, 10) } else { (16, 60) };
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
        let lease_seconds = if quick { 3 } else { 15 };
        let failover = failover(&model, &cluster.url(), lease_seconds).await;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        json!({"benchmark": "cluster", "quick": quick, "runs": runs,
               "failover": failover, "scaling_model": scaling_model(&runs, cores)})
    });
    let text = serde_json::to_string_pretty(&report).unwrap();
    println!("{text}");
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-cluster.json");
    let _ = std::fs::write(out, text);
}
