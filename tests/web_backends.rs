//! The web tools against wire-level fakes of SearXNG, Brave, Tavily and Firecrawl
//! (`support/fake_web.rs`): each backend's success in Hermes's result shape, its documented
//! failures (bad key, rate limit, outage, malformed answer) as one clear error without a
//! retry, and the SSRF guard on the native fetch — a public-looking name that resolves to
//! 127.0.0.1 (through an injected resolver), a redirect to 127.0.0.1, and metadata addresses.

mod support;

use std::net::IpAddr;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use hermesd::config::{ExtractBackend, SearchBackend, WebConfig, WebEndpoints};
use hermesd::tools::web::guard::Lookup;
use hermesd::tools::web::{WebSettings, extract, search};
use serde_json::{Value, json};
use support::fake_web::{self, FakeWeb, Mode};

fn settings(
    fake: &FakeWeb,
    search: Option<SearchBackend>,
    extract: Option<ExtractBackend>,
) -> WebSettings {
    let base = fake.base_url();
    let secret = |s: &str| Some(hermes_adapter::Secret::new(s));
    WebSettings::new(
        WebConfig {
            search,
            extract,
            endpoints: WebEndpoints {
                searxng_url: Some(base.clone()),
                brave_key: secret(fake_web::BRAVE_TOKEN),
                brave_base: base.clone(),
                tavily_key: secret(fake_web::TAVILY_KEY),
                tavily_base: base.clone(),
                firecrawl_key: secret(fake_web::FIRECRAWL_KEY),
                firecrawl_url: Some(base),
            },
            ..WebConfig::default()
        },
        hermes_adapter::net::Net::direct(),
    )
}

const SEARCH_BACKENDS: [SearchBackend; 4] = [
    SearchBackend::Searxng,
    SearchBackend::Brave,
    SearchBackend::Tavily,
    SearchBackend::Firecrawl,
];

#[tokio::test]
async fn every_search_backend_answers_in_hermes_shape_with_snippets_fenced() {
    let fake = FakeWeb::start().await;
    for backend in SEARCH_BACKENDS {
        let out = search::run(
            &settings(&fake, Some(backend), None),
            &json!({"query": "rust", "limit": 3}),
        )
        .await;
        assert_eq!(out["success"], true, "{backend:?}: {out}");
        let web = out["data"]["web"].as_array().unwrap();
        assert_eq!(web.len(), 3, "{backend:?}: {out}");
        for (i, hit) in web.iter().enumerate() {
            assert_eq!(hit["position"], i + 1);
            assert_eq!(hit["untrusted"], true);
            let description = hit["description"].as_str().unwrap();
            assert!(
                description.starts_with("<untrusted-web-content>\n"),
                "{description}"
            );
            assert_eq!(
                description.matches("</untrusted-web-content>").count(),
                1,
                "{description}"
            );
        }
        let hostile = web
            .iter()
            .find(|h| h["url"] == "https://doc.rust-lang.org/book/")
            .unwrap();
        assert_eq!(
            hostile["threat_findings"],
            json!(["prompt_injection"]),
            "{backend:?}"
        );
    }
    // SearXNG orders by score: the book (9.0) first.
    let out = search::run(
        &settings(&fake, Some(SearchBackend::Searxng), None),
        &json!({"query": "rust"}),
    )
    .await;
    assert_eq!(out["data"]["web"][0]["title"], "Rust book");
    // What each service was sent: its documented parameters and credentials.
    let seen = fake.seen();
    let searx = seen.iter().find(|s| s.service == "searxng").unwrap();
    assert!(searx.query.contains(&("format".into(), "json".into())));
    let brave = seen.iter().find(|s| s.service == "brave").unwrap();
    assert!(brave.query.contains(&("count".into(), "3".into())));
    let tavily = seen.iter().find(|s| s.service == "tavily").unwrap();
    assert_eq!(tavily.body["max_results"], 3);
    assert_eq!(tavily.body["include_raw_content"], false);
}

