//! Soak and fault test: the RELEASE `hermesd run` binary serving Telegram, Discord, Slack
//! (wire-level fakes in this process) and the HTTP API, answering through the echoing fake
//! model, under a steady mixed load for `--minutes N` (default 10; `--seconds N` for CI)
//! while faults are injected every few seconds and the daemon is `kill -9`ed and restarted
//! every few minutes. At the end it stops sending, waits (bounded) until every message is
//! answered, stops the daemon with SIGTERM and prints one JSON report (also
//! `target/bench-soak.json`). Exit status 1 when a target is missed: a message lost or
//! answered twice without the recovered marker, a reply given up on (a failure notice or an
//! abandoned ledger row; the report's verdict says "N lost, N duplicated, N abandoned"), a
//! bad API answer, state.db not intact,
//! descriptors growing, RSS growing more than 5 % after warm-up (judged only when an
//! incarnation ran long enough), a token or key in the daemon's log, or an unclean exit.
//!
//! Options: `--minutes N`, `--seconds N`, `--seed N` (printed; reruns the same fault and
//! load schedule), `--users N` per platform, `--fault-every-secs S`, `--kill-every-secs S`,
//! `--seed-db-mb N` (start on a state.db already holding N MiB of conversations).

#[path = "../tests/support/daemon.rs"]
mod daemon;
#[path = "../tests/support/fake_model.rs"]
mod fake_model;
#[path = "soak/faults.rs"]
mod faults;
#[path = "soak/fds.rs"]
mod fds;
#[path = "soak/incarnations.rs"]
mod incarnations;
#[path = "soak/ledger.rs"]
mod ledger;
#[path = "soak/load.rs"]
mod load;
#[path = "soak/options.rs"]
mod options;
#[path = "soak/report.rs"]
mod report;
#[path = "soak/seed.rs"]
mod seed;
mod support;
#[path = "../src/bin/hermesd-stress/workload.rs"]
mod workload;
#[path = "soak/world.rs"]
mod world;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use ledger::{Ledger, Platform};
use load::{ApiCounts, LastSlackEnvelope};

/// How long the end waits for the last replies.
const QUIESCENCE_BOUND: Duration = Duration::from_secs(150);
/// Replies must stop changing for this long before the count is final (a late duplicate
/// would show up here).
const SETTLE: Duration = Duration::from_secs(5);

fn main() {
    let options = options::Options::from_args();
    println!(
        "soak: seed = {} (rerun with --seed {}), load {} s, {} users per platform",
        options.seed,
        options.seed,
        options.duration.as_secs(),
        options.users
    );
    println!("soak: daemon binary {}", daemon::daemon_binary().display());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (report, ok) = runtime.block_on(run(options));
    let text = report.to_string();
    println!("{text}");
    println!("soak: {}", report["verdict"].as_str().unwrap_or_default());
    let _ = std::fs::write(
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-soak.json"),
        &text,
    );
    if !ok {
        eprintln!("soak: a target was missed (see \"failures\" in the report)");
        std::process::exit(1);
    }
}

async fn run(options: options::Options) -> (serde_json::Value, bool) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(options.seed);
    let world = Arc::new(world::World::start(options.users).await);
    let home = support::bench_dir();
    world.write_config(home.path());
    let seeded = if options.seed_db_mb > 0 {
        seed::seed(
            &home.path().join("state.db"),
            options.seed_db_mb,
            options.seed,
        )
        .await
    } else {
        serde_json::Value::Null
    };
    let log_dir = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/soak"));
    let supervisor = incarnations::Supervisor::start(
        home.path().to_path_buf(),
        world.env(home.path()),
        world.secrets(),
        log_dir.clone(),
        world.port_names(),
    )
    .await;
    let ledger = Arc::new(Ledger::new(rng.random_range(1000..10_000)));
    let last_slack = Arc::new(LastSlackEnvelope::default());
    let api = Arc::new(ApiCounts::default());
    let fault_counts = faults::FaultCounts::default();
    let stop_load = CancellationToken::new();
    let stop_watch = CancellationToken::new();

    // Background: reply collection and /proc sampling until the very end.
    let watcher = {
        let (world, ledger, supervisor, stop) = (
            world.clone(),
            ledger.clone(),
            supervisor.clone(),
            stop_watch.clone(),
        );
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            for n in 0u64.. {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => {}
                }
                ledger.collect(&world);
                if n % 2 == 0 {
                    supervisor.sample();
                }
            }
        })
    };

    let started = tokio::time::Instant::now();
    let mut load = Vec::new();
    for platform in Platform::ALL {
        for user in 0..options.users {
            load.push(tokio::spawn(load::user(
                world.clone(),
                ledger.clone(),
                last_slack.clone(),
                platform,
                user,
                rng.random(),
                stop_load.clone(),
            )));
        }
    }
    for client in 0..2 {
        load.push(tokio::spawn(load::api_client(
            supervisor.clone(),
            api.clone(),
            client,
            rng.random(),
            stop_load.clone(),
        )));
    }
    load.push(tokio::spawn(faults::injector(
        world.clone(),
        last_slack.clone(),
        options.fault_every,
        rng.random(),
        fault_counts.clone(),
        stop_load.clone(),
    )));
    let kill_times = faults::kill_times(options.duration, options.kill_every, options.seed);
    let killer = tokio::spawn(faults::killer(
        supervisor.clone(),
        kill_times,
        started,
        stop_load.clone(),
    ));
    let redelivery = tokio::spawn(faults::slack_redelivery(world.clone(), stop_watch.clone()));

    tokio::time::sleep_until(started + options.duration).await;
    println!("soak: load done, waiting for the last replies");
    stop_load.cancel();
    for task in load {
        let _ = task.await;
    }
    let kills = killer.await.unwrap_or(0);

    // Quiescence: every message answered and nothing new for SETTLE, within the bound.
    let quiet_started = tokio::time::Instant::now();
    let mut changes = ledger.changed.subscribe();
    let quiescent = loop {
        let settled = tokio::time::timeout(SETTLE, changes.changed())
            .await
            .is_err();
        if settled && ledger.unanswered() == 0 {
            break true;
        }
        if quiet_started.elapsed() > QUIESCENCE_BOUND {
            break false;
        }
    };
    let quiescence_s = quiet_started.elapsed().as_secs();
    let exit_code = supervisor.terminate().await;
    stop_watch.cancel();
    let _ = watcher.await;
    let slack_redelivered = redelivery.await.unwrap_or(0);
    ledger.collect(&world);

    let inputs = report::Inputs {
        options: &options,
        ledger: &ledger,
        api: &api,
        supervisor: &supervisor,
        faults: &fault_counts.lock().unwrap(),
        kills,
        slack_redelivered,
        quiescent,
        quiescence_s,
        exit_code,
        state_db: &home.path().join("state.db"),
        log_dir: &log_dir,
        seeded: &seeded,
    };
    report::build(&inputs)
}
