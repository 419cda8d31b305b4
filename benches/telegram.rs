//! Telegram gateway benchmark: the release binary long-polls the wire-level fake Bot API
//! while many users (one DM chat each) talk to it, each sending its next message once the
//! previous one was answered (as people do, and so Telegram's split-paste merging never
//! joins two messages); the fake model answers instantly. Reports messages/s sustained, the
//! latency from pushing an update to the fake receiving the reply's `sendMessage`, that
//! latency minus a direct call to the same fake model and minus the configured quiet window
//! the adapter waits for further parts of a split paste ("gateway-side"), RSS idle and
//! after load, and how often the adapter calls getUpdates while one chat's attachment
//! download is held open by the fake (nothing else arriving). Prints one JSON line (also `target/bench-telegram.json`); `-- --quick` is the
//! CI size.

#[path = "../tests/support/fake_model.rs"]
mod fake_model;
mod support;
mod telegram_python;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_model::FakeModel;
use fake_telegram::{Attachment, Chat, FakeTelegram, MessageSpec, SentRecord, TOKEN, User};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use support::{
    Daemon, bench_dir, daemon_command, direct_model, free_port, percentiles, round, rss_kib,
};
use tokio::sync::mpsc;

/// The shortest quiet window the adapter allows for split-paste merging (the reference's
/// clamp); every plain text waits it out before its turn starts.
const BATCH_DELAY_S: f64 = 0.08;
/// Messages/s the paced phase offers (the sustained-rate target).
const PACED_RATE: f64 = 300.0;
/// Seeds the paced phase's think times; printed in the report.
const SEED: u64 = 0x7e1e_62a3;
/// Bound on any single wait; the run fails loudly instead of hanging.
const WAIT: Duration = Duration::from_secs(60);

async fn spawn(
    home: &std::path::Path,
    telegram: &FakeTelegram,
    model: &FakeModel,
    users: usize,
) -> Daemon {
    let config = format!(
        "telegram:\n  enabled: true\n  extra:\n    base_url: {}\n    poll_timeout_seconds: 1\n    text_batch_delay_seconds: {BATCH_DELAY_S}\n    text_batch_split_delay_seconds: {BATCH_DELAY_S}\n",
        telegram.url()
    );
    std::fs::write(home.join("config.yaml"), config).unwrap();
    let allowed: Vec<String> = (1..=users).map(|u| u.to_string()).collect();
    let admin_port = free_port();
    let mut command = daemon_command(home, admin_port, &model.base_url());
    command
        .env("API_SERVER_ENABLED", "false")
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_ALLOWED_USERS", allowed.join(","));
    let daemon = Daemon::spawn(command, admin_port);
    daemon.wait_answering("/ready").await;
    daemon
}

/// Forwards every accepted `sendMessage` to the task of the chat it went to.
fn spawn_dispatcher(
    telegram: Arc<FakeTelegram>,
    routes: HashMap<i64, mpsc::UnboundedSender<SentRecord>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut next = telegram.sent_count();
        loop {
            let change = telegram.next_change(WAIT);
            let new = telegram.sent_log_from(next);
            next += new.len();
            let mut open = false;
            for record in new {
                if let Some(route) = routes.get(&record.chat_id) {
                    let _ = route.send(record);
                }
            }
            for route in routes.values() {
                open |= !route.is_closed();
            }
            if !open {
                return;
            }
            if next == telegram.sent_count() && !change.await {
                return;
            }
        }
    })
}

