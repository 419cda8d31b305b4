use super::*;
use crate::config::Secret;

fn endpoint(provider: &str, base_url: &str, key: Option<&str>) -> Endpoint {
    Endpoint::new(provider, base_url, key.map(Secret::new), "m")
}

#[test]
fn listing_urls_follow_each_protocol() {
    let chat = endpoint("custom", "http://127.0.0.1:8000/v1/", None);
    assert_eq!(listing_url(&chat), "http://127.0.0.1:8000/v1/models");
    let anthropic = endpoint("anthropic", "https://api.anthropic.com", Some("k"));
    assert_eq!(
        listing_url(&anthropic),
        "https://api.anthropic.com/v1/models"
    );
    let proxy = endpoint("custom", "http://gw.test/v1", None).with_mode(ApiMode::AnthropicMessages);
    assert_eq!(listing_url(&proxy), "http://gw.test/v1/models");
    let responses = endpoint("openai", "https://api.openai.com/v1", Some("k"));
    assert_eq!(responses.mode, ApiMode::CodexResponses);
    assert_eq!(listing_url(&responses), "https://api.openai.com/v1/models");
}

#[test]
fn the_key_travels_as_each_protocol_wants_and_is_marked_sensitive() {
    let bearer = listing_headers(&endpoint("custom", "http://x/v1", Some("sk-1")));
    assert_eq!(bearer.len(), 1);
    assert_eq!(bearer[0].0, AUTHORIZATION);
    assert_eq!(bearer[0].1, "Bearer sk-1");
    assert!(bearer[0].1.is_sensitive());
    let anthropic = listing_headers(&endpoint(
        "anthropic",
        "https://api.anthropic.com",
        Some("k"),
    ));
    let names: Vec<&str> = anthropic.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["anthropic-version", "x-api-key"]);
    assert!(anthropic[1].1.is_sensitive());
    assert!(listing_headers(&endpoint("custom", "http://x/v1", None)).is_empty());
}

#[test]
fn pages_in_the_documented_shapes() {
    // https://platform.openai.com/docs/api-reference/models/list
    let openai = br#"{"object":"list","data":[
        {"id":"gpt-4o","object":"model","created":1,"owned_by":"openai"},
        {"id":"gpt-4o-mini","object":"model","created":1,"owned_by":"openai"}]}"#;
    assert_eq!(
        parse_page(openai, "openai").unwrap(),
        Page {
            ids: vec!["gpt-4o".into(), "gpt-4o-mini".into()],
            next_after: None
        }
    );
    // https://docs.anthropic.com/en/api/models-list
    let anthropic = br#"{"data":[{"type":"model","id":"claude-a","display_name":"A",
        "created_at":"2025-01-01T00:00:00Z"}],"has_more":true,"first_id":"claude-a",
        "last_id":"claude-a"}"#;
    let page = parse_page(anthropic, "anthropic").unwrap();
    assert_eq!(page.ids, ["claude-a"]);
    assert_eq!(page.next_after.as_deref(), Some("claude-a"));
    // A bare list, entries without an id skipped.
    let bare = br#"[{"id":"local"},{"name":"no id"},{"id":""}]"#;
    assert_eq!(parse_page(bare, "custom").unwrap().ids, ["local"]);
    // Gemini's OpenAI-compatible listing prefixes `models/`.
    let gemini = br#"{"data":[{"id":"models/gemini-2.5-flash"}]}"#;
    assert_eq!(
        parse_page(gemini, "gemini").unwrap().ids,
        ["gemini-2.5-flash"]
    );
    assert_eq!(
        parse_page(gemini, "custom").unwrap().ids,
        ["models/gemini-2.5-flash"]
    );
}

#[test]
fn what_is_not_a_listing_is_a_clear_error() {
    assert_eq!(
        parse_page(b"<html>nope</html>", "custom"),
        Err(ListingError::Shape("not JSON"))
    );
    assert_eq!(
        parse_page(br#"{"error":"nope"}"#, "custom"),
        Err(ListingError::Shape("no `data` list"))
    );
    assert_eq!(
        parse_page(b"42", "custom"),
        Err(ListingError::Shape("neither an object nor a list"))
    );
}

#[test]
fn only_own_cloud_hosts_and_anthropic_servers_switch_unverified() {
    assert!(unverified_switch_allowed(&endpoint(
        "openrouter",
        "https://openrouter.ai/api/v1/",
        Some("k")
    )));
    assert!(unverified_switch_allowed(&endpoint(
        "anthropic",
        "https://api.anthropic.com",
        Some("k")
    )));
    assert!(unverified_switch_allowed(
        &endpoint("custom", "http://gw.test", None).with_mode(ApiMode::AnthropicMessages)
    ));
    // The same name at another address is a custom server; local servers must list.
    assert!(!unverified_switch_allowed(&endpoint(
        "openai",
        "http://127.0.0.1:9/v1",
        Some("k")
    )));
    assert!(!unverified_switch_allowed(&endpoint(
        "ollama",
        "http://127.0.0.1:11434/v1",
        None
    )));
    assert!(!unverified_switch_allowed(&endpoint(
        "custom",
        "http://127.0.0.1:9/v1",
        None
    )));
}

#[test]
fn the_cache_keeps_a_listing_for_its_lifetime_per_server_and_key() {
    let cache = ListingCache::default();
    let start = Instant::now();
    let a = ListingKey::of(&endpoint("custom", "http://a/v1/", Some("k1")));
    let models: Arc<[String]> = vec!["x".to_owned()].into();
    assert!(cache.get(&a, start).is_none());
    cache.put(a.clone(), models.clone(), start);
    assert_eq!(
        cache.get(&a, start + LISTING_TTL / 2).as_deref(),
        Some(&models[..])
    );
    assert!(cache.get(&a, start + LISTING_TTL).is_none(), "expired");
    // The same server with a trailing slash is the same listing; another key is not.
    let same = ListingKey::of(&endpoint("custom", "http://a/v1", Some("k1")));
    assert_eq!(same, a);
    let other_key = ListingKey::of(&endpoint("custom", "http://a/v1", Some("k2")));
    assert!(cache.get(&other_key, start).is_none());
    // The digest, never the key, is what the cache holds.
    assert!(!format!("{a:?}").contains("k1"));
}

#[test]
fn the_cache_is_bounded_and_drops_the_oldest() {
    let cache = ListingCache::default();
    let start = Instant::now();
    let key = |i: usize| ListingKey::of(&endpoint("custom", &format!("http://h{i}/v1"), None));
    let models: Arc<[String]> = Vec::new().into();
    for i in 0..MAX_CACHED + 5 {
        cache.put(
            key(i),
            models.clone(),
            start + Duration::from_secs(i as u64),
        );
    }
    assert_eq!(cache.count(), MAX_CACHED);
    let now = start + Duration::from_secs((MAX_CACHED + 5) as u64);
    assert!(cache.get(&key(0), now).is_none(), "the oldest went first");
    assert!(cache.get(&key(MAX_CACHED + 4), now).is_some());
    // Expired entries are dropped on the next put.
    cache.put(key(999), models, start + LISTING_TTL * 2);
    assert_eq!(cache.count(), 1);
}
