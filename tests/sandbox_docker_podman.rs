//! The docker backend against a real engine: podman's Docker API service (started per test
//! with its own storage) and a busybox image. Through `DockerFactory` only: a scope's
//! container runs commands with the configured limits and no network, files round-trip
//! byte for byte, a timed-out command is really killed, a container removed from outside
//! mid-command is reported gone and the next open gets a fresh one, shutdown removes it and
//! the start-up sweep removes what a killed daemon left. Prints the latency and memory
//! figures (run with `--nocapture`).

#[path = "support/podman_engine.rs"]
mod podman_engine;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermesd::config::{DockerSettings, TerminalConfig};
use hermesd::tools::backend::{Backend, BackendFactory, DockerFactory, Exec, Scope};
use podman_engine::{IMAGE, Podman};
use tokio_util::sync::CancellationToken;

fn exec(script: &str, timeout: Duration) -> Exec {
    Exec {
        script: script.to_owned(),
        cwd: "/root".to_owned(),
        env: BTreeMap::from([("GREETING".to_owned(), "hello from env".to_owned())]),
        timeout,
        max_chars: 50_000,
    }
}

fn factory(engine: &Podman, home: &std::path::Path) -> DockerFactory {
    let settings = DockerSettings {
        image: IMAGE.to_owned(),
        network: false,
        cpu: 1.0,
        memory_mb: 256,
        disk_mb: 100,
        persistent: true,
        host: Some(engine.host()),
        ..DockerSettings::default()
    };
    let terminal = TerminalConfig {
        sandbox_dir: Some(home.join("sandboxes")),
        ..TerminalConfig::default()
    };
    DockerFactory::new(&settings, &terminal, home).expect("docker settings")
}

