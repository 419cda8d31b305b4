//! The webhook platform through the real binary: signed GitHub `pull_request` events become
//! one agent run each and one pull-request comment on a fake GitHub REST server; a
//! redelivery of the same delivery id is answered 200 and not run again; a `kill -9` while
//! the model is thinking still ends in exactly one comment after the restart; each refusal
//! (bad signature 401, too large 413, rate limit 429 with Retry-After, unknown route 404)
//! records nothing; a webhook's text is never a command; `deliver_only` routes post their
//! text to a Telegram chat without the model.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fake_telegram::FakeTelegram;
use serde_json::json;
use support::conditions::wait_until;
use support::daemon::{Daemon, base_env};
use support::fake_github::{self, FakeGithub};
use support::fake_model::{FakeModel, Reply, Step};

const SECRET: &str = "It's a Secret to Everybody";
const WAIT: Duration = Duration::from_secs(90);

fn config(github: &FakeGithub, extra_routes: &str) -> String {
    format!(
        r#"platforms:
  webhook:
    enabled: true
    extra:
      host: 127.0.0.1
      port: 0
      secret: "{SECRET}"
      max_body_bytes: 4096
      github_api_url: {github}
      routes:
        pr:
          events: [pull_request]
          prompt: "Review PR #{{pull_request.number}}: {{pull_request.title}}"
          deliver: github_comment
          deliver_extra:
            repo: "{{repository.full_name}}"
            pr_number: "{{number}}"
        alerts:
          prompt: "{{message}}"
{extra_routes}"#,
        github = github.url(),
    )
}

fn env(home: &Path, model: &FakeModel) -> Vec<(String, String)> {
    let mut env = base_env(home);
    env.extend(
        [
            ("API_SERVER_ENABLED", "false".to_owned()),
            ("OPENAI_BASE_URL", model.base_url()),
            ("OPENAI_API_KEY", "sk-test".to_owned()),
            ("HERMES__MODEL__PROVIDER", "openai".to_owned()),
            ("HERMES__MODEL__DEFAULT", "fake-model".to_owned()),
            ("GITHUB_TOKEN", fake_github::TOKEN.to_owned()),
            ("HERMESD_DRAIN_TIMEOUT_SECS", "2".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    env
}

/// Starts the daemon and returns it with the webhook listener's base URL.
async fn start(home: &Path, env: &[(String, String)]) -> (Daemon, String) {
    let (home, env) = (home.to_path_buf(), env.to_vec());
    tokio::task::spawn_blocking(move || {
        let daemon = Daemon::spawn(&home, &env, false);
        let Some(line) = daemon.wait_for_line("webhook listener ready", WAIT) else {
            panic!("webhook listener never started: {:#?}", daemon.logs());
        };
        let addr =
            support::daemon::field(&line, "addr").unwrap_or_else(|| panic!("no addr in {line}"));
        (daemon, format!("http://{addr}"))
    })
    .await
    .unwrap()
}

fn pull_request(number: u64, title: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "action": "opened",
        "number": number,
        "pull_request": {"number": number, "title": title},
        "repository": {"full_name": "acme/web"},
    }))
    .unwrap()
}

async fn post_github(
    url: &str,
    route: &str,
    delivery: &str,
    body: &[u8],
    secret: &str,
) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}/webhooks/{route}"))
        .header("content-type", "application/json")
        .header("x-github-event", "pull_request")
        .header("x-github-delivery", delivery)
        .header(
            "x-hub-signature-256",
            hermes_webhook::signature::github_signature(secret, body),
        )
        .body(body.to_vec())
        .send()
        .await
        .unwrap()
}