/// `users` users, each sending `per_user` messages one after the other; returns
/// (latencies in ms, elapsed seconds), or what went wrong.
async fn conversation(
    telegram: &Arc<FakeTelegram>,
    users: usize,
    per_user: usize,
    round_no: usize,
    think: Option<Duration>,
) -> Result<(Vec<f64>, f64), String> {
    let mut routes = HashMap::new();
    let mut inboxes = Vec::new();
    for user in 1..=users {
        let (tx, rx) = mpsc::unbounded_channel();
        routes.insert(user as i64, tx);
        inboxes.push((user as i64, rx));
    }
    let dispatcher = spawn_dispatcher(telegram.clone(), routes);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (user, mut inbox) in inboxes {
        let telegram = telegram.clone();
        // Seeded per user and round, so a run's pacing can be replayed.
        let mut rng = StdRng::seed_from_u64(SEED ^ ((user as u64) << 8) ^ (round_no as u64));
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_user);
            for i in 0..per_user {
                if let Some(think) = think {
                    // A user reads the answer, then types: 0.5–1.5 × the mean think time.
                    let factor = rng.random_range(0.5..1.5);
                    tokio::time::sleep(think.mul_f64(factor)).await;
                }
                let text = format!("round {round_no} message {i} from {user}");
                let pushed = Instant::now();
                telegram.push_text(Chat::private(user), User::new(user, "Bench"), &text);
                // Other messages (the reference's one-time "no home channel" notice) are
                // skipped: the answer is the message that echoes the text.
                let reply = loop {
                    match tokio::time::timeout(WAIT, inbox.recv()).await {
                        Ok(Some(reply)) if reply.text.contains(&text) => break reply,
                        Ok(Some(_)) => continue,
                        _ => return Err(format!("user {user}: no reply to {text:?}")),
                    }
                };
                latencies.push(reply.at.duration_since(pushed).as_secs_f64() * 1000.0);
            }
            Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    let mut failure = None;
    for task in tasks {
        match task.await {
            Ok(Ok(samples)) => latencies.extend(samples),
            Ok(Err(e)) => failure = Some(e),
            Err(e) => failure = Some(e.to_string()),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    dispatcher.abort();
    match failure {
        Some(e) => Err(e),
        None => Ok((latencies, elapsed)),
    }
}

/// How long getUpdates calls are counted while a download is held.
const SLOW_DOWNLOAD_WINDOW: Duration = Duration::from_secs(5);

/// getUpdates calls per second while one chat's attachment download is held open by the
/// fake and nothing else arrives (the poller cannot long-poll with an update in flight).
async fn polls_during_slow_download(telegram: &FakeTelegram) -> Result<Value, String> {
    telegram.hold_downloads();
    let spec = MessageSpec::text(Chat::private(1), User::new(1, "Bench"), "see attached")
        .with_attachment(Attachment::Document {
            bytes: vec![b'x'; 64 * 1024],
            file_name: "slow.txt".into(),
            mime_type: "text/plain".into(),
        });
    let sent_before = telegram.sent_count();
    telegram.push_message(spec);
    let started = Instant::now();
    while telegram.calls_of("(download)").is_empty() {
        if started.elapsed() > WAIT || !telegram.next_change(WAIT).await {
            return Err("the download never started".into());
        }
    }
    // Once the poll that fetched the document is past, the window measures the idle pace.
    let from = telegram.get_updates_times().len();
    tokio::time::sleep(SLOW_DOWNLOAD_WINDOW).await;
    let calls = telegram.get_updates_times().len() - from;
    telegram.release_downloads();
    if !telegram.wait_sent_count(sent_before + 1, WAIT).await {
        return Err("no reply after the download finished".into());
    }
    Ok(json!({
        "window_s": SLOW_DOWNLOAD_WINDOW.as_secs_f64(),
        "get_updates_calls": calls,
        "get_updates_per_s": (calls as f64 / SLOW_DOWNLOAD_WINDOW.as_secs_f64() * 10.0).round() / 10.0,
    }))
}

/// Warm-up, then the measured conversation, then the figures (RSS of `pid`).
async fn measure(
    telegram: &Arc<FakeTelegram>,
    pid: u32,
    users: usize,
    per_user: usize,
    model_p50: f64,
) -> Result<Value, String> {
    let idle_rss = rss_kib(pid);
    // Warm-up: every chat's session is created once, outside the measurement.
    conversation(telegram, users, 1, 0, None).await?;
    // Saturation: every user sends again as soon as answered.
    let (latencies, elapsed) = conversation(telegram, users, per_user, 1, None).await?;
    let messages = latencies.len();
    let saturated = json!({
        "messages": messages,
        "elapsed_s": round(elapsed * 1000.0) / 1000.0,
        "messages_per_s": (messages as f64 / elapsed).round(),
        "latency_push_to_send": percentiles(latencies),
    });
    // Paced: users think between messages, offering about PACED_RATE messages/s.
    let think = Duration::from_secs_f64(users as f64 / PACED_RATE);
    let (latencies, elapsed) =
        conversation(telegram, users, per_user.div_ceil(2), 2, Some(think)).await?;
    let overhead = model_p50 + BATCH_DELAY_S * 1000.0;
    let gateway_side: Vec<f64> = latencies.iter().map(|l| l - overhead).collect();
    let messages = latencies.len();
    let slow_download = polls_during_slow_download(telegram).await?;
    Ok(json!({
        "polls_during_slow_download": slow_download,
        "saturated": saturated,
        "paced": {
            "offered_per_s": PACED_RATE,
            "messages": messages,
            "messages_per_s": (messages as f64 / elapsed).round(),
            "latency_push_to_send": percentiles(latencies),
            "gateway_side": percentiles(gateway_side),
        },
        "rss_idle_kib": idle_rss,
        "rss_after_load_kib": rss_kib(pid),
    }))
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let python = std::env::args().any(|a| a == "--python");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let report: Value = runtime.block_on(async {
        let users = 200;
        let per_user = if quick { 5 } else { 25 };
        let model = FakeModel::start_in_background();
        let direct = percentiles(direct_model(&model.base_url(), 200).await);
        let model_p50 = direct["p50_ms"].as_f64().unwrap_or(0.0);

        let telegram = Arc::new(FakeTelegram::start().await);
        let home = bench_dir();
        let daemon = spawn(home.path(), &telegram, &model, users).await;
        let mut report = measure(&telegram, daemon.child.id(), users, per_user, model_p50)
            .await
            .expect("hermesd answers every message");
        drop(daemon);
        let extra = json!({
            "bench": "telegram",
            "quick": quick,
            "users": users,
            "direct_model_call": direct,
            "batch_quiet_window_ms": BATCH_DELAY_S * 1000.0,
            "seed": SEED,
            "targets": {"messages_per_s": 300, "gateway_side_p99_ms": 50},
        });
        for (k, v) in extra.as_object().unwrap() {
            report[k] = v.clone();
        }
        if python {
            report["python_reference"] =
                telegram_python::run(&model, users, per_user, model_p50).await;
        }
        report
    });
    let text = report.to_string();
    println!("{text}");
    let _ = std::fs::write(
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-telegram.json"),
        &text,
    );
}
