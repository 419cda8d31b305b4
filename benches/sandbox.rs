//! Terminal backend benchmark (issue 30): how long the first command of a scope takes (cold:
//! the backend is opened — a bubblewrap sandbox's directory made, a container created and
//! started, an SSH connection made — then `true` runs) and a later one (warm: `true` on the
//! open backend), and the memory an idle open sandbox holds. Backends: the host (`local`),
//! bubblewrap, a container on a real engine (podman's Docker API service,
//! `tests/support/podman_engine.rs`) and a real sshd. Prints one JSON report (also written
//! to `target/bench-sandbox.json`). `-- --quick` is the CI size.

#[path = "../tests/support/podman_engine.rs"]
#[allow(dead_code)]
mod podman_engine;
#[path = "../tests/ssh_support/sshd.rs"]
mod sshd;
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermesd::config::{DockerSettings, TerminalConfig};
use hermesd::tools::backend::{
    Backend, BackendFactory, BwrapFactory, DockerFactory, Exec, LocalBackend, LocalFactory, Scope,
    SshFactory,
};
use serde_json::{Value, json};
use support::{percentiles, rss_kib};
use tokio_util::sync::CancellationToken;

fn env() -> BTreeMap<String, String> {
    BTreeMap::from([(
        "PATH".to_owned(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_owned()),
    )])
}

fn scope(i: usize) -> Scope {
    Scope::Chat {
        platform: "bench".to_owned(),
        chat_id: i.to_string(),
    }
}

async fn run_true(backend: &Arc<dyn Backend>) {
    let exec = Exec {
        script: "true".to_owned(),
        cwd: backend.default_cwd(),
        env: BTreeMap::new(),
        timeout: Duration::from_secs(120),
        max_chars: 1000,
    };
    let run = backend
        .run(&exec, &CancellationToken::new())
        .await
        .expect("run");
    assert_eq!(run.exit_code, 0, "{}", run.output);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Opens `cold_n` scopes (timing open + first `true`), then times `warm_n` later commands.
async fn measure(
    factory: &dyn BackendFactory,
    cold_n: usize,
    warm_n: usize,
) -> (Value, Value, Vec<Arc<dyn Backend>>) {
    let mut cold = Vec::new();
    let mut open = Vec::new();
    for i in 0..cold_n {
        let started = Instant::now();
        let backend = factory.open(&scope(i)).await.expect("open");
        run_true(&backend).await;
        cold.push(ms(started.elapsed()));
        open.push(backend);
    }
    let mut warm = Vec::new();
    for i in 0..warm_n {
        let started = Instant::now();
        run_true(&open[i % open.len()]).await;
        warm.push(ms(started.elapsed()));
    }
    (percentiles(cold), percentiles(warm), open)
}

fn report(name: &str, cold: Value, warm: Value, idle_kib: f64, how: &str) -> Value {
    eprintln!("{name}: done");
    json!({
        "backend": name,
        "cold": cold,
        "warm": warm,
        "idle_kib_per_sandbox": idle_kib,
        "idle_measured_as": how,
    })
}

/// The memory the engine reports for each of this bench's containers, averaged.
async fn container_idle_kib(engine: &podman_engine::Podman) -> f64 {
    let (_, list) = engine
        .json(
            "GET",
            "/v1.41/containers/json?filters=%7B%22label%22%3A%5B%22hermesd%3D1%22%5D%7D",
        )
        .await;
    let ids: Vec<String> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["Id"].as_str().map(str::to_owned))
        .collect();
    let mut total = 0u64;
    for id in &ids {
        let (_, stats) = engine
            .json("GET", &format!("/v1.41/containers/{id}/stats?stream=false"))
            .await;
        total += stats["memory_stats"]["usage"].as_u64().unwrap_or(0);
    }
    (total as f64 / ids.len().max(1) as f64 / 1024.0).round()
}

/// The processes whose parent is `pid` (sshd's per-connection session processes).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|stat| {
                    let after = stat
                        .rsplit_once(')')?
                        .1
                        .split_whitespace()
                        .nth(1)?
                        .to_owned();
                    after.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// RSS of `pid`'s whole process tree below it.
fn tree_rss_kib(pid: u32) -> u64 {
    children(pid)
        .into_iter()
        .map(|child| rss_kib(child) + tree_rss_kib(child))
        .sum()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (cold_n, warm_n) = if quick { (3, 10) } else { (10, 100) };
    let dir = support::bench_dir();
    let mut results = Vec::new();

    let host = LocalFactory(Arc::new(LocalBackend::new(
        dir.path().to_path_buf(),
        vec![dir.path().to_path_buf()],
    )));
    let (cold, warm, _) = measure(&host, cold_n, warm_n).await;
    results.push(report(
        "local",
        cold,
        warm,
        0.0,
        "no process between commands",
    ));

    let bwrap = BwrapFactory::new(dir.path().join("bwrap"), false, None, &env())
        .expect("bubblewrap installed");
    let (cold, warm, _) = measure(&bwrap, cold_n, warm_n).await;
    results.push(report(
        "bubblewrap",
        cold,
        warm,
        0.0,
        "no process between commands; a sandbox is its directory",
    ));

    let engine = podman_engine::Podman::start().await;
    let settings = DockerSettings {
        image: podman_engine::IMAGE.to_owned(),
        host: Some(engine.host()),
        persistent: false,
        ..DockerSettings::default()
    };
    let terminal = TerminalConfig {
        sandbox_dir: Some(dir.path().join("sandboxes")),
        ..TerminalConfig::default()
    };
    let docker = DockerFactory::new(&settings, &terminal, dir.path()).expect("docker settings");
    let (cold, warm, open) = measure(&docker, cold_n, warm_n).await;
    let idle = container_idle_kib(&engine).await;
    for backend in &open {
        backend.shutdown().await;
    }
    results.push(report(
        "docker (podman 4, runc, busybox image)",
        cold,
        warm,
        idle,
        "the engine's stats memory_stats.usage per idle container",
    ));
    drop(engine);

    let server = sshd::Sshd::start();
    let ssh = SshFactory::new(&server.settings(), &TerminalConfig::default(), server.dir())
        .expect("ssh settings");
    let (cold, warm, open) = measure(&ssh, cold_n, warm_n).await;
    let sessions = tree_rss_kib(server.pid().expect("sshd runs"));
    for backend in &open {
        backend.shutdown().await;
    }
    results.push(report(
        "ssh (OpenSSH 9 on loopback)",
        cold,
        warm,
        (sessions as f64 / open.len() as f64).round(),
        "one connection serves every scope: the remote sshd session processes' RSS, divided by the open scopes",
    ));

    let report = json!({
        "benchmark": "sandbox",
        "quick": quick,
        "results": results,
    });
    let text = serde_json::to_string_pretty(&report).unwrap();
    println!("{text}");
    let _ = std::fs::write("target/bench-sandbox.json", &text);
}