#[tokio::test]
async fn search_limits_are_clamped_and_brave_never_asked_for_more_than_20() {
    let fake = FakeWeb::start().await;
    let out = search::run(
        &settings(&fake, Some(SearchBackend::Brave), None),
        &json!({"query": "q", "limit": 500}),
    )
    .await;
    assert_eq!(out["success"], true, "{out}");
    let brave = fake
        .seen()
        .into_iter()
        .find(|s| s.service == "brave")
        .unwrap();
    assert!(brave.query.contains(&("count".into(), "20".into())));
    let out = search::run(
        &settings(&fake, Some(SearchBackend::Searxng), None),
        &json!({"query": "q", "limit": "0"}),
    )
    .await;
    assert_eq!(out["data"]["web"].as_array().unwrap().len(), 1);
    let out = search::run(
        &settings(&fake, Some(SearchBackend::Searxng), None),
        &json!({"query": "  "}),
    )
    .await;
    assert_eq!(out["success"], false);
}

#[tokio::test]
async fn documented_failures_are_one_clear_error_and_never_retried() {
    let fake = FakeWeb::start().await;
    let cases: &[(Mode, &str)] = &[
        (Mode::Unauthorized, "refused the API key (HTTP 401)"),
        (
            Mode::RateLimited,
            "rate-limiting requests (HTTP 429), retry after 1; not retried",
        ),
        (Mode::ServerError, "answered HTTP 502: upstream unavailable"),
        (Mode::Malformed, "not its documented JSON"),
    ];
    for (mode, expected) in cases {
        fake.set_mode(*mode);
        for backend in SEARCH_BACKENDS {
            let before = fake.seen().len();
            let out = search::run(
                &settings(&fake, Some(backend), None),
                &json!({"query": "q"}),
            )
            .await;
            assert_eq!(out["success"], false, "{backend:?} {mode:?}");
            let error = out["error"].as_str().unwrap();
            // SearXNG has no keys: its 401 is a plain HTTP error.
            if !(backend == SearchBackend::Searxng && *mode == Mode::Unauthorized) {
                assert!(error.contains(expected), "{backend:?} {mode:?}: {error}");
            }
            assert_eq!(
                fake.seen().len(),
                before + 1,
                "exactly one request, no retry storm"
            );
            for secret in [
                fake_web::BRAVE_TOKEN,
                fake_web::TAVILY_KEY,
                fake_web::FIRECRAWL_KEY,
            ] {
                assert!(!error.contains(secret));
            }
        }
    }
    fake.set_mode(Mode::JsonDisabled);
    let out = search::run(
        &settings(&fake, Some(SearchBackend::Searxng), None),
        &json!({"query": "q"}),
    )
    .await;
    assert!(out["error"].as_str().unwrap().contains("HTTP 403"), "{out}");
    fake.set_mode(Mode::PlanLimit);
    let out = search::run(
        &settings(&fake, Some(SearchBackend::Tavily), None),
        &json!({"query": "q"}),
    )
    .await;
    assert!(out["error"].as_str().unwrap().contains("HTTP 432"), "{out}");
    fake.set_mode(Mode::PaymentRequired);
    let out = search::run(
        &settings(&fake, Some(SearchBackend::Firecrawl), None),
        &json!({"query": "q"}),
    )
    .await;
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .contains("HTTP 402: Payment required"),
        "{out}"
    );
}

#[tokio::test]
async fn a_service_or_page_that_never_answers_is_a_timeout_error() {
    let fake = FakeWeb::start().await;
    fake.set_mode(Mode::Stall);
    for backend in SEARCH_BACKENDS {
        let mut settings = settings(&fake, Some(backend), None);
        settings.timeout = Some(std::time::Duration::from_millis(300));
        let out = search::run(&settings, &json!({"query": "q"})).await;
        assert!(
            out["error"]
                .as_str()
                .unwrap()
                .ends_with("did not answer in time"),
            "{backend:?}: {out}"
        );
    }
    let mut settings = native(&fake, true);
    settings.timeout = Some(std::time::Duration::from_millis(300));
    let result = extract_one(
        &settings,
        &format!("http://127.0.0.1:{}/page/article", fake.port()),
    )
    .await;
    assert_eq!(
        result["error"], "the page did not answer in time",
        "{result}"
    );
}

