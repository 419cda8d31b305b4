//! SIGHUP reload through the real `hermesd run` binary, with the in-tree fake Telegram (an
//! allowlist matters there) and the HTTP API enabled: an allowlist added to `.env` admits a
//! user who was sent a pairing code; a new default model is used by new turns while a turn
//! in flight finishes on the old one; an invalid configuration is refused whole, its error
//! logged with the new secret masked, and the old settings keep serving; a changed token and
//! port are named as needing a restart, and no token reaches the logs. A first run without
//! a model provider gets one from `.env` by a reload. Around each reload
//! systemd hears `RELOADING=1` (with `MONOTONIC_USEC`) then `READY=1`, and the watchdog
//! keeps being pinged.

mod support;

use std::path::Path;
use std::time::Duration;

use fake_telegram::{Chat, FakeTelegram, TOKEN, User};
use serde_json::json;
use support::daemon::{API_KEY, Daemon, api_env, base_env};
use support::fake_model::{FakeModel, RecordedRequest, Reply, Step};

const WAIT: Duration = Duration::from_secs(60);
const USER: i64 = 9001;
/// A new bot token written to `.env` in the last step; read only at start.
const NEW_TOKEN: &str = "424242:NEW-reloaded-token-value-0123";
/// A new secret-named `.env` variable whose value an invalid config quotes in its error.
const PROBE_SECRET: &str = "tok-reload-probe-0123456789";

/// `config.yaml`: the fake Telegram, tool progress off (one message per reply), `model`.
fn write_config(home: &Path, telegram: &FakeTelegram, model: &str) {
    let text = format!(
        "model:\n  provider: openai\n  default: {model}\n\
         display:\n  tool_progress: \"off\"\n\
         telegram:\n  enabled: true\n  extra:\n    base_url: {}\n    poll_timeout_seconds: 2\n",
        telegram.url()
    );
    std::fs::write(home.join("config.yaml"), text).unwrap();
}

fn write_dotenv(home: &Path, lines: &[String]) {
    std::fs::write(home.join(".env"), lines.join("\n") + "\n").unwrap();
}

fn sighup(daemon: &Daemon) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &daemon.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// SIGHUP, then the line that starts with `reload #n` + `outcome`.
async fn reload(daemon: &std::sync::Arc<Daemon>, n: u32, outcome: &str) -> String {
    sighup(daemon);
    let needle = format!("reload #{n}{outcome}");
    let d = daemon.clone();
    tokio::task::spawn_blocking(move || d.wait_for_line(&needle, WAIT))
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no 'reload #{n}{outcome}' line: {:#?}", daemon.logs()))
}

/// Waits until `chat` has received at least `n` messages; returns their texts.
async fn texts_to(telegram: &FakeTelegram, chat: i64, n: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let change =
            telegram.next_change(deadline.saturating_duration_since(tokio::time::Instant::now()));
        let texts: Vec<String> = telegram
            .sent_messages()
            .into_iter()
            .filter(|m| m.chat_id == chat)
            .map(|m| m.text)
            .collect();
        if texts.len() >= n {
            return texts;
        }
        assert!(
            change.await,
            "chat {chat} got {} of {n} messages: {texts:#?}",
            texts.len()
        );
    }
}