fn journaled(home: &Path) -> i64 {
    let db = rusqlite::Connection::open(home.join("state.db")).unwrap();
    db.query_row(
        "SELECT COUNT(*) FROM hermesd_inbound_events WHERE platform = 'webhook'",
        [],
        |row| row.get(0),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_pull_request_runs_once_and_comments_once() {
    let github = FakeGithub::start().await;
    let model = FakeModel::start().await;
    model.push(Step::Reply(Reply::text("Looks good to me.")));
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config(&github, "")).unwrap();
    let (daemon, url) = start(home.path(), &env(home.path(), &model)).await;

    let body = pull_request(7, "Fix the login page");
    let first = post_github(&url, "pr", "d-1", &body, SECRET).await;
    assert_eq!(first.status(), 202);
    let answer: serde_json::Value = first.json().await.unwrap();
    assert_eq!(answer["status"], "accepted");
    assert_eq!(answer["delivery_id"], "d-1");
    wait_until("the comment is posted", WAIT, || {
        github.comments().len() == 1
    })
    .await;
    let comment = &github.comments()[0];
    assert_eq!((comment.repo.as_str(), comment.number), ("acme/web", 7));
    assert_eq!(comment.body, "Looks good to me.");
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0]
            .last_message_text()
            .contains("Review PR #7: Fix the login page"),
        "{}",
        requests[0].last_message_text()
    );

    // GitHub redelivers (same delivery id): 200, nothing runs again.
    let again = post_github(&url, "pr", "d-1", &body, SECRET).await;
    assert_eq!(again.status(), 200);
    let answer: serde_json::Value = again.json().await.unwrap();
    assert_eq!(answer["status"], "duplicate");
    // A later delivery is answered after it; by then a second run of d-1 would show.
    model.push(Step::Reply(Reply::text("Second review.")));
    let later = post_github(&url, "pr", "d-2", &pull_request(8, "Other"), SECRET).await;
    assert_eq!(later.status(), 202);
    wait_until("the second comment is posted", WAIT, || {
        github.comments().len() == 2
    })
    .await;
    assert_eq!(model.requests().len(), 2);
    assert_eq!(github.comments()[1].number, 8);
    assert_eq!(journaled(home.path()), 2);
    // Each delivery was its own session, closed when its run ended.
    let db = rusqlite::Connection::open(home.path().join("state.db")).unwrap();
    let closed = || -> i64 {
        db.query_row(
            "SELECT COUNT(*) FROM sessions WHERE source = 'webhook' AND end_reason = 'webhook_complete'",
            [],
            |row| row.get(0),
        )
        .unwrap()
    };
    wait_until("both webhook sessions are closed", WAIT, || closed() == 2).await;
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_record_nothing() {
    let github = FakeGithub::start().await;
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let routes = r#"        limited:
          prompt: "{message}"
"#;
    let yaml = config(&github, routes).replace(
        "max_body_bytes: 4096",
        "max_body_bytes: 4096\n      rate_limit: 2",
    );
    std::fs::write(home.path().join("config.yaml"), yaml).unwrap();
    let (daemon, url) = start(home.path(), &env(home.path(), &model)).await;
    let body = pull_request(1, "x");

    let forged = post_github(&url, "pr", "f-1", &body, "not the secret").await;
    assert_eq!(forged.status(), 401);
    let unsigned = reqwest::Client::new()
        .post(format!("{url}/webhooks/pr"))
        .header("x-github-event", "pull_request")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), 401);
    let big = vec![b' '; 5000];
    let too_large = post_github(&url, "pr", "f-2", &big, SECRET).await;
    assert_eq!(too_large.status(), 413);
    let unknown = post_github(&url, "nope", "f-3", &body, SECRET).await;
    assert_eq!(unknown.status(), 404);
    // An event the route does not take is acknowledged and ignored.
    let push = reqwest::Client::new()
        .post(format!("{url}/webhooks/pr"))
        .header("x-github-event", "push")
        .header(
            "x-hub-signature-256",
            hermes_webhook::signature::github_signature(SECRET, &body),
        )
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(push.status(), 200);
    assert_eq!(
        push.json::<serde_json::Value>().await.unwrap()["status"],
        "ignored"
    );

    // Rate limit: two a minute on `limited` (log-only answers), the third is told to wait.
    let signed = |n: u32| {
        let body = serde_json::to_vec(&json!({"message": format!("alert {n}")})).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        reqwest::Client::new()
            .post(format!("{url}/webhooks/limited"))
            .header("x-webhook-timestamp", now.to_string())
            .header(
                "x-webhook-signature-v2",
                hermes_webhook::signature::generic_v2_signature(SECRET, now, &body),
            )
            .header("x-request-id", format!("alert-{n}"))
            .body(body)
            .send()
    };
    assert_eq!(signed(1).await.unwrap().status(), 202);
    assert_eq!(signed(2).await.unwrap().status(), 202);
    let limited = signed(3).await.unwrap();
    assert_eq!(limited.status(), 429);
    let retry_after: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    wait_until("both alerts are answered in the log", WAIT, || {
        daemon
            .logs()
            .iter()
            .filter(|l| l.contains("route delivers to the log"))
            .count()
            == 2
    })
    .await;
    // Only the two accepted alerts were journaled or reached the model.
    assert_eq!(journaled(home.path()), 2);
    assert_eq!(model.requests().len(), 2);
    assert_eq!(github.requests(), 0);
    let logs = daemon.logs().join("\n");
    assert!(!logs.contains(SECRET), "the webhook secret reached the log");
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_mid_run_still_ends_in_one_comment() {
    let github = FakeGithub::start().await;
    let model = FakeModel::start().await;
    // The first run's model call never answers: the daemon is killed while it waits.
    model.push(Step::Stall);
    model.push(Step::Reply(Reply::text("Reviewed after the restart.")));
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config(&github, "")).unwrap();
    let env = env(home.path(), &model);
    let (daemon, url) = start(home.path(), &env).await;
    let accepted = post_github(&url, "pr", "k-1", &pull_request(9, "Crash me"), SECRET).await;
    assert_eq!(accepted.status(), 202);
    model.wait_for_requests(1, WAIT).await;
    daemon.kill9();

    // GitHub retries the delivery while we are down and after: still one run, one comment.
    let (daemon, url) = start(home.path(), &env).await;
    let retried = post_github(&url, "pr", "k-1", &pull_request(9, "Crash me"), SECRET).await;
    assert_eq!(retried.status(), 200);
    wait_until("the comment is posted", WAIT, || {
        !github.comments().is_empty()
    })
    .await;
    // A second delivery answered afterwards proves no late copy of k-1 is still coming.
    model.push(Step::Reply(Reply::text("Next.")));
    assert_eq!(
        post_github(&url, "pr", "k-2", &pull_request(10, "Next"), SECRET)
            .await
            .status(),
        202
    );
    wait_until("the next comment is posted", WAIT, || {
        github.comments().len() >= 2
    })
    .await;
    let comments = github.comments();
    let on_9: Vec<_> = comments.iter().filter(|c| c.number == 9).collect();
    assert_eq!(on_9.len(), 1, "{comments:#?}");
    assert_eq!(on_9[0].body, "Reviewed after the restart.");
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_flow_control_is_waited_out_not_abandoned() {
    let github = FakeGithub::start().await;
    github.fail_next(fake_github::Fault::RetryAfter(1));
    github.fail_next(fake_github::Fault::Exhausted(1));
    let model = FakeModel::start().await;
    model.push(Step::Reply(Reply::text("Patience.")));
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config(&github, "")).unwrap();
    let (daemon, url) = start(home.path(), &env(home.path(), &model)).await;
    assert_eq!(
        post_github(&url, "pr", "r-1", &pull_request(3, "Slow"), SECRET)
            .await
            .status(),
        202
    );
    wait_until("the comment is posted", WAIT, || {
        github.comments().len() == 1
    })
    .await;
    assert_eq!(github.requests(), 3);
    assert_eq!(github.comments()[0].body, "Patience.");
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_text_is_content_not_a_command_and_deliver_only_skips_the_model() {
    let github = FakeGithub::start().await;
    let telegram = Arc::new(FakeTelegram::start().await);
    let model = FakeModel::start().await;
    model.push(Step::Reply(Reply::text("Noted")));
    let home = tempfile::tempdir().unwrap();
    let routes = r#"        notify:
          deliver: telegram
          deliver_only: true
          prompt: "Deploy {status}: {service}"
        comments:
          prompt: "{comment}"
          deliver: telegram
          deliver_extra:
            chat_id: "4242"
"#;
    let yaml = format!(
        "{}telegram:\n  enabled: true\n  home_channel:\n    chat_id: \"777\"\n  extra:\n    base_url: {}\n    poll_timeout_seconds: 2\n",
        config(&github, routes),
        telegram.url()
    );
    std::fs::write(home.path().join("config.yaml"), yaml).unwrap();
    let mut env = env(home.path(), &model);
    env.push(("TELEGRAM_BOT_TOKEN".into(), fake_telegram::TOKEN.into()));
    let (daemon, url) = start(home.path(), &env).await;
    let send = |route: &'static str, id: &'static str, payload: serde_json::Value| {
        let body = serde_json::to_vec(&payload).unwrap();
        let url = url.clone();
        async move {
            reqwest::Client::new()
                .post(format!("{url}/webhooks/{route}"))
                .header("x-gitlab-token", SECRET)
                .header("x-gitlab-event-uuid", id)
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    // deliver_only: the rendered text goes to Telegram's home channel, no model call.
    assert_eq!(
        send("notify", "n-1", json!({"status": "ok", "service": "api"})).await,
        202
    );
    wait_until("the notification reaches Telegram", WAIT, || {
        telegram
            .sent_messages()
            .iter()
            .any(|m| m.text == "Deploy ok: api")
    })
    .await;
    let notice = telegram
        .sent_messages()
        .into_iter()
        .find(|m| m.text == "Deploy ok: api")
        .unwrap();
    assert_eq!(notice.chat_id, 777);
    assert!(model.requests().is_empty());

    // Text that looks like a command is the model's input, never run as one.
    assert_eq!(
        send("comments", "c-1", json!({"comment": "/yolo"})).await,
        202
    );
    wait_until("the answer reaches chat 4242", WAIT, || {
        telegram.sent_messages().iter().any(|m| m.text == "Noted")
    })
    .await;
    let answer = telegram
        .sent_messages()
        .into_iter()
        .find(|m| m.text == "Noted")
        .unwrap();
    assert_eq!(answer.chat_id, 4242);
    assert_eq!(model.requests().len(), 1);
    assert_eq!(model.requests()[0].last_message_text(), "/yolo");
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_added_while_running_is_served_without_a_restart() {
    let github = FakeGithub::start().await;
    let model = FakeModel::start().await;
    model.push(Step::Reply(Reply::text("Seen the build.")));
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config(&github, "")).unwrap();
    let (daemon, url) = start(home.path(), &env(home.path(), &model)).await;
    let body = br#"{"message": "build 41 failed"}"#.to_vec();
    let post = |secret: &'static str| {
        let (url, body) = (url.clone(), body.clone());
        async move {
            reqwest::Client::new()
                .post(format!("{url}/webhooks/ci"))
                .header("x-github-event", "check_run")
                .header("x-github-delivery", "s-1")
                .header(
                    "x-hub-signature-256",
                    hermes_webhook::signature::github_signature(secret, &body),
                )
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(post("ci-secret-1").await, 404);

    let home_dir = home.path().to_path_buf();
    let added = tokio::task::spawn_blocking(move || {
        support::daemon::cli(
            &home_dir,
            &[
                "webhook",
                "subscribe",
                "CI",
                "--prompt",
                "CI says: {message}",
                "--secret",
                "ci-secret-1",
            ],
        )
    })
    .await
    .unwrap();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let file = home.path().join("webhook_subscriptions.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    assert_eq!(post("wrong").await, 401);
    assert_eq!(post("ci-secret-1").await, 202);
    wait_until("the answer is logged", WAIT, || {
        daemon.logs().iter().any(|l| l.contains("Seen the build."))
    })
    .await;
    assert!(
        model.requests()[0]
            .last_message_text()
            .contains("CI says: build 41 failed")
    );

    // A listing never prints the secret; a removed route is gone at once.
    let home_dir = home.path().to_path_buf();
    let (listed, removed) = tokio::task::spawn_blocking(move || {
        (
            support::daemon::cli(&home_dir, &["webhook", "list", "--json"]),
            support::daemon::cli(&home_dir, &["webhook", "remove", "ci"]),
        )
    })
    .await
    .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(
        listed.contains("\"ci\"") && !listed.contains("ci-secret-1"),
        "{listed}"
    );
    assert!(removed.status.success());
    assert_eq!(post("ci-secret-1").await, 404);
    daemon.terminate();
}

#[test]
fn a_route_that_cannot_work_is_refused_before_start_naming_its_key() {
    let home = tempfile::tempdir().unwrap();
    let yaml = r#"platforms:
  webhook:
    enabled: true
    extra:
      routes:
        open:
          secret: INSECURE_NO_AUTH
        nosecret:
          prompt: "{x}"
        chat:
          secret: s
          deliver: signal
"#;
    std::fs::write(home.path().join("config.yaml"), yaml).unwrap();
    let checked = support::daemon::cli(home.path(), &["config", "check"]);
    let err = String::from_utf8_lossy(&checked.stderr).to_string()
        + &String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(78), "{err}");
    for needle in [
        "routes.open.secret: INSECURE_NO_AUTH is only allowed",
        "routes.nosecret.secret: required",
        "routes.chat.deliver: 'signal' is not a platform this gateway runs",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in {err}");
    }
}