/// The engine's view of the scope's container (found by its labels).
async fn container_of(engine: &Podman, scope: &Scope) -> Option<serde_json::Value> {
    let filters = format!(r#"{{"label":["hermesd.scope={}"]}}"#, scope.id());
    let path = format!(
        "/v1.41/containers/json?all=true&filters={}",
        url_escape(&filters)
    );
    let (status, list) = engine.json("GET", &path).await;
    assert_eq!(status, 200, "{list}");
    list.as_array().and_then(|l| l.first().cloned())
}

fn url_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn run(backend: &Arc<dyn Backend>, script: &str) -> hermesd::tools::backend::RunResult {
    backend
        .run(
            &exec(script, Duration::from_secs(60)),
            &CancellationToken::new(),
        )
        .await
        .unwrap_or_else(|e| panic!("{script}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_engine_runs_kills_and_replaces_scope_containers() {
    let engine = Podman::start().await;
    let home = engine.dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let factory = factory(&engine, &home);

    let probe = factory.probe().await.expect("probe");
    println!("probe: {probe}");
    assert!(probe.contains("Podman"), "{probe}");
    assert!(probe.contains(&engine.host()), "{probe}");

    let scope = Scope::Chat {
        platform: "telegram".to_owned(),
        chat_id: "-1001".to_owned(),
    };
    let cold = Instant::now();
    let backend = factory.open(&scope).await.expect("open");
    let first = run(
        &backend,
        "echo hi; id -u; echo \"$GREETING\"; cat /proc/1/cgroup",
    )
    .await;
    let cold = cold.elapsed();
    assert_eq!(first.exit_code, 0, "{}", first.output);
    assert!(
        first.output.starts_with("hi\n0\nhello from env\n"),
        "{}",
        first.output
    );
    assert!(!first.output.contains("hermesd-end"), "{}", first.output);
    println!("/proc/1/cgroup in the container:\n{}", first.output);
    assert_eq!(backend.default_cwd(), "/root");
    assert!(backend.host_roots().is_none());

    // The limits and the isolation reached the engine.
    let summary = container_of(&engine, &scope)
        .await
        .expect("container listed");
    let id = summary["Id"].as_str().expect("id").to_owned();
    let (_, inspect) = engine
        .json("GET", &format!("/v1.41/containers/{id}/json"))
        .await;
    let host = &inspect["HostConfig"];
    assert_eq!(host["NetworkMode"], "none", "{host}");
    assert_eq!(host["Memory"], 256 * 1024 * 1024, "{host}");
    assert_eq!(host["PidsLimit"], 256, "{host}");
    assert_eq!(host["NanoCpus"], 1_000_000_000i64, "{host}");
    assert_eq!(inspect["Config"]["Labels"]["hermesd"], "1");
    let name = inspect["Name"]
        .as_str()
        .unwrap_or_default()
        .trim_start_matches('/');
    assert!(
        name.starts_with("hermesd-") && name.ends_with(&scope.id()),
        "{name}"
    );

    let warm_runs = 10;
    let warm = Instant::now();
    for _ in 0..warm_runs {
        assert_eq!(run(&backend, "true").await.exit_code, 0);
    }
    let warm = warm.elapsed() / warm_runs;
    let status = run(&backend, "exit 7").await;
    assert_eq!(status.exit_code, 7);

    // Only the capabilities Hermes keeps (CHOWN, DAC_OVERRIDE, FOWNER, SETGID, SETUID) and
    // no way to gain more.
    let status = run(&backend, "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status").await;
    assert!(
        status.output.contains("CapEff:\t00000000000000cb"),
        "{}",
        status.output
    );
    assert!(
        status.output.contains("NoNewPrivs:\t1"),
        "{}",
        status.output
    );

    // A path the model chose is an argument, never shell text.
    let odd = "/root/it's $(touch pwned) `x` \"q\".txt";
    backend
        .write_file(odd, b"odd")
        .await
        .expect("write odd name");
    assert_eq!(
        backend.read_file(odd).await.expect("read odd"),
        Some(b"odd".to_vec())
    );
    assert!(
        run(&backend, "ls /root")
            .await
            .output
            .lines()
            .all(|l| l != "pwned")
    );

    // No network but loopback.
    let net = run(&backend, "cat /proc/net/dev").await;
    let interfaces: Vec<&str> = net
        .output
        .lines()
        .filter_map(|l| l.split_once(':').map(|(name, _)| name.trim()))
        .collect();
    assert_eq!(interfaces, vec!["lo"], "{}", net.output);

    // Files: binary-safe, parents made, relative to the home, missing is None.
    let data: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    backend
        .write_file("/root/deep/er/blob.bin", &data)
        .await
        .expect("write");
    let back = backend
        .read_file("/root/deep/er/blob.bin")
        .await
        .expect("read")
        .expect("present");
    assert!(back == data, "binary round trip differs");
    backend
        .write_file("note.txt", b"relative\n")
        .await
        .expect("write relative");
    assert_eq!(
        run(&backend, "cat /root/note.txt").await.output,
        "relative\n"
    );
    assert!(
        backend
            .read_file("/root/nothing-here")
            .await
            .expect("read")
            .is_none()
    );
    let persisted = home
        .join("sandboxes/docker")
        .join(scope.id())
        .join("home/note.txt");
    assert_eq!(
        std::fs::read(&persisted).expect("bind-mounted home"),
        b"relative\n"
    );

    // A timeout kills the command inside the container.
    let timed = backend
        .run(
            &exec("echo started; sleep 100", Duration::from_secs(2)),
            &CancellationToken::new(),
        )
        .await
        .expect("timed run");
    assert!(timed.timed_out);
    assert_eq!(timed.exit_code, 124);
    assert!(
        timed.output.starts_with("started\n")
            && timed.output.ends_with("[Command timed out after 2s]"),
        "{}",
        timed.output
    );
    let ps = run(&backend, "ps -o pid,args").await;
    assert!(
        !ps.output.contains("sleep 100"),
        "still running:\n{}",
        ps.output
    );

    // A child orphaned out of the command's tree (its parent subshell exited) is still in
    // the command's process group and dies with it.
    let orphaned = backend
        .run(
            &exec("(sleep 103 &); sleep 104", Duration::from_secs(2)),
            &CancellationToken::new(),
        )
        .await
        .expect("orphan run");
    assert!(orphaned.timed_out);
    let ps = run(&backend, "ps -o args").await;
    assert!(
        !ps.output.contains("sleep 103") && !ps.output.contains("sleep 104"),
        "still running:\n{}",
        ps.output
    );

    // A background job does not hold the command open.
    let background = run(&backend, "sleep 105 >/dev/null 2>&1 & echo started").await;
    assert_eq!(background.output, "started\n");
    let _ = run(&backend, "pkill -f 'sleep 105'").await;

    // An interrupt kills too.
    let cancel = CancellationToken::new();
    let interrupted = {
        let slow = exec("sleep 101", Duration::from_secs(60));
        let running = backend.run(&slow, &cancel);
        tokio::pin!(running);
        loop {
            tokio::select! {
                done = &mut running => break done.expect("interrupted run"),
                () = tokio::time::sleep(Duration::from_millis(100)) => {
                    let ps = run(&backend, "ps -o args").await;
                    if ps.output.contains("sleep 101") {
                        cancel.cancel();
                    }
                }
            }
        }
    };
    assert!(interrupted.interrupted);
    assert_eq!(interrupted.exit_code, 130);
    let ps = run(&backend, "ps -o args").await;
    assert!(!ps.output.contains("sleep 101"), "{}", ps.output);

    // Idle memory, from the engine's stats.
    let (_, stats) = engine
        .json("GET", &format!("/v1.41/containers/{id}/stats?stream=false"))
        .await;
    let idle_memory = stats["memory_stats"]["usage"].as_u64().unwrap_or(0);

    // Removed from outside mid-command: gone, then a fresh container.
    let long = exec("sleep 102", Duration::from_secs(60));
    let never = CancellationToken::new();
    let running = backend.run(&long, &never);
    tokio::pin!(running);
    let mut removed = false;
    let outcome = loop {
        tokio::select! {
            done = &mut running => break done,
            () = tokio::time::sleep(Duration::from_millis(100)), if !removed => {
                let ps = run(&backend, "ps -o args").await;
                if ps.output.contains("sleep 102") {
                    let (status, body) = engine
                        .request("DELETE", &format!("/v1.41/containers/{id}?force=true"), None)
                        .await
                        .expect("delete");
                    assert!(status < 300, "{status} {}", String::from_utf8_lossy(&body));
                    removed = true;
                }
            }
        }
    };
    let error = outcome.expect_err("a removed container is an error");
    assert!(error.is_gone(), "{error}");
    println!("after removal: {error}");
    assert!(
        backend
            .read_file("/root/note.txt")
            .await
            .expect_err("gone")
            .is_gone()
    );

    let fresh = factory.open(&scope).await.expect("fresh open");
    let again = run(&fresh, "cat /root/note.txt").await;
    assert_eq!(
        again.output, "relative\n",
        "the persistent home survives a new container"
    );
    let fresh_id = container_of(&engine, &scope).await.expect("fresh")["Id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_ne!(fresh_id, id);

    fresh.shutdown().await;
    let (status, _) = engine
        .json("GET", &format!("/v1.41/containers/{fresh_id}/json"))
        .await;
    assert_eq!(status, 404, "shutdown removes the container");
    assert!(
        fresh
            .run(&exec("true", Duration::from_secs(5)), &never)
            .await
            .expect_err("closed")
            .is_gone()
    );

    // A killed daemon's container is swept at the next start; other homes' are not.
    let other_home = engine.dir.path().join("other-home");
    std::fs::create_dir_all(&other_home).expect("other home");
    let other = factory_for(&engine, &other_home);
    let theirs = other
        .open(&Scope::Shared)
        .await
        .expect("other home's container");
    let _abandoned = factory.open(&Scope::Shared).await.expect("open shared");
    let restarted = factory_for(&engine, &home);
    assert_eq!(restarted.sweep().await.expect("sweep"), 1);
    assert_eq!(run(&theirs, "echo still here").await.output, "still here\n");
    theirs.shutdown().await;

    println!(
        "podman 4.3 (runc, cgroupfs v1), busybox image: first command cold (open + run) {} ms, warm run {} ms (mean of {warm_runs}), idle container memory {} KiB",
        cold.as_millis(),
        warm.as_millis(),
        idle_memory / 1024
    );
}

fn factory_for(engine: &Podman, home: &std::path::Path) -> DockerFactory {
    factory(engine, home)
}