/// The models of the requests that carried `text`.
fn models_for(requests: &[RecordedRequest], text: &str) -> Vec<String> {
    requests
        .iter()
        .filter(|r| r.body_text.contains(text))
        .map(|r| r.model().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_applies_allowlists_and_model_refuses_invalid_config_and_names_restart_keys() {
    let telegram = FakeTelegram::start().await;
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = home.path();
    write_config(dir, &telegram, "fake-model");
    let mut dotenv = vec![
        format!("TELEGRAM_BOT_TOKEN={TOKEN}"),
        "API_SERVER_PORT=0".to_owned(),
    ];
    write_dotenv(dir, &dotenv);
    let mut env: Vec<(String, String)> = base_env(dir)
        .into_iter()
        .filter(|(k, _)| k != "API_SERVER_PORT")
        .collect();
    env.extend(
        [
            ("API_SERVER_KEY", API_KEY.to_owned()),
            ("OPENAI_BASE_URL", model.base_url()),
            ("OPENAI_API_KEY", "sk-test-model-key".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let (h, e) = (dir.to_path_buf(), env.clone());
    let daemon = std::sync::Arc::new(
        tokio::task::spawn_blocking(move || Daemon::start(&h, &e))
            .await
            .unwrap(),
    );
    assert!(daemon.api.is_some(), "the HTTP API is enabled too");
    let (chat, user) = (Chat::private(USER), User::new(USER, "Ada"));

    // Not allowed yet: a pairing code, and nothing reaches the model.
    telegram.push_text(chat.clone(), user.clone(), "hi there");
    let texts = texts_to(&telegram, USER, 1).await;
    assert!(texts[0].contains("pairing code"), "{texts:?}");
    assert!(model.requests().is_empty());

    // 1. The allowlist in .env, then SIGHUP: the same user is answered.
    dotenv.push(format!("TELEGRAM_ALLOWED_USERS={USER}"));
    write_dotenv(dir, &dotenv);
    let applied = reload(&daemon, 1, " applied").await;
    assert!(applied.contains("auth.telegram.allowed_users"), "{applied}");
    telegram.push_text(chat.clone(), user.clone(), "hello after reload");
    let texts = texts_to(&telegram, USER, 2).await;
    assert_eq!(texts[1], "echo: hello after reload");
    assert_eq!(
        models_for(&model.requests(), "hello after reload"),
        ["fake-model"]
    );

    // 2. A new default model while a turn is in flight: that turn finishes on the old model
    //    (its second call too), the next turn uses the new one.
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    model.push(Step::Gated {
        reply: Reply::tool_call("no_such_tool", json!({})),
        gate: gate.clone(),
    });
    telegram.push_text(chat.clone(), user.clone(), "turn in flight");
    model.wait_for_requests(2, WAIT).await;
    write_config(dir, &telegram, "fake-model-2");
    let applied = reload(&daemon, 2, " applied").await;
    assert!(applied.contains("model.default"), "{applied}");
    gate.add_permits(1);
    let texts = texts_to(&telegram, USER, 3).await;
    assert_eq!(texts[2], "echo: turn in flight");
    assert_eq!(
        models_for(&model.requests(), "turn in flight"),
        ["fake-model", "fake-model"]
    );
    telegram.push_text(chat.clone(), user.clone(), "first turn on the new model");
    let texts = texts_to(&telegram, USER, 4).await;
    assert_eq!(texts[3], "echo: first turn on the new model");
    assert_eq!(
        models_for(&model.requests(), "first turn on the new model"),
        ["fake-model-2"]
    );

    // 3. An invalid config (quoting a new .env secret): refused whole, the error logged with
    //    the secret masked, and the previous settings (allowlist, model) keep serving.
    // The allowlist changes too: applied, it would lock the user out.
    dotenv.retain(|line| !line.starts_with("TELEGRAM_ALLOWED_USERS="));
    dotenv.push(format!("TELEGRAM_ALLOWED_USERS={}", USER + 1));
    dotenv.push(format!("RELOAD_PROBE_TOKEN={PROBE_SECRET}"));
    write_dotenv(dir, &dotenv);
    let valid = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        format!("{valid}session_reset:\n  mode: ${{RELOAD_PROBE_TOKEN}}\n"),
    )
    .unwrap();
    let rejected = reload(&daemon, 3, " rejected").await;
    assert!(rejected.contains("previous settings"), "{rejected}");
    let error = daemon
        .wait_for_line("reload #3: config error: session_reset.mode", WAIT)
        .unwrap_or_else(|| panic!("no error naming the key: {:#?}", daemon.logs()));
    assert!(
        error.contains("got '***'"),
        "the new secret must be masked in the error line"
    );
    telegram.push_text(chat.clone(), user.clone(), "still served");
    let texts = texts_to(&telegram, USER, 5).await;
    assert_eq!(texts[4], "echo: still served");
    assert_eq!(
        models_for(&model.requests(), "still served"),
        ["fake-model-2"]
    );

    // 4. A valid config again with a new token and port: named as needing a restart, the
    //    old ones stay in force (the bot keeps polling with its token).
    dotenv.retain(|line| !line.starts_with("TELEGRAM_ALLOWED_USERS="));
    dotenv.push(format!("TELEGRAM_ALLOWED_USERS={USER}"));
    for line in dotenv.iter_mut() {
        if line.starts_with("TELEGRAM_BOT_TOKEN=") {
            *line = format!("TELEGRAM_BOT_TOKEN={NEW_TOKEN}");
        }
        if line.starts_with("API_SERVER_PORT=") {
            *line = "API_SERVER_PORT=18999".to_owned();
        }
    }
    write_dotenv(dir, &dotenv);
    std::fs::write(dir.join("config.yaml"), &valid).unwrap();
    let applied = reload(&daemon, 4, " applied").await;
    assert!(
        applied.contains("nothing that applies live changed"),
        "{applied}"
    );
    let restart = daemon
        .wait_for_line("reload #4: restart hermesd to apply", WAIT)
        .unwrap_or_else(|| panic!("no restart warning: {:#?}", daemon.logs()));
    assert!(restart.contains("platforms.telegram.token"), "{restart}");
    assert!(restart.contains("api_server.port"), "{restart}");
    telegram.push_text(chat.clone(), user.clone(), "old token still polls");
    let texts = texts_to(&telegram, USER, 6).await;
    assert_eq!(texts[5], "echo: old token still polls");

    let daemon = std::sync::Arc::into_inner(daemon).expect("one owner");
    let (status, logs) = tokio::task::spawn_blocking(move || daemon.terminate())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0), "{logs:#?}");
    // Exactly one reply per inbound message.
    let texts = texts_to(&telegram, USER, 6).await;
    assert_eq!(texts.len(), 6, "{texts:#?}");
    let logs = logs.join("\n");
    for secret in [TOKEN, NEW_TOKEN, PROBE_SECRET, API_KEY] {
        assert!(!logs.contains(secret), "a secret reached the logs");
    }
}

/// `CLOCK_MONOTONIC` in microseconds, the clock `MONOTONIC_USEC` is read from.
fn monotonic_usec() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    now.tv_sec as u64 * 1_000_000 + now.tv_nsec as u64 / 1_000
}

#[test]
fn systemd_hears_reloading_then_ready_and_the_watchdog_keeps_pinging() {
    use std::os::unix::net::UnixDatagram;

    let home = tempfile::tempdir().unwrap();
    let socket = home.path().join("notify.sock");
    let listener = UnixDatagram::bind(&socket).unwrap();
    listener.set_read_timeout(Some(WAIT)).unwrap();
    let mut env = api_env(home.path(), "http://127.0.0.1:9");
    env.push(("NOTIFY_SOCKET".to_owned(), socket.display().to_string()));
    env.push(("WATCHDOG_USEC".to_owned(), "300000".to_owned()));
    let daemon = Daemon::start(home.path(), &env);
    let receive = || {
        let mut buf = [0u8; 256];
        let n = listener.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    // The next message that is not a watchdog ping (pings keep coming: bounded by time).
    let next_state = || {
        let deadline = std::time::Instant::now() + WAIT;
        while std::time::Instant::now() < deadline {
            let message = receive();
            if message != "WATCHDOG=1" {
                return message;
            }
        }
        panic!("only watchdog pings for {WAIT:?}");
    };
    assert_eq!(next_state(), "READY=1");

    for (n, config) in [
        (1, "display:\n  tool_progress: new\n"),
        (2, "model: [unclosed\n"),
    ] {
        std::fs::write(home.path().join("config.yaml"), config).unwrap();
        let before = monotonic_usec();
        sighup(&daemon);
        let reloading = next_state();
        let usec: u64 = reloading
            .strip_prefix("RELOADING=1\nMONOTONIC_USEC=")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("reload {n}: {reloading:?}"));
        assert!(
            before <= usec && usec <= monotonic_usec(),
            "reload {n}: MONOTONIC_USEC {usec} is not the time of the reload"
        );
        assert_eq!(next_state(), "READY=1", "reload {n}");
        let outcome = if n == 1 { "applied" } else { "rejected" };
        daemon
            .wait_for_line(&format!("reload #{n} {outcome}"), WAIT)
            .unwrap_or_else(|| panic!("reload {n}: {:#?}", daemon.logs()));
    }
    // Still healthy after both: the main loop goes on pinging.
    for _ in 0..2 {
        assert_eq!(receive(), "WATCHDOG=1");
    }
    let (status, logs) = daemon.terminate();
    assert_eq!(status.code(), Some(0), "{logs:#?}");
}

/// The start-up twin of the refused reload: configuration errors printed before the daemon
/// runs mask `.env` secrets too, even though the configuration never loaded.
#[test]
fn invalid_config_at_start_masks_dotenv_secrets_in_its_errors() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join(".env"),
        format!("RELOAD_PROBE_TOKEN={PROBE_SECRET}\n"),
    )
    .unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "session_reset:\n  mode: ${RELOAD_PROBE_TOKEN}\n",
    )
    .unwrap();
    let env = api_env(home.path(), "http://127.0.0.1:9");
    let mut daemon = Daemon::spawn(home.path(), &env, false);
    let status = daemon.wait(WAIT);
    let logs = daemon.logs().join("\n");
    assert_eq!(status.code(), Some(78), "{logs}");
    assert!(
        logs.contains("session_reset.mode") && logs.contains("got '***'"),
        "{logs}"
    );
    assert!(!logs.contains(PROBE_SECRET), "the secret reached stderr");
}