#[tokio::test]
async fn a_wrong_key_is_refused_by_the_fake_and_reported() {
    let fake = FakeWeb::start().await;
    let mut bad = settings(&fake, Some(SearchBackend::Tavily), None);
    bad.config.endpoints.tavily_key = Some(hermes_adapter::Secret::new("tvly-wrong"));
    let out = search::run(&bad, &json!({"query": "q"})).await;
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .contains("Tavily refused the API key"),
        "{out}"
    );
}

/// Maps every name to one address: a public-looking host that is really this machine.
struct EverythingIs(IpAddr);

impl Lookup for EverythingIs {
    fn lookup(&self, _host: String) -> BoxFuture<'static, std::io::Result<Vec<IpAddr>>> {
        let ip = self.0;
        Box::pin(async move { Ok(vec![ip]) })
    }
}

fn native(fake: &FakeWeb, allow_private: bool) -> WebSettings {
    let mut settings = settings(fake, None, Some(ExtractBackend::Native));
    settings.config.allow_private_urls = allow_private;
    settings.lookup = Arc::new(EverythingIs("127.0.0.1".parse().unwrap()));
    settings
}

async fn extract_one(settings: &WebSettings, url: &str) -> Value {
    let cache = tempfile::tempdir().unwrap();
    let out = extract::run(settings, cache.path(), &json!({"urls": [url]})).await;
    out["results"][0].clone()
}

#[tokio::test]
async fn native_extraction_is_guarded_at_the_name_the_address_and_every_redirect() {
    let fake = FakeWeb::start().await;
    let port = fake.port();
    let refused = [
        format!("http://127.0.0.1:{port}/page/article"),
        format!("http://looks-public.example:{port}/page/article"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://metadata.google.internal/".to_owned(),
    ];
    for url in &refused {
        let result = extract_one(&native(&fake, false), url).await;
        assert!(
            result["error"].as_str().unwrap().starts_with("Blocked:"),
            "{url}: {result}"
        );
        assert_eq!(result["content"], "");
    }
    assert!(fake.seen().is_empty(), "nothing refused reached the server");

    // Allowed: the same page through the name that resolves to 127.0.0.1.
    let allowed = native(&fake, true);
    let result = extract_one(
        &allowed,
        &format!("http://looks-public.example:{port}/page/article"),
    )
    .await;
    assert_eq!(result["error"], Value::Null, "{result}");
    assert_eq!(result["title"], "Sourdough basics");
    let content = result["content"].as_str().unwrap();
    assert!(
        content.contains("wild yeast") && !content.contains("Shop our ovens"),
        "{content}"
    );
    for url in &refused[2..] {
        let result = extract_one(&allowed, url).await;
        assert!(
            result["error"].as_str().unwrap().contains("metadata"),
            "{url}: {result}"
        );
    }
}

/// A redirect is judged hop by hop: with private URLs allowed the local page is fetched, but
/// its redirect to the metadata address is refused before that hop is requested. (With the
/// switch off no hop can reach this local fake at all; `guard_tests` covers the hop rule for
/// 127.0.0.1 targets, which is the same check.)
#[tokio::test]
async fn a_redirect_into_a_refused_address_is_refused_at_the_hop() {
    let fake = FakeWeb::start().await;
    let port = fake.port();
    let result = extract_one(
        &native(&fake, true),
        &format!("http://127.0.0.1:{port}/page/to-metadata"),
    )
    .await;
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("169.254.169.254 is a cloud metadata address"),
        "{result}"
    );
    let paths: Vec<String> = fake.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(paths, ["/page/to-metadata"]);
    let result = extract_one(
        &native(&fake, true),
        &format!("http://127.0.0.1:{port}/page/to-local"),
    )
    .await;
    assert_eq!(
        result["title"], "Sourdough basics",
        "a permitted hop is followed: {result}"
    );
}

