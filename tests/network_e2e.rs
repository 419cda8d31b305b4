//! Egress through a proxy with a private CA, as an operator behind a TLS-inspecting proxy
//! runs it: the three platform fakes are served over TLS with a certificate from a private
//! CA, the real daemon is configured through the environment only (`HTTPS_PROXY`,
//! `SSL_CERT_FILE`), and every connection — Telegram's Bot API, Discord's REST and gateway
//! WebSocket, Slack's Web API and Socket Mode WebSocket — must go through the CONNECT proxy
//! and trust the CA. Without the CA each platform fails with the certificate named.
//! `hermesd doctor` reports the proxy and each platform's TLS handshake.

mod network_support;
mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use fake_discord::FakeDiscord;
use fake_slack::FakeSlack;
use fake_telegram::FakeTelegram;
use network_support::{ConnectProxy, TestCa};
use support::daemon::{Daemon, base_env};
use support::fake_model::FakeModel;

const DISCORD_TOKEN: &str = "discord-proxy-e2e-token-7c2b1d";
/// Bounded waits; generous for a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(60);

fn addr_of(url: &str) -> SocketAddr {
    let rest = url.split("://").nth(1).unwrap();
    rest.split('/').next().unwrap().parse().unwrap()
}

/// The fakes, each behind its own TLS front, and a config pointing every platform at the
/// fronts by `https://` / `wss://` URL.
struct Platforms {
    telegram: FakeTelegram,
    discord: FakeDiscord,
    slack: FakeSlack,
    model: FakeModel,
    fronts: Vec<SocketAddr>,
    config: String,
}

async fn platforms(ca: &TestCa) -> Platforms {
    let telegram = FakeTelegram::start().await;
    let discord = FakeDiscord::start(DISCORD_TOKEN, Duration::from_secs(30)).await;
    let slack = FakeSlack::start().await;
    let model = FakeModel::start().await;
    let telegram_front = ca.tls_front(addr_of(&telegram.url())).await;
    let discord_front = ca.tls_front(addr_of(&discord.api_base_url())).await;
    let slack_front = ca.tls_front(addr_of(&slack.api_base_url())).await;
    slack.set_socket_url(Some(format!("wss://{slack_front}/link/?ticket=proxy-e2e")));
    let config = format!(
        "telegram:\n  enabled: true\n  extra:\n    base_url: https://{telegram_front}\n    poll_timeout_seconds: 1\n\
         discord:\n  enabled: true\n  extra:\n    api_base_url: https://{discord_front}/api/v10\n    gateway_url: wss://{discord_front}/gw\n\
         slack:\n  enabled: true\n  extra:\n    api_base_url: https://{slack_front}/api\n"
    );
    Platforms {
        telegram,
        discord,
        slack,
        model,
        fronts: vec![telegram_front, discord_front, slack_front],
        config,
    }
}

/// A CA, the proxy, the platforms behind TLS fronts, and a home holding their config and
/// the CA's PEM file (not named anywhere yet).
async fn setup() -> (
    TestCa,
    ConnectProxy,
    Platforms,
    tempfile::TempDir,
    std::path::PathBuf,
) {
    let ca = TestCa::new();
    let proxy = ConnectProxy::start().await;
    let p = platforms(&ca).await;
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), &p.config).unwrap();
    let ca_file = home.path().join("corp-ca.pem");
    std::fs::write(&ca_file, &ca.ca_pem).unwrap();
    (ca, proxy, p, home, ca_file)
}

