//! Scheduled-jobs benchmark. With 10,000 jobs in `cron/jobs.json`, in process: re-reading
//! the file into the scheduler's index, scanning the index, and a tick that records one run
//! (the file work the daemon's tick does); then the real binary on that home: RSS added by the 10,000 jobs (against the
//! same daemon with none, both idle; and after the burst below, against a daemon without jobs
//! that served the same chat load for as long) and fire-time accuracy — the lag from each run's scheduled time to
//! its session's start — for one-shots due in a burst while the daemon also serves chat
//! requests on its HTTP API. Prints one JSON report (also `target/bench-cron.json`).
//! `-- --quick` is the CI size (fewer due runs).

#[path = "../tests/support/fake_model.rs"]
mod fake_model;
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use chrono::Utc;
use fake_model::FakeModel;
use hermesd::cron::job::{NewJob, create};
use hermesd::cron::raw::{self, Brief, Item};
use hermesd::cron::{JobsFile, JobsStore, Zone, schedule::format_timestamp};
use serde_json::{Value, json};
use support::{Daemon, bench_dir, daemon_command, free_port, percentiles, rss_kib};

const JOBS: usize = 10_000;
const KEY: &str = "bench-api-key-0123456789abcdef";
const ZONE: Zone = Zone::Named(chrono_tz::UTC);

/// 10,000 jobs, none due for an hour: a third each of intervals, cron expressions and
/// one-shots; `due` more one-shots fire `lead` seconds from now, spread over `spread`.
fn jobs_file(due_runs: usize, lead: i64, spread: i64) -> JobsFile {
    let now = Utc::now();
    let mut jobs = Vec::with_capacity(JOBS + due_runs);
    for i in 0..JOBS {
        let schedule = match i % 3 {
            0 => format!("every {}m", 60 + i % 600),
            1 => format!("{} {} * * *", i % 60, i % 24),
            _ => format!("{}m", 120 + i % 1000),
        };
        let new = NewJob {
            prompt: format!("job {i}: summarise the feed"),
            schedule,
            deliver: Some("local".into()),
            ..Default::default()
        };
        let mut job = create(new, now, ZONE).unwrap();
        if i % 3 == 1 {
            // Cron jobs' next run is at least an hour out, so none fires during the bench.
            job.set_time(
                "next_run_at",
                Some(ZONE.at(now + chrono::Duration::hours(2))),
            );
        }
        jobs.push(job);
    }
    for i in 0..due_runs {
        let at = now
            + chrono::Duration::milliseconds(
                lead * 1000 + (spread * 1000 * i as i64) / due_runs.max(1) as i64,
            );
        let new = NewJob {
            prompt: format!("due {i}"),
            schedule: format_timestamp(ZONE.at(at)),
            deliver: Some("local".into()),
            ..Default::default()
        };
        jobs.push(create(new, now, ZONE).unwrap());
    }
    JobsFile { jobs }
}

/// In-process costs of what a daemon tick does with the file, over `rounds` rounds: reading
/// it into the index (when another process changed it), a scan of that index, and a tick
/// that records one run (read, parse that job, stream the rewrite).
fn tick_cost(rounds: usize) -> Value {
    let dir = bench_dir();
    let store = JobsStore::new(dir.path().join("cron"));
    let file = jobs_file(0, 0, 0);
    let lock = store.lock().unwrap();
    store.save(&lock, &file, "now").unwrap();
    drop(lock);
    drop(file);
    let bytes = std::fs::metadata(store.jobs_path()).unwrap().len();
    let (mut reindex, mut scans, mut writes) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let started = Instant::now();
        let lock = store.lock().unwrap();
        let text = std::fs::read(store.jobs_path()).unwrap();
        let briefs: Vec<Brief> = raw::split(&text)
            .unwrap()
            .into_iter()
            .map(Brief::of_raw)
            .collect();
        drop(lock);
        reindex.push(started.elapsed().as_secs_f64() * 1000.0);
        let now = Utc::now();
        let started = Instant::now();
        let due = briefs
            .iter()
            .filter(|b| b.enabled && b.next_run_at.is_none_or(|t| t <= now))
            .count();
        scans.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(due, 0);
        let started = Instant::now();
        let lock = store.lock().unwrap();
        let text = std::fs::read(store.jobs_path()).unwrap();
        let jobs = raw::split(&text).unwrap();
        let mut ran = raw::record(jobs[0]);
        ran.set("last_status", json!("ok"));
        let items: Vec<Item> = jobs
            .iter()
            .enumerate()
            .map(|(i, job)| {
                if i == 0 {
                    Item::Record(&ran)
                } else {
                    Item::Raw(job)
                }
            })
            .collect();
        store.save_items(&lock, &items, "now").unwrap();
        drop(lock);
        writes.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    json!({"jobs": JOBS, "file_bytes": bytes, "reindex_after_outside_change": percentiles(reindex),
           "index_scan": percentiles(scans), "tick_recording_one_run": percentiles(writes)})
}

fn spawn(home: &Path, model: &FakeModel) -> (Daemon, u16) {
    std::fs::write(
        home.join("config.yaml"),
        "cron:\n  tick_seconds: 1\n  max_parallel_jobs: 8\n",
    )
    .unwrap();
    let (admin, api) = (free_port(), free_port());
    let mut command = daemon_command(home, admin, &model.base_url());
    command
        .env("API_SERVER_ENABLED", "true")
        .env("API_SERVER_KEY", KEY)
        .env("API_SERVER_PORT", api.to_string());
    (Daemon::spawn(command, admin), api)
}

