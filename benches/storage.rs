//! Storage benchmark: prints one JSON report (also written to `target/bench-storage.json`).
//!
//! `cargo bench --bench storage` runs everything; `-- --quick` runs a smaller version (CI);
//! `-- --cache-kib R,W` sets the readers' and the writer's page-cache caps (to compare).
//! Each append figure is measured on tmpfs (`/dev/shm`, CPU cost) and on disk (the target
//! directory). Set `HERMES_PYTHON` to a Python with `hermes-agent==0.19.0` installed to
//! measure the Python SessionDB alternately with hermesd in the same session.

#[path = "../src/bin/hermesd-stress/workload.rs"]
mod workload;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use hermesd::state::{NewMessage, NewSession, SearchQuery, Store, StoreOptions};
use serde_json::{Value, json};

const STRESS: &str = env!("CARGO_BIN_EXE_hermesd-stress");

struct Sizes {
    appends: usize,
    contention_per_process: usize,
    search_rows: usize,
    query_runs: usize,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn summary_ms(mut samples: Vec<f64>) -> Value {
    samples.sort_by(|a, b| a.total_cmp(b));
    json!({
        "p50_ms": round3(percentile(&samples, 0.5)),
        "p99_ms": round3(percentile(&samples, 0.99)),
        "max_ms": round3(samples.last().copied().unwrap_or(0.0)),
        "n": samples.len(),
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn fresh_dir(base: &Path, name: &str) -> PathBuf {
    let dir = base.join(format!("hermesd-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench dir");
    dir
}

/// `-- --cache-kib R,W`: the readers' and the writer's page-cache caps (default: the store's).
static PAGE_CACHE: std::sync::OnceLock<hermesd::state::PageCache> = std::sync::OnceLock::new();

fn open(path: &Path) -> Store {
    let options = StoreOptions {
        page_cache: PAGE_CACHE.get().copied().unwrap_or_default(),
        ..StoreOptions::default()
    };
    Store::open_with(path, options).expect("open store")
}

/// Sustained appends from `sessions` concurrent callers in one process.
async fn append_rate(dir: &Path, n: usize, seed: u64, sessions: usize) -> Value {
    let store = open(&dir.join("append.db"));
    for s in 0..sessions {
        store
            .create_session(NewSession::new(format!("s{s}"), "bench"))
            .await
            .unwrap();
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let store = store.clone();
        let mut workload = workload::Workload::new(seed + s as u64);
        let per_task = n / sessions;
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_task);
            for _ in 0..per_task {
                let message = workload.message(&format!("s{s}"));
                let t = Instant::now();
                store.append_message(message).await.expect("append");
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
    store.close().await;
    let mut out = summary_ms(latencies.clone());
    out["messages_per_s"] = json!((latencies.len() as f64 / elapsed).round());
    out
}

/// SQLite's own ceiling: the same rows through one prepared INSERT, 1,000 rows a transaction.
async fn sqlite_ceiling(dir: &Path, n: usize, seed: u64) -> Value {
    let path = dir.join("ceiling.db");
    let store = open(&path);
    store
        .create_session(NewSession::new("s", "bench"))
        .await
        .unwrap();
    store.close().await;
    let mut workload = workload::Workload::new(seed);
    let rows: Vec<NewMessage> = (0..n).map(|_| workload.message("s")).collect();
    let mut conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;")
        .unwrap();
    let started = Instant::now();
    for chunk in rows.chunks(1000) {
        let tx = conn.transaction().unwrap();
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO messages (session_id, role, content, tool_calls, timestamp)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .unwrap();
            for m in chunk {
                let content = match &m.content {
                    Some(hermesd::state::Content::Text(t)) => Some(t.clone()),
                    _ => None,
                };
                let calls = m.tool_calls.as_ref().map(|v| v.to_string());
                stmt.execute(rusqlite::params![m.session_id, m.role, content, calls, 1.0])
                    .unwrap();
            }
        }
        tx.commit().unwrap();
    }
    json!({"rows_per_s": (n as f64 / started.elapsed().as_secs_f64()).round()})
}

/// The Python SessionDB appending the same messages (one thread: its connection is shared
/// behind a lock, so more threads would not add throughput).
fn python_reference(python: &str, dir: &Path, n: usize, seed: u64) -> Option<Value> {
    let script = r#"
import json, pathlib, sys, time
import hermes_state
rows = [json.loads(line) for line in open(sys.argv[1])]
db = hermes_state.SessionDB(db_path=pathlib.Path(sys.argv[2]))
db.create_session("s", "bench")
lat = []
start = time.perf_counter()
for r in rows:
    t = time.perf_counter()
    db.append_message("s", r["role"], r["content"], tool_calls=r["tool_calls"],
                      finish_reason=r["finish_reason"])
    lat.append((time.perf_counter() - t) * 1000)
elapsed = time.perf_counter() - start
lat.sort()
print(json.dumps({"messages_per_s": round(len(rows) / elapsed), "p50_ms": round(lat[len(lat)//2], 3),
                  "p99_ms": round(lat[int(len(lat)*0.99)], 3), "max_ms": round(lat[-1], 3)}))
"#;
    let mut workload = workload::Workload::new(seed);
    let rows: String = (0..n)
        .map(|_| {
            let m = workload.message("s");
            let content = match m.content {
                Some(hermesd::state::Content::Text(t)) => t,
                _ => String::new(),
            };
            json!({"role": m.role, "content": content, "tool_calls": m.tool_calls,
                   "finish_reason": m.finish_reason})
            .to_string()
                + "\n"
        })
        .collect();
    let rows_path = dir.join("python-rows.jsonl");
    std::fs::write(&rows_path, rows).ok()?;
    let db = dir.join("python.db");
    let output = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(&rows_path)
        .arg(&db)
        .env("HERMES_HOME", dir)
        .output()
        .ok()?;
    if !output.status.success() {
        eprintln!(
            "python reference failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        return None;
    }
    serde_json::from_slice(&output.stdout).ok()
}

/// Four `hermesd-stress` processes appending to one database at once, each with
/// `concurrency` appends in flight (1 = a sequential caller, as the Python reference runs).
fn contention(dir: &Path, per_process: usize, concurrency: usize) -> Value {
    let db = dir.join(format!("contention-{concurrency}.db"));
    let started = Instant::now();
    let children: Vec<_> = (0..4)
        .map(|p| {
            Command::new(STRESS)
                .arg("--db")
                .arg(&db)
                .args(["--session-prefix", &format!("p{p}"), "--sessions", "8"])
                .args([
                    "--count",
                    &per_process.to_string(),
                    "--seed",
                    &(p + 1).to_string(),
                ])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("spawn hermesd-stress")
        })
        .collect();
    let summaries: Vec<Value> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().expect("stress");
            serde_json::from_slice(&out.stdout).unwrap_or(json!({"errors": -1}))
        })
        .collect();
    let elapsed = started.elapsed().as_secs_f64();
    let field_max = |k: &str| {
        summaries
            .iter()
            .filter_map(|s| s[k].as_u64())
            .max()
            .unwrap_or(0)
    };
    let errors: i64 = summaries.iter().filter_map(|s| s["errors"].as_i64()).sum();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let stored: i64 = conn
        .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
        .unwrap();
    json!({
        "processes": 4,
        "in_flight_per_process": concurrency,
        "messages_per_s_total": ((4 * per_process) as f64 / elapsed).round(),
        "errors": errors,
        "lost": (4 * per_process) as i64 - stored,
        "worst_process_p99_ms": field_max("p99_us") as f64 / 1000.0,
        "slowest_append_ms": field_max("max_us") as f64 / 1000.0,
    })
}

/// Bulk-loads `rows` messages spread over sessions of 2,000 messages, through the store.
async fn populate(store: &Store, rows: usize, seed: u64) {
    let sessions = rows.div_ceil(2000);
    for s in 0..sessions {
        store
            .create_session(NewSession::new(format!("load{s}"), "bench"))
            .await
            .unwrap();
    }
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let store = store.clone();
        let mut workload = workload::Workload::new(seed + s as u64);
        let count = 2000.min(rows - s * 2000);
        tasks.push(tokio::spawn(async move {
            for _ in 0..count {
                store
                    .append_message(workload.message(&format!("load{s}")))
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

async fn search_and_load(dir: &Path, sizes: &Sizes) -> Value {
    let store = open(&dir.join("search.db"));
    let t = Instant::now();
    populate(&store, sizes.search_rows, 7).await;
    let populate_s = t.elapsed().as_secs_f64();
    // Words by Zipf rank: a frequent technical word (~30 % of messages), mid-frequency
    // ones (~2 %), and their prefix; mid-frequency CJK words of three and two characters.
    let (frequent, mid, mid2) = (
        workload::word_at(21),
        workload::word_at(400),
        workload::word_at(401),
    );
    let queries = [
        ("frequent_word", frequent.clone()),
        ("word", mid.clone()),
        ("two_words_or", format!("{mid} OR {mid2}")),
        ("phrase", format!("\"{frequent} {mid}\"")),
        ("prefix", format!("{}*", &mid[..4])),
        ("cjk_trigram", workload::cjk_word_at(301)),
        ("cjk_2char", workload::cjk_word_at(300)),
    ];
    let mut searches = serde_json::Map::new();
    for (name, query) in queries {
        let mut samples = Vec::new();
        for _ in 0..sizes.query_runs {
            let t = Instant::now();
            let hits = store.search(SearchQuery::new(query.clone())).await.unwrap();
            samples.push(t.elapsed().as_secs_f64() * 1000.0);
            assert!(
                !hits.is_empty() || name == "phrase",
                "{query} found nothing"
            );
        }
        searches.insert(name.into(), summary_ms(samples));
    }
    let mut loads = Vec::new();
    for _ in 0..sizes.query_runs {
        let t = Instant::now();
        let messages = store.get_messages("load0").await.unwrap();
        loads.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(messages.len(), 2000.min(sizes.search_rows));
    }
    store.close().await;
    json!({
        "messages": sizes.search_rows,
        "populate_s": round3(populate_s),
        "search": searches,
        "load_2000_message_conversation": summary_ms(loads),
    })
}

/// Prunes 1,000 ended sessions while another task keeps appending; reports the prune time
/// and the slowest concurrent append (how long the prune held other writers up).
async fn prune(dir: &Path) -> Value {
    let store = open(&dir.join("prune.db"));
    let old = hermesd::state::now_epoch() - 200.0 * 86_400.0;
    let mut workload = workload::Workload::new(11);
    for s in 0..1000 {
        let id = format!("old{s}");
        let mut session = NewSession::new(id.clone(), "telegram");
        session.started_at = Some(old);
        store.create_session(session).await.unwrap();
        for _ in 0..5 {
            store.append_message(workload.message(&id)).await.unwrap();
        }
        store.end_session(&id, "idle").await.unwrap();
    }
    store
        .create_session(NewSession::new("live", "cli"))
        .await
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let appender = tokio::spawn({
        let (store, stop) = (store.clone(), stop.clone());
        async move {
            let mut workload = workload::Workload::new(12);
            let mut worst: f64 = 0.0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                store
                    .append_message(workload.message("live"))
                    .await
                    .unwrap();
                worst = worst.max(t.elapsed().as_secs_f64() * 1000.0);
            }
            worst
        }
    });
    let t = Instant::now();
    let deleted = store.prune_sessions(90.0, None).await.unwrap();
    let prune_s = t.elapsed().as_secs_f64();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let worst = appender.await.unwrap();
    store.close().await;
    assert_eq!(deleted, 1000);
    json!({"sessions": deleted, "messages": 5000, "prune_s": round3(prune_s),
           "slowest_concurrent_append_ms": round3(worst)})
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `-- --only search` (or append, contention, prune) runs one part, for quick iteration.
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1).cloned());
    let wants = |part: &str| only.as_deref().is_none_or(|o| o == part);
    let cache = args
        .iter()
        .position(|a| a == "--cache-kib")
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            let parts: Vec<u32> = v
                .split(',')
                .map(|p| p.trim().parse().expect("--cache-kib READER,WRITER"))
                .collect();
            hermesd::state::PageCache {
                reader_kib: parts[0],
                writer_kib: parts[1],
            }
        })
        .unwrap_or_default();
    let _ = PAGE_CACHE.set(cache);
    let sizes = if quick {
        Sizes {
            appends: 4_000,
            contention_per_process: 1_000,
            search_rows: 10_000,
            query_runs: 30,
        }
    } else {
        Sizes {
            appends: 20_000,
            contention_per_process: 2_000,
            search_rows: 100_000,
            query_runs: 200,
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target");
    let media = [
        ("tmpfs", PathBuf::from("/dev/shm")),
        ("disk", target.clone()),
    ];
    let python = std::env::var("HERMES_PYTHON").ok();
    let mut report = serde_json::Map::new();
    report.insert("quick".into(), json!(quick));
    report.insert(
        "page_cache_kib".into(),
        json!({"reader": cache.reader_kib, "writer": cache.writer_kib}),
    );
    for (medium, base) in &media {
        if !base.is_dir() {
            continue;
        }
        let dir = fresh_dir(base, medium);
        let mut section = serde_json::Map::new();
        if wants("append") {
            // Alternate hermesd and the Python reference so both see the same disk weather.
            let (mut concurrent, mut sequential, mut theirs) = (Vec::new(), Vec::new(), Vec::new());
            for round in 0..2 {
                let n = sizes.appends;
                let fresh = |name: &str| fresh_dir(&dir, &format!("{name}{round}"));
                concurrent.push(runtime.block_on(append_rate(&fresh("c"), n, round, 64)));
                sequential.push(runtime.block_on(append_rate(&fresh("s"), n / 4, round, 1)));
                if let Some(python) = &python {
                    theirs.extend(python_reference(python, &fresh("p"), n / 4, round));
                }
            }
            section.insert("hermesd_append_64_sessions".into(), json!(concurrent));
            section.insert("hermesd_append_1_caller".into(), json!(sequential));
            if python.is_some() {
                section.insert("python_sessiondb_append_1_caller".into(), json!(theirs));
            }
            section.insert(
                "sqlite_ceiling_1000_per_tx".into(),
                runtime.block_on(sqlite_ceiling(&dir, sizes.appends, 99)),
            );
        }
        if wants("contention") {
            for in_flight in [1, 8] {
                section.insert(
                    format!("contention_4_processes_{in_flight}_in_flight"),
                    contention(&dir, sizes.contention_per_process, in_flight),
                );
            }
        }
        if *medium == "tmpfs" && wants("search") {
            section.insert(
                "search_and_load".into(),
                runtime.block_on(search_and_load(&dir, &sizes)),
            );
        }
        if *medium == "tmpfs" && wants("prune") {
            section.insert("prune_1000_sessions".into(), runtime.block_on(prune(&dir)));
        }
        let _ = std::fs::remove_dir_all(&dir);
        report.insert((*medium).into(), Value::Object(section));
    }
    let text = serde_json::to_string_pretty(&Value::Object(report)).unwrap();
    println!("{text}");
    let _ = std::fs::write(target.join("bench-storage.json"), &text);
}
