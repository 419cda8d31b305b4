//! `hermesd-stress`: appends a seeded stream of realistic messages to a state.db from one OS
//! process, for the multi-process tests and the storage benchmark.
//!
//! With `--print-acks` it prints `ack <seq> <message id>` (flushed) the moment each write is
//! confirmed, so a test that `kill -9`s it knows exactly which writes were promised. At the
//! end it prints one JSON summary line.

mod workload;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use hermesd::state::{NewSession, Store};
use tokio::sync::Mutex;

#[derive(Debug, Parser)]
struct Args {
    #[arg(long)]
    db: PathBuf,
    /// Messages go to sessions `<prefix>-0 .. <prefix>-<sessions-1>`.
    #[arg(long, default_value = "stress")]
    session_prefix: String,
    #[arg(long, default_value_t = 1)]
    sessions: usize,
    #[arg(long)]
    count: usize,
    /// Concurrent appenders inside this process.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long)]
    print_acks: bool,
}

#[derive(Debug, serde::Serialize)]
struct Summary {
    appended: usize,
    errors: usize,
    first_error: Option<String>,
    elapsed_s: f64,
    rate_per_s: f64,
    p50_us: u64,
    p99_us: u64,
    max_us: u64,
    /// Batches the writer retried because another process held the write lock.
    lock_retries: u64,
    commits: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Args::parse();
    eprintln!("hermesd-stress: seed {}", args.seed);
    let store = match Store::open(&args.db) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("hermesd-stress: cannot open {}: {e}", args.db.display());
            std::process::exit(1);
        }
    };
    let sessions: Vec<String> = (0..args.sessions.max(1))
        .map(|i| format!("{}-{i}", args.session_prefix))
        .collect();
    for id in &sessions {
        if let Err(e) = store
            .create_session(NewSession::new(id.clone(), "stress"))
            .await
        {
            eprintln!("hermesd-stress: create session {id}: {e}");
            std::process::exit(1);
        }
    }
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let stdout = Arc::new(Mutex::new(std::io::stdout()));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..args.concurrency.max(1) {
        let (store, next, stdout, sessions) = (
            store.clone(),
            Arc::clone(&next),
            Arc::clone(&stdout),
            sessions.clone(),
        );
        let (count, print_acks) = (args.count, args.print_acks);
        let mut workload = workload::Workload::new(args.seed.wrapping_mul(1000) + worker as u64);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = Vec::new();
            loop {
                let seq = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if seq >= count {
                    break;
                }
                let message = workload.message(&sessions[seq % sessions.len()]);
                let t = Instant::now();
                match store.append_message(message).await {
                    Ok(id) => {
                        latencies.push(t.elapsed().as_micros() as u64);
                        if print_acks {
                            let mut out = stdout.lock().await;
                            let _ = writeln!(out, "ack {seq} {id}");
                            let _ = out.flush();
                        }
                    }
                    Err(e) => errors.push(e.to_string()),
                }
            }
            (latencies, errors)
        }));
    }
    let mut latencies = Vec::new();
    let mut errors = Vec::new();
    for task in tasks {
        let (l, e) = task.await.unwrap_or_default();
        latencies.extend(l);
        errors.extend(e);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let lock_retries = store
        .stats()
        .lock_retries
        .load(std::sync::atomic::Ordering::Relaxed);
    let commits = store
        .stats()
        .commits
        .load(std::sync::atomic::Ordering::Relaxed);
    store.close().await;
    latencies.sort_unstable();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let summary = Summary {
        appended: latencies.len(),
        errors: errors.len(),
        first_error: errors.first().cloned(),
        elapsed_s: elapsed,
        rate_per_s: latencies.len() as f64 / elapsed.max(1e-9),
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        max_us: latencies.last().copied().unwrap_or(0),
        lock_retries,
        commits,
    };
    println!(
        "{}",
        serde_json::to_string(&summary).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    );
    std::process::exit(if errors.is_empty() { 0 } else { 2 });
}