#[tokio::test]
async fn hostile_pages_stay_inside_the_fence_and_long_pages_are_cut_with_a_footer() {
    let fake = FakeWeb::start().await;
    let port = fake.port();
    let settings = native(&fake, true);
    let result = extract_one(
        &settings,
        &format!("http://127.0.0.1:{port}/page/injection"),
    )
    .await;
    let content = result["content"].as_str().unwrap();
    assert_eq!(
        content.matches("</untrusted-web-content>").count(),
        1,
        "{content}"
    );
    assert!(content.ends_with("</untrusted-web-content>"));
    assert_eq!(result["threat_findings"], json!(["prompt_injection"]));

    let cache = tempfile::tempdir().unwrap();
    let out = extract::run(
        &settings,
        cache.path(),
        &json!({"urls": [format!("http://127.0.0.1:{port}/page/huge")], "char_limit": 3000}),
    )
    .await;
    let content = out["results"][0]["content"].as_str().unwrap();
    assert!(
        content.contains("Paragraph 0 ") && content.contains("Paragraph 3999"),
        "{content}"
    );
    assert!(content.contains("read_file"));
    let saved: Vec<_> = std::fs::read_dir(cache.path()).unwrap().collect();
    assert_eq!(saved.len(), 1);
}

#[tokio::test]
async fn tavily_and_firecrawl_extract_keep_input_order_and_recheck_redirects() {
    let fake = FakeWeb::start().await;
    let cache = tempfile::tempdir().unwrap();
    let urls =
        json!(["https://a.example/", {"url": "https://missing.example/"}, 7, "http://10.0.0.1/"]);
    let mut tavily = settings(&fake, None, Some(ExtractBackend::Tavily));
    tavily.lookup = Arc::new(EverythingIs("93.184.216.34".parse().unwrap()));
    let out = extract::run(&tavily, cache.path(), &json!({"urls": urls})).await;
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("Text of https://a.example/")
    );
    assert_eq!(results[1]["error"], "Failed to fetch url");
    assert!(results[2]["error"].as_str().unwrap().contains("item 2"));
    assert!(
        results[3]["error"]
            .as_str()
            .unwrap()
            .starts_with("Blocked:")
    );
    let sent = fake
        .seen()
        .into_iter()
        .find(|s| s.path == "/extract")
        .unwrap();
    assert_eq!(
        sent.body["urls"],
        json!(["https://a.example/", "https://missing.example/"])
    );

    let mut firecrawl = settings(&fake, None, Some(ExtractBackend::Firecrawl));
    firecrawl.lookup = Arc::new(EverythingIs("93.184.216.34".parse().unwrap()));
    let out = extract::run(
        &firecrawl,
        cache.path(),
        &json!({"urls": ["https://b.example/", "https://redirects-inside.example/"]}),
    )
    .await;
    assert!(
        out["results"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Markdown of https://b.example/")
    );
    assert!(
        out["results"][1]["error"]
            .as_str()
            .unwrap()
            .contains("metadata"),
        "{out}"
    );
}

#[tokio::test]
async fn a_credential_in_any_url_refuses_the_whole_call_before_any_request() {
    let fake = FakeWeb::start().await;
    let settings = settings(&fake, None, Some(ExtractBackend::Tavily));
    let cache = tempfile::tempdir().unwrap();
    let out = extract::run(
        &settings,
        cache.path(),
        &json!({"urls": ["https://a.example/", "https://b.example/?access_token=abc"]}),
    )
    .await;
    assert_eq!(out["success"], false);
    assert!(
        out["error"].as_str().unwrap().contains("access_token"),
        "{out}"
    );
    assert!(fake.seen().is_empty());
}