/// The first-run path: the HTTP API answers with setup instructions until the operator adds
/// a provider to `.env` and reloads; then the same daemon answers through that provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_added_after_a_first_run_is_used_after_sighup() {
    const MODEL_KEY: &str = "sk-added-by-the-operator-0123";
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().to_path_buf();
    let env = base_env(&dir);
    let daemon = std::sync::Arc::new(
        tokio::task::spawn_blocking(move || Daemon::start(&dir, &env))
            .await
            .unwrap(),
    );
    let dotenv_path = home.path().join(".env");
    let dotenv = std::fs::read_to_string(&dotenv_path).unwrap();
    let key = dotenv
        .lines()
        .find_map(|l| l.strip_prefix("API_SERVER_KEY="))
        .expect("a generated API key")
        .to_owned();
    let ask = |text: &str| {
        let request = reqwest::Client::builder()
            .timeout(WAIT)
            .build()
            .unwrap()
            .post(format!("{}/v1/chat/completions", daemon.api_url()))
            .bearer_auth(&key)
            .json(
                &json!({"model": "hermes-agent", "messages": [{"role": "user", "content": text}]}),
            );
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200);
            let body: serde_json::Value = response.json().await.unwrap();
            body["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let text = ask("hello").await;
    assert!(text.contains("no model provider is configured"), "{text}");
    assert!(model.requests().is_empty());

    std::fs::write(
        &dotenv_path,
        format!(
            "{dotenv}OPENAI_API_KEY={MODEL_KEY}\nOPENAI_BASE_URL={}\n",
            model.base_url()
        ),
    )
    .unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "model:\n  provider: openai\n  default: fake-model\n",
    )
    .unwrap();
    let applied = reload(&daemon, 1, " applied").await;
    for key in ["model.default", "providers.openai.api_key"] {
        assert!(applied.contains(key), "{applied}");
    }
    assert_eq!(ask("hello again").await, "echo: hello again");
    let requests = model.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert_eq!(requests[0].model(), Some("fake-model"));
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {MODEL_KEY}").as_str())
    );

    let daemon = std::sync::Arc::into_inner(daemon).expect("one owner");
    let (status, logs) = tokio::task::spawn_blocking(move || daemon.terminate())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0), "{logs:#?}");
    let logs = logs.join("\n");
    assert!(
        !logs.contains("reload #1: restart"),
        "nothing needs a restart after adding a provider: {logs}"
    );
    assert!(
        !logs.contains(MODEL_KEY) && !logs.contains(&key),
        "a key reached the logs"
    );
}
