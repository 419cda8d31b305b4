//! `hermesd send` through the real binaries: a daemon polling the fake Bot API, and the CLI
//! run as a script would run it, talking to the daemon's admin API. The message reaches
//! the chat once even when the request is repeated with its idempotency key, waits out a
//! 429, goes to the home channel (and its topic) when no chat is named, reaches a named
//! topic as `message_thread_id`, comes from stdin or `--file -` too; a refusal by the
//! platform exits 1 with its reason; bad targets are refused with exit 2, and a request
//! without the operator's token is refused and records nothing.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::path::Path;
use std::process::Output;

use fake_telegram::{FloodOutcome, TOKEN};
use serde_json::json;
use telegram_support::{Rig, start};

const ADMIN_TOKEN: &str = "send-admin-token-0123456789abcdef";
const TAIL: &str = "admin:\n  token: \"send-admin-token-0123456789abcdef\"\n";
const CHAT: i64 = -100_4242;

/// Runs `hermesd send ARGS` with the home's config and nothing of this process's
/// environment but `PATH`; `env` adds variables. The daemon listens on a port the OS chose
/// (`HERMES__ADMIN__PORT=0` in its environment, not in this one): the command finds it in
/// the address the daemon recorded in the home.
async fn send_cli(rig: &Rig, args: &[&str], env: &[(&str, &str)]) -> Output {
    send_cli_fed(rig, args, env, None).await
}