/// The daemon's environment: tokens, the model, and the network settings under test.
fn env_for(home: &Path, p: &Platforms, network: &[(&str, String)]) -> Vec<(String, String)> {
    let tokens = p.slack.tokens();
    let mut env = base_env(home);
    env.extend(
        [
            ("TELEGRAM_BOT_TOKEN", p.telegram.token().to_owned()),
            ("DISCORD_BOT_TOKEN", DISCORD_TOKEN.to_owned()),
            ("SLACK_BOT_TOKEN", tokens.bot.clone()),
            ("SLACK_APP_TOKEN", tokens.app.clone()),
            ("API_SERVER_ENABLED", "false".to_owned()),
            // Plain http: HTTPS_PROXY does not apply, so the model is reached directly.
            ("OPENAI_BASE_URL", p.model.base_url()),
            ("OPENAI_API_KEY", "sk-proxy-e2e".to_owned()),
            ("HERMES__MODEL__PROVIDER", "openai".to_owned()),
            ("HERMES__MODEL__DEFAULT", "fake-model".to_owned()),
            ("HERMESD_ADAPTER_BACKOFF_SECS", "1".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    env.extend(network.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    env
}

async fn start(home: &Path, env: Vec<(String, String)>) -> Daemon {
    let home = home.to_path_buf();
    tokio::task::spawn_blocking(move || Daemon::start(&home, &env))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_platform_is_reached_through_the_proxy_trusting_the_private_ca() {
    let (_ca, proxy, p, home, ca_file) = setup().await;
    let env = env_for(
        home.path(),
        &p,
        &[
            ("HTTPS_PROXY", proxy.url()),
            ("SSL_CERT_FILE", ca_file.display().to_string()),
        ],
    );
    let daemon = start(home.path(), env).await;

    // Discord's gateway WebSocket: IDENTIFY arrived over wss through the proxy.
    p.discord.wait_for_frames(2, 1).await;
    // Slack's Socket Mode WebSocket: the socket said hello.
    p.slack.wait_for_hellos(1).await;
    // Telegram: the long poll is running.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while p.telegram.calls_of("getUpdates").is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Telegram never polled: {:#?}",
            daemon.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Every front was reached through the proxy, and nothing else went through it.
    let tunnels = proxy.tunnels();
    for front in &p.fronts {
        assert!(
            tunnels.contains(&front.to_string()),
            "no tunnel to {front}: {tunnels:?}"
        );
    }
    assert!(
        tunnels
            .iter()
            .all(|t| p.fronts.iter().any(|f| *t == f.to_string())),
        "{tunnels:?}"
    );
    let (status, logs) = tokio::task::block_in_place(|| daemon.terminate());
    assert!(status.success(), "{logs:#?}");
    assert!(
        !logs.iter().any(|l| l.contains("certificate")),
        "a certificate complaint with the CA trusted: {logs:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_private_ca_each_platform_names_the_certificate_problem() {
    let (_ca, proxy, p, home, _ca_file) = setup().await;
    let env = env_for(home.path(), &p, &[("HTTPS_PROXY", proxy.url())]);
    let daemon = start(home.path(), env).await;
    for platform in ["telegram", "discord", "slack"] {
        let line = tokio::task::block_in_place(|| {
            daemon.wait_for_line_where(
                |line: &str| {
                    line.contains(platform)
                        && line.contains("invalid peer certificate: UnknownIssuer")
                },
                PATIENCE,
            )
        });
        assert!(
            line.is_some(),
            "{platform}: no certificate error: {:#?}",
            daemon.logs()
        );
    }
    assert!(
        p.discord.frames_with_op(2).is_empty(),
        "IDENTIFY without trust"
    );
    assert!(p.telegram.calls_of("getUpdates").is_empty());
    // The proxy carried the attempts: the failure is the certificate, not the path.
    assert!(!proxy.tunnels().is_empty());
    let (status, logs) = tokio::task::block_in_place(|| daemon.terminate());
    assert!(status.success(), "{logs:#?}");
}

/// `hermesd doctor`: the proxy in use, then one TLS line per platform — accepted with the
/// CA, an error naming the certificate without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_the_proxy_and_each_tls_handshake() {
    let (_ca, proxy, p, home, ca_file) = setup().await;
    let doctor = |network: Vec<(&'static str, String)>| {
        let env = env_for(home.path(), &p, &network);
        let home = home.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            let output = std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"))
                .args(["doctor", "--json", "--timeout", "30"])
                .env_clear()
                .envs(env)
                .env("HERMES_HOME", home)
                .output()
                .unwrap();
            serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
        })
    };
    let check = |report: &serde_json::Value, name: &str| -> serde_json::Value {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} check: {report:#}"))
            .clone()
    };

    let trusted = doctor(vec![
        ("HTTPS_PROXY", proxy.url()),
        ("SSL_CERT_FILE", ca_file.display().to_string()),
    ])
    .await
    .unwrap();
    let network = check(&trusted, "network");
    assert_eq!(network["status"], "ok", "{network}");
    let message = network["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "proxy for https: {} (from HTTPS_PROXY)",
            proxy.url()
        )),
        "{message}"
    );
    assert!(message.contains("(SSL_CERT_FILE)"), "{message}");
    for (platform, front) in ["telegram", "discord", "slack"].iter().zip(&p.fronts) {
        let tls = check(&trusted, &format!("{platform}.tls"));
        assert_eq!(tls["status"], "ok", "{tls}");
        let text = tls["message"].as_str().unwrap();
        assert!(
            text.contains(&front.to_string()) && text.contains("through"),
            "{text}"
        );
    }

    let untrusted = doctor(vec![("HTTPS_PROXY", proxy.url())]).await.unwrap();
    for platform in ["telegram", "discord", "slack"] {
        let tls = check(&untrusted, &format!("{platform}.tls"));
        assert_eq!(tls["status"], "error", "{tls}");
        assert!(
            tls["message"]
                .as_str()
                .unwrap()
                .contains("invalid peer certificate: UnknownIssuer"),
            "{tls}"
        );
    }
}
