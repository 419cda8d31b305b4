//! Webhook benchmark: the release binary's webhook listener takes signed GitHub
//! `pull_request` events for a route that comments on the pull request through a fake GitHub
//! REST server, answering with the instant fake model. Reports:
//! - accepted requests/s: concurrent senders, each event a new delivery id, from the POST to
//!   its `202` (the event is journaled in state.db before the answer);
//! - redeliveries/s: the same events sent again, each answered `200 duplicate`;
//! - end-to-end latency, one event at a time: from the POST to the fake GitHub receiving the
//!   comment (signature check, journal, agent turn, ledger, REST call), with a direct call to
//!   the same fake model for comparison;
//! - RSS after the load.
//!
//! Prints one JSON line (also `target/bench-webhook.json`); `-- --quick` is the CI size.

#[path = "../tests/support/fake_github.rs"]
mod fake_github;
#[path = "../tests/support/fake_model.rs"]
mod fake_model;
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_github::FakeGithub;
use fake_model::FakeModel;
use serde_json::json;
use support::{Daemon, daemon_command, direct_model, free_port, percentiles, round, rss_kib};

const SECRET: &str = "bench-secret-0123456789";
const WAIT: Duration = Duration::from_secs(120);

fn body(n: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "action": "opened",
        "number": n + 1,
        "pull_request": {"number": n + 1, "title": format!("Change {n}")},
        "repository": {"full_name": "acme/web"},
    }))
    .unwrap()
}

async fn post(client: &reqwest::Client, url: &str, delivery: &str, body: Vec<u8>) -> u16 {
    let signature = hermes_webhook::signature::github_signature(SECRET, &body);
    client
        .post(url)
        .header("content-type", "application/json")
        .header("x-github-event", "pull_request")
        .header("x-github-delivery", delivery)
        .header("x-hub-signature-256", signature)
        .body(body)
        .send()
        .await
        .expect("post")
        .status()
        .as_u16()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (events, senders, sequential) = if quick { (200, 8, 30) } else { (3000, 16, 300) };
    let github = FakeGithub::start().await;
    let model = FakeModel::start().await;
    let home = support::bench_dir();
    let port = free_port();
    let config = format!(
        r#"platforms:
  webhook:
    enabled: true
    extra:
      host: 127.0.0.1
      port: {port}
      secret: {SECRET}
      rate_limit: 1000000
      github_api_url: {github}
      routes:
        pr:
          events: [pull_request]
          prompt: "Review PR #{{pull_request.number}}: {{pull_request.title}}"
          deliver: github_comment
          deliver_extra: {{repo: "{{repository.full_name}}", pr_number: "{{number}}"}}
"#,
        github = github.url()
    );
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let admin_port = free_port();
    let mut command = daemon_command(home.path(), admin_port, &model.base_url());
    command
        .env("API_SERVER_ENABLED", "false")
        .env("GITHUB_TOKEN", fake_github::TOKEN);
    let daemon = Daemon::spawn(command, admin_port);
    daemon.wait_answering("/ready").await;
    let url = format!("http://127.0.0.1:{port}/webhooks/pr");
    let client = reqwest::Client::new();

    // Accepted requests/s: `senders` concurrent senders, every event a new delivery.
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..senders {
        let (client, url, next) = (client.clone(), url.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if n >= events {
                    return;
                }
                assert_eq!(
                    post(&client, &url, &format!("load-{n}"), body(n)).await,
                    202
                );
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let accept_secs = started.elapsed().as_secs_f64();
    let mut posted = github.watch_comments();
    let drain_started = Instant::now();
    tokio::time::timeout(WAIT, posted.wait_for(|n| *n >= events))
        .await
        .expect("every accepted event commented")
        .unwrap();
    let all_answered_secs = accept_secs + drain_started.elapsed().as_secs_f64();

    // Redeliveries: every event again, each a `200 duplicate` and no new comment.
    let started = Instant::now();
    for n in 0..events.min(500) {
        assert_eq!(
            post(&client, &url, &format!("load-{n}"), body(n)).await,
            200
        );
    }
    let duplicate_rate = events.min(500) as f64 / started.elapsed().as_secs_f64();

    // End-to-end latency, one event at a time.
    let mut latencies = Vec::new();
    for k in 0..sequential {
        let n = events + k;
        let before = *posted.borrow();
        let started = Instant::now();
        assert_eq!(post(&client, &url, &format!("seq-{n}"), body(n)).await, 202);
        tokio::time::timeout(WAIT, posted.wait_for(|c| *c > before))
            .await
            .expect("comment")
            .unwrap();
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let direct = direct_model(&model.base_url(), sequential).await;
    let comments = github.comments().len();
    assert_eq!(
        comments,
        events + sequential,
        "a comment was lost or doubled"
    );
    let report = json!({
        "bench": "webhook",
        "quick": quick,
        "events": events,
        "senders": senders,
        "accepted_per_s": round(events as f64 / accept_secs),
        "answered_per_s": round(events as f64 / all_answered_secs),
        "duplicates_per_s": round(duplicate_rate),
        "end_to_end_ms": percentiles(latencies),
        "direct_model_ms": percentiles(direct),
        "comments": comments,
        "rss_kib_after": rss_kib(daemon.child.id()),
    });
    println!("{report}");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-webhook.json");
    let _ = std::fs::write(out, report.to_string());
}
