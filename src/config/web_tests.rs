//! `web:` backend choice (Hermes's order), unsupported names reported, and the precedence of
//! the private-address switch.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn load(web_section: Value, vars: &[(&str, &str)]) -> (WebConfig, Issues) {
    let mut issues = Issues::default();
    let config = web(&mut issues, Some(&web_section), None, None, &env(vars));
    (config, issues)
}

#[test]
fn nothing_configured_hides_both_tools() {
    let (config, issues) = load(json!({}), &[]);
    assert_eq!((config.search, config.extract), (None, None));
    assert!(!config.allow_private_urls);
    assert_eq!(config.extract_char_limit, 15_000);
    assert!(issues.errors.is_empty() && issues.warnings.is_empty());
}

#[test]
fn automatic_choice_follows_hermes_order() {
    let all = [
        ("SEARXNG_URL", "http://127.0.0.1:8888/"),
        ("BRAVE_SEARCH_API_KEY", "b"),
        ("TAVILY_API_KEY", "t"),
        ("FIRECRAWL_API_URL", "http://127.0.0.1:3002"),
    ];
    let (config, _) = load(json!({}), &all);
    assert_eq!(config.search, Some(SearchBackend::Tavily));
    assert_eq!(config.extract, Some(ExtractBackend::Tavily));
    assert_eq!(
        config.endpoints.searxng_url.as_deref(),
        Some("http://127.0.0.1:8888")
    );
    let (config, _) = load(json!({}), &all[..2]);
    assert_eq!(config.search, Some(SearchBackend::Searxng));
    assert_eq!(config.extract, None, "searxng and brave cannot extract");
    let (config, _) = load(json!({}), &all[1..2]);
    assert_eq!(config.search, Some(SearchBackend::Brave));
    let (config, _) = load(json!({}), &all[3..]);
    assert_eq!(config.search, Some(SearchBackend::Firecrawl));
    assert_eq!(config.extract, Some(ExtractBackend::Firecrawl));
}

#[test]
fn a_capability_key_wins_over_the_shared_one() {
    let vars = [("SEARXNG_URL", "http://s"), ("TAVILY_API_KEY", "t")];
    let (config, issues) = load(
        json!({"backend": "tavily", "search_backend": "searxng", "extract_backend": "native"}),
        &vars,
    );
    assert_eq!(config.search, Some(SearchBackend::Searxng));
    assert_eq!(config.extract, Some(ExtractBackend::Native));
    assert!(issues.warnings.is_empty(), "{:?}", issues.warnings);
    let (config, _) = load(
        json!({"backend": "brave-free"}),
        &[("BRAVE_SEARCH_API_KEY", "b")],
    );
    assert_eq!(config.search, Some(SearchBackend::Brave));
    let (config, _) = load(
        json!({"backend": "Brave"}),
        &[("BRAVE_SEARCH_API_KEY", "b")],
    );
    assert_eq!(config.search, Some(SearchBackend::Brave));
}

#[test]
fn unusable_names_are_reported_never_silently_dropped() {
    let (config, issues) = load(
        json!({"backend": "exa", "search_backend": "searxng", "extract_backend": "nonsense"}),
        &[("TAVILY_API_KEY", "t")],
    );
    assert_eq!(config.search, Some(SearchBackend::Tavily));
    assert_eq!(issues.ignored, ["web.backend: exa"]);
    let text = issues.warnings.join("\n");
    assert!(
        text.contains("web.search_backend: 'searxng' has no endpoint"),
        "{text}"
    );
    assert!(text.contains("SEARXNG_URL"), "{text}");
    assert!(
        text.contains("web.extract_backend: unknown backend 'nonsense'"),
        "{text}"
    );
    let (_, issues) = load(json!({"colour": 1}), &[]);
    assert_eq!(issues.warnings, ["unknown key 'web.colour'"]);
}

#[test]
fn char_limit_is_checked_and_keys_never_leak() {
    let (_, issues) = load(json!({"extract_char_limit": 10}), &[]);
    assert!(
        issues.errors[0]
            .to_string()
            .contains("web.extract_char_limit")
    );
    let (config, _) = load(json!({}), &[("TAVILY_API_KEY", "tvly-secret-123")]);
    assert!(!format!("{config:?}").contains("tvly-secret-123"));
    let (_, issues) = load(json!({}), &[("SEARXNG_URL", "localhost:8888")]);
    assert!(issues.errors[0].to_string().contains("SEARXNG_URL"));
}

fn switch(security: Value, browser: Value, value: Option<&str>) -> bool {
    let mut issues = Issues::default();
    let vars = value
        .map(|v| env(&[("HERMES_ALLOW_PRIVATE_URLS", v)]))
        .unwrap_or_default();
    let config = web(&mut issues, None, Some(&security), Some(&browser), &vars);
    assert!(issues.errors.is_empty(), "{:?}", issues.errors);
    config.allow_private_urls
}

#[test]
fn private_url_switch_precedence() {
    let on = json!({"allow_private_urls": true});
    let off = json!({"allow_private_urls": false});
    let none = json!({});
    assert!(!switch(none.clone(), none.clone(), None));
    assert!(switch(on.clone(), none.clone(), None));
    assert!(switch(none.clone(), on.clone(), None), "legacy browser key");
    assert!(
        !switch(off.clone(), on.clone(), None),
        "security wins over browser"
    );
    assert!(
        switch(off.clone(), off.clone(), Some("yes")),
        "env true wins"
    );
    assert!(
        !switch(on.clone(), on.clone(), Some("0")),
        "env false stops the lookup"
    );
    assert!(
        switch(on.clone(), none.clone(), Some(" ")),
        "empty env is unset"
    );
}

#[test]
fn other_security_and_browser_keys_are_reported_as_not_supported() {
    let mut issues = Issues::default();
    web(
        &mut issues,
        None,
        Some(&json!({"redact_secrets": true, "allow_private_urls": true, "bogus": 1})),
        Some(&json!({"headed": true, "allow_private_urls": false})),
        &BTreeMap::new(),
    );
    let mut ignored = issues.ignored.clone();
    ignored.sort();
    assert_eq!(ignored, ["browser", "security.redact_secrets"]);
    assert_eq!(issues.warnings, ["unknown key 'security.bogus'"]);
}
