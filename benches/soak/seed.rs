//! `--seed-db-mb N`: before the daemon first starts, state.db is filled with N MiB of
//! realistic finished conversations (the stress tool's seeded messages: 200–800 characters,
//! some CJK, some tool-call JSON; 200 messages a session, sessions spread over the three
//! platforms), written through the store's own writer, so the FTS index and every table
//! are as a long-lived home's would be. On such a database the SQLite page caches can
//! reach their caps early in the run instead of growing with a database that starts
//! empty, so RSS growth after warm-up is judged with the caches' ceiling in view.

use std::path::Path;
use std::time::Instant;

use hermesd::state::{NewSession, Store};
use serde_json::{Value, json};

use crate::workload::Workload;

/// Messages in each seeded session.
const MESSAGES_PER_SESSION: usize = 200;
/// Sessions written at once (the writer groups their commits).
const WRITERS: usize = 16;

fn db_bytes(path: &Path) -> u64 {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    size(path) + size(&path.with_extension("db-wal"))
}

/// Fills `path` up to `mib` MiB; returns what was written.
pub async fn seed(path: &Path, mib: u64, seed: u64) -> Value {
    let started = Instant::now();
    let store = Store::open(path).expect("open state.db to seed it");
    let target = mib * 1024 * 1024;
    let platforms = ["telegram", "discord", "slack"];
    let mut sessions = 0usize;
    while db_bytes(path) < target {
        let mut batch = Vec::new();
        for w in 0..WRITERS {
            let (store, n) = (store.clone(), sessions + w);
            batch.push(tokio::spawn(async move {
                let id = format!("seeded-{n}");
                store
                    .create_session(NewSession::new(id.clone(), platforms[n % 3]))
                    .await
                    .expect("seed a session");
                let mut workload = Workload::new(seed ^ n as u64);
                for _ in 0..MESSAGES_PER_SESSION {
                    store
                        .append_message(workload.message(&id))
                        .await
                        .expect("seed a message");
                }
                store.end_session(&id, "idle").await.expect("end a session");
            }));
        }
        for task in batch {
            task.await.expect("seeding task");
        }
        sessions += WRITERS;
    }
    store.close().await;
    let report = json!({
        "seeded_mib": (db_bytes(path) as f64 / 1_048_576.0 * 10.0).round() / 10.0,
        "sessions": sessions,
        "messages": sessions * MESSAGES_PER_SESSION,
        "seconds": started.elapsed().as_secs(),
    });
    println!("soak: seeded state.db: {report}");
    report
}
