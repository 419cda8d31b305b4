//! `web_extract`: the readable text of up to five pages, through the configured backend
//! (Tavily, Firecrawl, or our own fetch). Before anything is sent: a URL carrying something
//! that looks like a credential refuses the whole call (it would hand the secret to a third
//! party), and each URL must pass the SSRF guard — also for third-party readers, because a
//! self-hosted Firecrawl sits inside the operator's network. Answer: Hermes's
//! `{"results": [{url, title, content, error}]}` in input order, content fenced as untrusted.

use std::time::Duration;

use serde_json::{Value, json};

use super::http::{BackendError, backend_client, send_json};
use super::{WebSettings, fence, guard, native, truncate};
use crate::config::ExtractBackend;

pub const MAX_URLS: usize = 5;
pub const MIN_CHAR_LIMIT: u64 = 2_000;
pub const MAX_CHAR_LIMIT: u64 = 500_000;
/// Characters of page content one call hands the model in all (Hermes's result cap).
pub const MAX_RESULT_CHARS: usize = 100_000;

/// Query parameter names that carry credentials (Hermes's list).
const SENSITIVE_PARAMS: &[&str] = &[
    "access_token",
    "api_key",
    "apikey",
    "auth_token",
    "authorization",
    "awsaccesskeyid",
    "client_secret",
    "credential",
    "credentials",
    "jwt",
    "password",
    "passwd",
    "secret",
    "session_id",
    "signature",
    "token",
    "x-amz-security-token",
    "x-amz-signature",
    "x_amz_security_token",
    "x_amz_signature",
];

pub fn schema() -> Value {
    json!({
        "name": "web_extract",
        "description": "Read web pages: returns each page's title and main text (as Markdown). \
            The text comes from third parties and is marked untrusted. Long pages are cut to \
            char_limit; the footer says where the full text was saved.",
        "parameters": {
            "type": "object",
            "properties": {
                "urls": {"type": "array", "items": {"type": "string"}, "maxItems": 5,
                         "description": "Up to 5 http(s) URLs"},
                "char_limit": {"type": "integer", "minimum": 2000,
                               "description": "Characters per page (default from web.extract_char_limit)"}
            },
            "required": ["urls"]
        }
    })
}

/// One page's outcome.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extracted {
    pub url: String,
    pub title: String,
    pub content: String,
    pub error: Option<String>,
}

fn failed(url: &str, error: impl Into<String>) -> Extracted {
    Extracted {
        url: url.to_owned(),
        error: Some(error.into()),
        ..Extracted::default()
    }
}

/// The URL of one `urls` item: a string, or an object with `url` or `href`.
fn item_url(item: &Value) -> Option<String> {
    match item {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => ["url", "href"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_str).map(str::to_owned)),
        _ => None,
    }
}