/// RSS of an idle daemon on `home` after it is ready and has ticked a few times.
async fn idle_rss(home: &Path, model: &FakeModel) -> u64 {
    let (daemon, _) = spawn(home, model);
    daemon.wait_answering("/ready").await;
    tokio::time::sleep(Duration::from_secs(3)).await; // let several ticks run: a measurement window, not synchronisation
    rss_kib(daemon.child.id())
}

/// Finished runs' lag (ms) from scheduled time to session start, read from state.db.
fn lags(home: &Path) -> Vec<f64> {
    let Ok(conn) = rusqlite::Connection::open_with_flags(
        home.join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    ) else {
        return Vec::new();
    };
    let Ok(mut stmt) = conn.prepare(
        "SELECT s.started_at - r.scheduled_at FROM hermesd_cron_runs r JOIN sessions s ON s.id = r.session_id
         WHERE r.state = 'finished'",
    ) else {
        return Vec::new();
    };
    stmt.query_map([], |r| r.get::<_, f64>(0))
        .map(|rows| rows.filter_map(Result::ok).map(|s| s * 1000.0).collect())
        .unwrap_or_default()
}

/// Chat requests on the HTTP API until `stop` (the load the scheduler shares the daemon with).
async fn chat_load(api: u16, stop: tokio_util::sync::CancellationToken) -> usize {
    let http = reqwest::Client::new();
    let mut served = 0;
    while !stop.is_cancelled() {
        let body = json!({"model": "hermes", "messages": [{"role": "user", "content": format!("load {served}")}]});
        let sent = http
            .post(format!("http://127.0.0.1:{api}/v1/chat/completions"))
            .bearer_auth(KEY)
            .json(&body)
            .send()
            .await;
        if sent.is_ok_and(|r| r.status().is_success()) {
            served += 1;
        }
    }
    served
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let due_runs = if quick { 50 } else { 200 };
    let tick = tick_cost(if quick { 5 } else { 20 });
    let model = FakeModel::start().await;

    let empty = bench_dir();
    let baseline = idle_rss(empty.path(), &model).await;
    let idle_home = bench_dir();
    std::fs::create_dir_all(idle_home.path().join("cron")).unwrap();
    let idle_store = JobsStore::new(idle_home.path().join("cron"));
    let lock = idle_store.lock().unwrap();
    idle_store.save(&lock, &jobs_file(0, 0, 0), "now").unwrap();
    drop(lock);
    let idle_with_jobs = idle_rss(idle_home.path(), &model).await;

    let home = bench_dir();
    std::fs::create_dir_all(home.path().join("cron")).unwrap();
    let store = JobsStore::new(home.path().join("cron"));
    let lead = 8;
    let file = jobs_file(due_runs, lead, 10);
    let lock = store.lock().unwrap();
    store.save(&lock, &file, "now").unwrap();
    drop(lock);
    let (daemon, api) = spawn(home.path(), &model);
    daemon.wait_answering("/ready").await;
    let burst_started = Instant::now();
    let stop = tokio_util::sync::CancellationToken::new();
    let load = tokio::spawn(chat_load(api, stop.clone()));
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut samples = lags(home.path());
    while samples.len() < due_runs && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await; // polling a file another process writes
        samples = lags(home.path());
    }
    stop.cancel();
    let chats = load.await.unwrap_or(0);
    let burst_span = burst_started.elapsed();
    let with_jobs = rss_kib(daemon.child.id());
    drop(daemon);
    // The same chat load for as long on a daemon without jobs: what the load alone adds.
    let chat_home = bench_dir();
    let (chat_daemon, chat_api) = spawn(chat_home.path(), &model);
    chat_daemon.wait_answering("/ready").await;
    let stop = tokio_util::sync::CancellationToken::new();
    let load = tokio::spawn(chat_load(chat_api, stop.clone()));
    tokio::time::sleep(burst_span).await; // a measurement window as long as the burst's
    stop.cancel();
    let chats_alone = load.await.unwrap_or(0);
    let chat_only = rss_kib(chat_daemon.child.id());
    drop(chat_daemon);
    let report = json!({
        "bench": "cron",
        "quick": quick,
        "tick": tick,
        "rss_kib": {"daemon_without_jobs": baseline, "daemon_with_10000_jobs": idle_with_jobs,
                    "added_by_jobs": idle_with_jobs as i64 - baseline as i64,
                    "after_burst_with_jobs": with_jobs, "after_same_chat_load_without_jobs": chat_only,
                    "chat_requests_without_jobs": chats_alone,
                    "added_by_jobs_after_burst": with_jobs as i64 - chat_only as i64},
        "fire_lag": {"due_runs": due_runs, "finished": samples.len(), "tick_seconds": 1,
                     "max_parallel_jobs": 8, "chat_requests_meanwhile": chats,
                     "lag": if samples.is_empty() { Value::Null } else { percentiles(samples.clone()) },
                     "max_ms": samples.iter().copied().fold(0.0, f64::max).round()},
    });
    let text = serde_json::to_string_pretty(&report).unwrap();
    println!("{text}");
    let _ = std::fs::write(
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-cron.json"),
        &text,
    );
}