/// As [`send_cli`], with `stdin` piped into the command (else stdin is empty).
async fn send_cli_fed(
    rig: &Rig,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> Output {
    let mut command = std::process::Command::new(support::daemon::daemon_binary());
    command
        .arg("send")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", rig.home.path().join("user"))
        .env("HERMES_HOME", rig.home.path())
        .env("HERMES_TEST_ISOLATION", "1")
        .env("NO_COLOR", "1")
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let stdin = stdin.unwrap_or_default().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = command.spawn().expect("run hermesd send");
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(stdin.as_bytes()).expect("feed stdin");
        drop(pipe);
        child.wait_with_output().expect("wait for hermesd send")
    })
    .await
    .expect("join");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !all.contains(ADMIN_TOKEN),
        "the admin token was printed: {all}"
    );
    assert!(!all.contains(TOKEN), "the bot token was printed: {all}");
    out
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// Rows of the delivery ledger recorded by sends (session key `send:...`).
fn send_rows(home: &Path) -> i64 {
    let conn = rusqlite::Connection::open_with_flags(
        home.join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open state.db");
    conn.query_row(
        "SELECT COUNT(*) FROM delivery_obligations WHERE session_key LIKE 'send:%'",
        [],
        |r| r.get(0),
    )
    .expect("count")
}

/// Accepted messages to `chat` with exactly `body` as their text.
fn copies(rig: &Rig, chat: i64, body: &str) -> usize {
    rig.sent_to(chat).iter().filter(|m| m.text == body).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_reaches_the_chat_once_even_when_its_request_is_repeated() {
    let rig = start("", TAIL, &[]).await;
    let target = format!("telegram:{CHAT}");
    let out = send_cli(
        &rig,
        &[
            "--to",
            &target,
            "--idempotency-key",
            "deploy-1",
            "deploy finished",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), format!("sent to {target}"));
    assert_eq!(copies(&rig, CHAT, "deploy finished"), 1);

    // The same invocation again (a script's retry): the ledger already has it.
    let out = send_cli(
        &rig,
        &[
            "--to",
            &target,
            "--idempotency-key",
            "deploy-1",
            "--json",
            "deploy finished",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["state"], "delivered", "{report}");
    // And the endpoint itself, twice with one key (a client retrying after a lost answer).
    let http = reqwest::Client::new();
    let body = json!({"platform": "telegram", "chat_id": CHAT.to_string(),
        "text": "second note", "idempotency_key": "note-2"});
    let mut answers = Vec::new();
    for _ in 0..2 {
        let response = http
            .post(format!("{}/send", rig.daemon().admin_url()))
            .bearer_auth(ADMIN_TOKEN)
            .json(&body)
            .send()
            .await
            .expect("post");
        answers.push((
            response.status().as_u16(),
            response.json::<serde_json::Value>().await.expect("json"),
        ));
    }
    assert_eq!(answers[0].0, 201, "{answers:?}");
    assert_eq!(answers[1].0, 200, "{answers:?}");
    assert_eq!(answers[0].1["id"], answers[1].1["id"], "{answers:?}");
    assert_eq!(answers[1].1["repeated"], true, "{answers:?}");
    rig.wait_for("the second note", |rig| {
        (copies(rig, CHAT, "second note") >= 1).then_some(())
    })
    .await;
    // A later message proves the lane had time to send anything repeated: still one copy.
    let out = send_cli(&rig, &["--to", &target, "a last line"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(copies(&rig, CHAT, "deploy finished"), 1);
    assert_eq!(copies(&rig, CHAT, "second note"), 1);
    assert_eq!(send_rows(rig.home.path()), 3);

    // A named topic reaches the Bot API as message_thread_id.
    let out = send_cli(
        &rig,
        &["--to", &target, "--thread", "77", "in the topic"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sent = rig.sent_to(CHAT);
    let topic = sent
        .iter()
        .find(|m| m.text == "in the topic")
        .expect("sent");
    assert_eq!(topic.thread_id, Some(77), "{sent:?}");

    // No chat and no home channel: a usage error naming the fix; nothing recorded.
    let out = send_cli(&rig, &["--to", "telegram", "where to?"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("TELEGRAM_HOME_CHANNEL"),
        "{}",
        text(&out.stderr)
    );
    // A platform the gateway does not run: refused with the ones it does.
    let out = send_cli(&rig, &["--to", "discord:123", "hello"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("'discord' is not running") && stderr.contains("telegram"),
        "{stderr}"
    );
    assert_eq!(send_rows(rig.home.path()), 4);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_waited_out_and_the_message_still_arrives_once() {
    let rig = start("", TAIL, &[]).await;
    // https://core.telegram.org/bots/api#responseparameters: retry_after seconds to wait.
    rig.telegram.flood_chat(CHAT, 1, 1);
    let out = send_cli(
        &rig,
        &["--to", &format!("telegram:{CHAT}"), "disk at 91%"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(copies(&rig, CHAT, "disk at 91%"), 1);
    let log = rig.telegram.flood_log();
    let outcomes: Vec<FloodOutcome> = log.iter().map(|e| e.outcome).collect();
    assert_eq!(
        outcomes,
        vec![
            FloodOutcome::Limited { retry_after: 1 },
            FloodOutcome::Accepted
        ],
        "one 429, then one send after the wait (never early): {log:?}"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_platform_alone_means_its_home_channel_and_only_the_operator_may_send() {
    let home_chat = "-1009876";
    let rig = start(
        "",
        TAIL,
        &[
            ("TELEGRAM_HOME_CHANNEL", home_chat),
            ("TELEGRAM_HOME_CHANNEL_THREAD_ID", "55"),
        ],
    )
    .await;
    let out = send_cli(
        &rig,
        &["--to", "telegram", "--subject", "Nightly", "backup ok"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sent = rig.sent_to(home_chat.parse().unwrap());
    assert_eq!(sent.len(), 1, "{sent:?}");
    // (Plain words: the text goes out as MarkdownV2, where brackets would be escaped.)
    assert_eq!(sent[0].text, "Nightly\n\nbackup ok");
    assert_eq!(sent[0].thread_id, Some(55));

    // --list shows the running platform and its home channel.
    let out = send_cli(&rig, &["--list"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("telegram:-1009876:55"),
        "{}",
        text(&out.stdout)
    );

    let rows = send_rows(rig.home.path());
    let url = format!("{}/send", rig.daemon().admin_url());
    let body = json!({"platform": "telegram", "text": "from a stranger", "idempotency_key": "x1"});
    let http = reqwest::Client::new();
    // No token, a wrong token: refused by the guard before the handler.
    let none = http.post(&url).json(&body).send().await.expect("post");
    assert_eq!(none.status().as_u16(), 401);
    let wrong = http
        .post(&url)
        .bearer_auth("not-the-token")
        .json(&body)
        .send()
        .await
        .expect("post");
    assert_eq!(wrong.status().as_u16(), 401);
    // Reads of the send routes need the token too.
    let list = http
        .get(format!("{}/send/targets", rig.daemon().admin_url()))
        .send()
        .await
        .expect("get");
    assert_eq!(list.status().as_u16(), 401);
    // The CLI with a wrong token says so (exit 2) and never prints it.
    let out = send_cli(
        &rig,
        &["--to", "telegram", "from a stranger"],
        &[("HERMES__ADMIN__TOKEN", "wrong-token-for-this-gateway")],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("wrong-token-for-this-gateway"));
    assert_eq!(send_rows(rig.home.path()), rows, "nothing recorded");
    assert!(
        !rig.telegram
            .sent_messages()
            .iter()
            .any(|m| m.text.contains("stranger"))
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_message_exits_1_with_the_reason_and_no_wait_returns_once_recorded() {
    let rig = start("", TAIL, &[]).await;
    let target = format!("telegram:{CHAT}");
    // https://core.telegram.org/bots/api#making-requests: an unsuccessful request answers
    // ok=false with error_code and description; 403 is the bot being blocked or kicked.
    rig.telegram
        .fail_next("sendMessage", fake_telegram::Fault::Forbidden, 1);
    let out = send_cli(&rig, &["--to", &target, "--json", "nobody hears this"], &[]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["state"], "failed", "{report}");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("not delivered to"), "{stderr}");
    assert!(stderr.to_lowercase().contains("forbidden"), "{stderr}");
    assert_eq!(copies(&rig, CHAT, "nobody hears this"), 0);

    // --no-wait: exit 0 once recorded; the message still goes out.
    let out = send_cli(
        &rig,
        &["--to", &target, "--no-wait", "fire and forget"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("recorded for"),
        "{}",
        text(&out.stdout)
    );
    rig.wait_for("the unwaited message", |rig| {
        (copies(rig, CHAT, "fire and forget") == 1).then_some(())
    })
    .await;
    // The text piped on stdin, as from `df -h | hermesd send ...`; `--file -` the same.
    let out = send_cli_fed(&rig, &["--to", &target], &[], Some("piped in\n")).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = send_cli_fed(
        &rig,
        &["--to", &target, "--file", "-"],
        &[],
        Some("from a file"),
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sent: Vec<String> = rig.sent_to(CHAT).into_iter().map(|m| m.text).collect();
    assert!(
        sent.iter().any(|t| t.trim_end() == "piped in") && sent.iter().any(|t| t == "from a file"),
        "{sent:?}"
    );
    // Nothing piped and no text: a usage error, nothing sent.
    let out = send_cli(&rig, &["--to", &target], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no message"),
        "{}",
        text(&out.stderr)
    );
    // --quiet: nothing on stdout.
    let out = send_cli(&rig, &["--to", &target, "-q", "shh"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    rig.stop().await;
}

/// `hermesd send` in a home with no daemon, `args` added.
fn send_without_daemon(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    std::process::Command::new(support::daemon::daemon_binary())
        .args(["send", "--to", "telegram:1", "hello"])
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.join("user"))
        .env("HERMES_HOME", home)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run")
}

#[test]
fn no_running_gateway_is_a_clear_failure() {
    let home = tempfile::tempdir().expect("home");
    std::fs::write(home.path().join("config.yaml"), TAIL).expect("config");
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let out = send_without_daemon(home.path(), &["--addr", &addr], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("no running gateway on http://{addr}"))
            && stderr.contains("hermesd run"),
        "{stderr}"
    );
    // With a port the OS would pick and nothing recorded: no address to try at all.
    let out = send_without_daemon(home.path(), &[], &[("HERMES__ADMIN__PORT", "0")]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no running gateway on this home"),
        "{stderr}"
    );
    // No token anywhere: a configuration error before anything is tried.
    let bare = tempfile::tempdir().expect("home");
    let out = send_without_daemon(bare.path(), &["--addr", &addr], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("admin.token"),
        "{}",
        text(&out.stderr)
    );
}