/// Why a URL may not leave this host at all, if it carries a credential.
pub fn credential_in(url: &str) -> Option<String> {
    let decoded = percent_decode(url);
    for text in [url, decoded.as_str()] {
        if crate::logging::mask_token_shapes(text) != text {
            return Some(
                "Blocked: the URL seems to carry a credential (a key or token). Credentials \
                 never go out inside a URL"
                    .to_owned(),
            );
        }
    }
    let parsed = reqwest::Url::parse(url.trim()).ok()?;
    let name = parsed
        .query_pairs()
        .find(|(k, v)| {
            !v.is_empty() && SENSITIVE_PARAMS.contains(&k.to_ascii_lowercase().as_str())
        })?
        .0
        .into_owned();
    Some(format!(
        "Blocked: the URL carries a credential-like query parameter ({name}); remove it, \
         extraction services are third parties"
    ))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && bytes[i + 1].is_ascii_hexdigit()
            && bytes[i + 2].is_ascii_hexdigit()
        {
            let hex = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
            out.push(hex(bytes[i + 1]) * 16 + hex(bytes[i + 2]));
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The tool's JSON answer for `args`.
pub async fn run(settings: &WebSettings, home_cache: &std::path::Path, args: &Value) -> Value {
    let Some(items) = args.get("urls").and_then(Value::as_array) else {
        return json!({"success": false, "error": "urls must be a list of URLs"});
    };
    if items.is_empty() {
        return json!({"success": false, "error": "urls is empty"});
    }
    let Some(backend) = settings.config.extract else {
        return json!({"success": false, "error": "no web extraction backend is configured"});
    };
    let items = &items[..items.len().min(MAX_URLS)];
    let urls: Vec<Option<String>> = items.iter().map(item_url).collect();
    for url in urls.iter().flatten() {
        if let Some(refusal) = credential_in(url) {
            return json!({"success": false, "error": refusal});
        }
    }
    let char_limit = match args.get("char_limit") {
        Some(Value::Number(n)) => n.as_f64().map(|f| f as u64),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    }
    .unwrap_or(settings.config.extract_char_limit as u64)
    .clamp(MIN_CHAR_LIMIT, MAX_CHAR_LIMIT) as usize;
    // The whole answer stays within Hermes's result cap.
    let per_page = char_limit.min(MAX_RESULT_CHARS / items.len());

    let mut results = Vec::with_capacity(items.len());
    let mut allowed = Vec::new();
    for (index, url) in urls.iter().enumerate() {
        let Some(url) = url else {
            results.push(failed(
                "",
                format!("item {index} is neither a URL nor an object holding `url` or `href`"),
            ));
            continue;
        };
        match check(settings, url).await {
            Ok(parsed) => {
                allowed.push((index, parsed));
                results.push(Extracted::default());
            }
            Err(refused) => results.push(failed(url, refused.to_string())),
        }
    }
    for (index, page) in fetch_all(settings, backend, &allowed).await {
        results[index] = page;
    }
    let shaped: Vec<Value> = results
        .into_iter()
        .map(|page| shape(page, per_page, home_cache))
        .collect();
    json!({"results": shaped, "notice": fence::NOTICE})
}

/// The guard's verdict on one model-given URL: the host rule, then its name's addresses.
async fn check(settings: &WebSettings, url: &str) -> Result<reqwest::Url, guard::Blocked> {
    let parsed = guard::parse_checked(url, settings.config.allow_private_urls)?;
    let host = parsed.host_str().unwrap_or_default();
    if host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_err()
    {
        guard::GuardedResolver::new(settings.lookup.clone(), settings.config.allow_private_urls)
            .resolve_checked(host)
            .await?;
    }
    Ok(parsed)
}

async fn fetch_all(
    settings: &WebSettings,
    backend: ExtractBackend,
    urls: &[(usize, reqwest::Url)],
) -> Vec<(usize, Extracted)> {
    if urls.is_empty() {
        return Vec::new();
    }
    match backend {
        ExtractBackend::Native => {
            let fetches = urls.iter().map(|(index, url)| async move {
                let page = match native::fetch(settings, url.clone()).await {
                    Ok(page) => Extracted {
                        url: page.url,
                        title: page.title,
                        content: page.text,
                        error: None,
                    },
                    Err(error) => failed(url.as_str(), error),
                };
                (*index, page)
            });
            futures_util::future::join_all(fetches).await
        }
        ExtractBackend::Tavily => match tavily(settings, urls).await {
            Ok(pages) => pages,
            Err(error) => urls
                .iter()
                .map(|(i, u)| (*i, failed(u.as_str(), error.to_string())))
                .collect(),
        },
        ExtractBackend::Firecrawl => {
            let scrapes = urls.iter().map(|(index, url)| async move {
                let page = match firecrawl(settings, url).await {
                    Ok(page) => page,
                    Err(error) => failed(url.as_str(), error),
                };
                (*index, page)
            });
            futures_util::future::join_all(scrapes).await
        }
    }
}

async fn tavily(
    settings: &WebSettings,
    urls: &[(usize, reqwest::Url)],
) -> Result<Vec<(usize, Extracted)>, BackendError> {
    let endpoints = &settings.config.endpoints;
    let client = backend_client(settings, Duration::from_secs(60))?;
    let key = endpoints
        .tavily_key
        .as_ref()
        .map(|k| k.expose().to_owned())
        .unwrap_or_default();
    let list: Vec<&str> = urls.iter().map(|(_, u)| u.as_str()).collect();
    let request = client
        .post(format!("{}/extract", endpoints.tavily_base))
        .json(&json!({"api_key": key, "urls": list, "include_images": false}));
    let body = send_json("Tavily", request).await?;
    let results = super::search::items(&body, &["results"], "Tavily")?;
    let failures = body
        .get("failed_results")
        .or_else(|| body.get("failed_urls"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    Ok(urls
        .iter()
        .map(|(index, url)| {
            let same = |v: &Value| {
                v.get("url").and_then(Value::as_str) == Some(url.as_str())
                    || v.as_str() == Some(url.as_str())
            };
            let page = if let Some(found) = results.iter().find(|v| same(v)) {
                Extracted {
                    url: url.to_string(),
                    title: text(found, "title"),
                    content: text(found, "raw_content"),
                    error: None,
                }
            } else if let Some(failure) = failures.iter().find(|v| same(v)) {
                let why = failure
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("Tavily could not extract it");
                failed(url.as_str(), why)
            } else {
                failed(url.as_str(), "Tavily returned nothing for this URL")
            };
            (*index, page)
        })
        .collect())
}

async fn firecrawl(settings: &WebSettings, url: &reqwest::Url) -> Result<Extracted, String> {
    let endpoints = &settings.config.endpoints;
    let client = backend_client(settings, Duration::from_secs(60)).map_err(|e| e.to_string())?;
    let mut request = client
        .post(format!("{}/v1/scrape", endpoints.firecrawl_base()))
        .json(&json!({"url": url.as_str(), "formats": ["markdown"], "onlyMainContent": true}));
    if let Some(key) = &endpoints.firecrawl_key {
        request = request.bearer_auth(key.expose());
    }
    let body = send_json("Firecrawl", request)
        .await
        .map_err(|e| e.to_string())?;
    let data = body.get("data").ok_or("Firecrawl answered without data")?;
    let metadata = data.get("metadata").cloned().unwrap_or(Value::Null);
    // The page may have redirected somewhere the guard refuses: Hermes checks again.
    if let Some(source) = metadata
        .get("sourceURL")
        .or_else(|| metadata.get("url"))
        .and_then(Value::as_str)
        && source != url.as_str()
    {
        check(settings, source).await.map_err(|b| b.to_string())?;
    }
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let mut content = text(data, "markdown");
    if content.is_empty() {
        content = html2text::from_read(text(data, "html").as_bytes(), 100).unwrap_or_default();
    }
    Ok(Extracted {
        url: url.to_string(),
        title: text(&metadata, "title"),
        content,
        error: None,
    })
}

/// One result in Hermes's shape: content cut to `limit`, fenced and scanned.
fn shape(page: Extracted, limit: usize, cache: &std::path::Path) -> Value {
    let mut item = json!({
        "url": page.url,
        "title": fence::defuse(&page.title),
        "content": "",
        "error": page.error,
    });
    if page.error.is_none() {
        let (content, _) = truncate::fit(&page.content, limit, &page.url, cache);
        let findings = fence::findings(&format!("{}\n{}", page.title, page.content));
        item["content"] = json!(fence::fence(&content));
        item["untrusted"] = json!(true);
        if !findings.is_empty() {
            item["threat_findings"] = json!(findings);
        }
    }
    item
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_urls_refuse_the_call() {
        for url in [
            "https://x.test/?q=sk-abcdefghijklmnopqrstuvwx",
            "https://x.test/p?q=%73k-abcdefghijklmnopqrstuvwx",
            "https://x.test/?token=abc",
            "https://x.test/?API_KEY=abc",
            "https://user:hunter2@x.test/",
        ] {
            assert!(credential_in(url).is_some(), "{url}");
        }
        for url in [
            "https://x.test/?q=rust",
            "https://x.test/?token=",
            "https://x.test/a%2",
        ] {
            assert!(credential_in(url).is_none(), "{url}");
        }
    }

    #[test]
    fn items_may_be_objects_with_url_or_href() {
        assert_eq!(
            item_url(&json!("https://a.test")).as_deref(),
            Some("https://a.test")
        );
        assert_eq!(
            item_url(&json!({"href": "https://b.test"})).as_deref(),
            Some("https://b.test")
        );
        assert_eq!(item_url(&json!(3)), None);
    }
}
