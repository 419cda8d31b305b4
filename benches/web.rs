//! Web tools benchmark: the `web_search` round trip against a SearXNG fake that answers
//! instantly (request over loopback HTTP, JSON parse, ordering, fencing and the threat scan of
//! every snippet), and the `native` `web_extract` of a small article page (guarded resolver,
//! fetch, Readability, fence). Prints one JSON report (also written to
//! `target/bench-web.json`). `-- --quick` is the CI size.
//!
//! The fakes answer from memory, so nearly all of the time measured is ours.

#[path = "../tests/support/fake_web.rs"]
mod fake_web;

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use fake_web::FakeWeb;
use futures_util::future::BoxFuture;
use hermesd::config::{ExtractBackend, SearchBackend, WebConfig, WebEndpoints};
use hermesd::tools::web::guard::Lookup;
use hermesd::tools::web::{WebSettings, extract, search};
use serde_json::{Value, json};

fn summary(mut samples: Vec<f64>) -> Value {
    samples.sort_by(|a, b| a.total_cmp(b));
    let pick = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)];
    json!({"p50_us": pick(0.5).round(), "p99_us": pick(0.99).round(), "n": samples.len()})
}

async fn timed<F, Fut>(runs: usize, mut once: F) -> Value
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Value>,
{
    for _ in 0..runs / 10 + 1 {
        once().await;
    }
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let out = once().await;
        samples.push(started.elapsed().as_secs_f64() * 1e6);
        assert!(out.get("error").is_none_or(Value::is_null), "{out}");
    }
    summary(samples)
}

struct Loopback;

impl Lookup for Loopback {
    fn lookup(&self, _host: String) -> BoxFuture<'static, std::io::Result<Vec<IpAddr>>> {
        Box::pin(async { Ok(vec![IpAddr::from([127, 0, 0, 1])]) })
    }
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 100 } else { 1000 };
    let fake = FakeWeb::start().await;
    let mut settings = WebSettings::new(
        WebConfig {
            search: Some(SearchBackend::Searxng),
            extract: Some(ExtractBackend::Native),
            allow_private_urls: true,
            endpoints: WebEndpoints {
                searxng_url: Some(fake.base_url()),
                ..WebConfig::default().endpoints
            },
            ..WebConfig::default()
        },
        hermes_adapter::net::Net::direct(),
    );
    settings.lookup = Arc::new(Loopback);
    let args = json!({"query": "rust", "limit": 3});
    let search_round_trip = timed(runs, || search::run(&settings, &args)).await;

    let cache = tempfile::tempdir().expect("cache dir");
    let page = json!({"urls": [format!("http://page.test:{}/page/article", fake.port())]});
    let extract_round_trip = timed(runs / 4, || async {
        let out = extract::run(&settings, cache.path(), &page).await;
        out["results"][0].clone()
    })
    .await;

    let report = json!({
        "bench": "web",
        "web_search_searxng_round_trip": search_round_trip,
        "web_extract_native_article": extract_round_trip,
    });
    let text = serde_json::to_string_pretty(&report).expect("report");
    println!("{text}");
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".to_owned());
    let _ = std::fs::write(std::path::Path::new(&target).join("bench-web.json"), text);
}
