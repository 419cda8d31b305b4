//! The admin endpoint over real HTTP on 127.0.0.1:0: health, readiness flipping as adapters
//! go live, and a Prometheus exposition that parses line by line.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use hermesd::config::AdminConfig;
use hermesd::gateway::adapter_health::{AdapterHealth, AdapterState};
use hermesd::gateway::admin::{AdminCredentials, AdminError, AdminState, admin_addr, serve_admin};
use hermesd::gateway::metrics::GatewayMetrics;
use tokio_util::sync::CancellationToken;

async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let response = reqwest::get(format!("http://{addr}{path}"))
        .await
        .expect("request");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (status, content_type, response.text().await.expect("body"))
}

/// Parses the exposition: every sample has a TYPE'd family and a numeric value.
fn parse_metrics(text: &str) -> HashMap<String, f64> {
    let mut families = HashMap::new();
    let mut samples = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(matches!(kind, "counter" | "gauge"), "{line}");
            families.insert(name.to_owned(), kind.to_owned());
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            assert!(
                rest.split_once(' ')
                    .is_some_and(|(_, help)| !help.is_empty()),
                "{line}"
            );
        } else {
            let (series, value) = line.rsplit_once(' ').expect("series value");
            let name = series.split('{').next().expect("name");
            assert!(
                families.contains_key(name),
                "sample before its TYPE: {line}"
            );
            let value: f64 = value.parse().expect("numeric value");
            samples.insert(series.to_owned(), value);
        }
    }
    samples
}

#[tokio::test]
async fn health_ready_and_metrics_over_http() {
    let metrics = Arc::new(GatewayMetrics::new());
    let adapters = Arc::new(AdapterHealth::new());
    adapters.register("telegram");
    adapters.register("discord");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = hermesd::state::Store::open(&dir.path().join("state.db")).expect("store");
    let state = AdminState {
        metrics: metrics.clone(),
        adapters: adapters.clone(),
        store: Some(store.clone()),
        log: None,
        router: None,
        credentials: AdminCredentials::none(),
    };
    let shutdown = CancellationToken::new();
    let (addr, server) = serve_admin(
        "127.0.0.1:0".parse().expect("addr"),
        state,
        shutdown.clone(),
    )
    .await
    .expect("serve");

    let (status, _, body) = get(addr, "/health").await;
    assert_eq!((status, body.as_str()), (200, r#"{"status":"ok"}"#));

    let (status, _, body) = get(addr, "/ready").await;
    assert_eq!(status, 503, "{body}");
    let ready: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(ready["adapters"]["telegram"]["state"], "starting");

    adapters.set("telegram", AdapterState::Live, None);
    adapters.set("discord", AdapterState::Failed, Some("401 Unauthorized"));
    let (status, _, body) = get(addr, "/ready").await;
    assert_eq!(status, 503, "{body}");
    let ready: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        ready["adapters"]["discord"]["last_error"],
        "401 Unauthorized"
    );

    adapters.record_restart("discord");
    adapters.set("discord", AdapterState::Live, None);
    let (status, _, body) = get(addr, "/ready").await;
    assert_eq!(status, 200, "{body}");

    GatewayMetrics::incr(&metrics.events_in);
    GatewayMetrics::incr(&metrics.replies_out);
    GatewayMetrics::incr(&metrics.turns_failed);
    let (status, content_type, body) = get(addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let samples = parse_metrics(&body);
    assert_eq!(samples["hermesd_events_in_total"], 1.0);
    assert_eq!(samples["hermesd_replies_out_total"], 1.0);
    assert_eq!(samples["hermesd_turns_failed_total"], 1.0);
    assert_eq!(
        samples["hermesd_adapter_state{adapter=\"discord\",state=\"live\"}"],
        1.0
    );
    assert_eq!(
        samples["hermesd_adapter_state{adapter=\"discord\",state=\"failed\"}"],
        0.0
    );
    assert_eq!(
        samples["hermesd_adapter_restarts_total{adapter=\"discord\"}"],
        1.0
    );
    assert!(
        samples.contains_key("hermesd_store_commits_total"),
        "{body}"
    );

    shutdown.cancel();
    server.await.expect("join").expect("server exits cleanly");
    store.close().await;
}

#[tokio::test]
async fn refuses_non_loopback_addresses() {
    let shutdown = CancellationToken::new();
    let state = AdminState {
        metrics: Arc::new(GatewayMetrics::new()),
        adapters: Arc::new(AdapterHealth::new()),
        store: None,
        log: None,
        router: None,
        credentials: AdminCredentials::none(),
    };
    let err = serve_admin("0.0.0.0:0".parse().expect("addr"), state, shutdown)
        .await
        .expect_err("refused");
    assert!(matches!(err, AdminError::NotLoopback { .. }), "{err}");
    let config = |host: &str| AdminConfig {
        host: host.to_owned(),
        port: 8643,
        ..Default::default()
    };
    assert_eq!(
        admin_addr(&config("localhost")).expect("ok").to_string(),
        "127.0.0.1:8643"
    );
    assert_eq!(
        admin_addr(&config("::1")).expect("ok").to_string(),
        "[::1]:8643"
    );
    assert!(admin_addr(&config("10.0.0.1")).is_err());
}
