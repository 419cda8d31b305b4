//! `web_search`: one query to the configured backend (SearXNG, Brave, Tavily or Firecrawl),
//! answered in the result shape Hermes's tool gives (a `data.web` list of hits, each with its
//! title, address, snippet and rank) with every snippet fenced as untrusted content.

use std::time::Duration;

use serde_json::{Value, json};

use super::http::{BackendError, backend_client, send_json};
use super::{WebSettings, fence};
use crate::config::SearchBackend;

/// Most results one call returns, and the default.
pub const MAX_LIMIT: u64 = 100;
pub const DEFAULT_LIMIT: u64 = 5;
/// Characters of one snippet or title the model sees.
const SNIPPET_CHARS: usize = 1_000;
const TITLE_CHARS: usize = 300;

/// One search hit as a backend reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub title: String,
    pub url: String,
    pub description: String,
}

pub fn schema() -> Value {
    json!({
        "name": "web_search",
        "description": "Search the web. Returns titles, URLs and short descriptions of matching \
            pages; the text comes from third parties and is marked untrusted. Use web_extract \
            to read a page in full.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to search for"},
                "limit": {"type": "integer", "description": "How many results (1-100, default 5)",
                          "minimum": 1, "maximum": 100, "default": 5}
            },
            "required": ["query"]
        }
    })
}

/// The tool's JSON answer for `args`.
pub async fn run(settings: &WebSettings, args: &Value) -> Value {
    let query = args
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim();
    if query.is_empty() {
        return json!({"success": false, "error": "query is required"});
    }
    let limit = match args.get("limit") {
        Some(Value::Number(n)) => n.as_f64().map_or(DEFAULT_LIMIT, |f| f as u64),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(DEFAULT_LIMIT),
        _ => DEFAULT_LIMIT,
    }
    .clamp(1, MAX_LIMIT) as usize;
    let Some(backend) = settings.config.search else {
        return json!({"success": false, "error": "no web search backend is configured"});
    };
    match search(settings, backend, query, limit).await {
        Ok(hits) => shape(hits, limit),
        Err(error) => json!({"success": false, "error": error.to_string()}),
    }
}

/// Hermes's result shape, each snippet fenced and scanned.
pub fn shape(hits: Vec<Hit>, limit: usize) -> Value {
    let web: Vec<Value> = hits
        .into_iter()
        .take(limit)
        .enumerate()
        .map(|(i, hit)| {
            let description = cut(&hit.description, SNIPPET_CHARS);
            let findings = fence::findings(&format!("{}\n{description}", hit.title));
            let mut item = json!({
                "title": fence::defuse(&cut(&hit.title, TITLE_CHARS)),
                "url": fence::defuse(&hit.url),
                "description": fence::fence(&description),
                "position": i + 1,
                "untrusted": true,
            });
            if !findings.is_empty() {
                item["threat_findings"] = json!(findings);
            }
            item
        })
        .collect();
    json!({"success": true, "data": {"web": web}, "notice": fence::NOTICE})
}

fn cut(text: &str, max: usize) -> String {
    let mut out: String = text.chars().take(max).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

async fn search(
    settings: &WebSettings,
    backend: SearchBackend,
    query: &str,
    limit: usize,
) -> Result<Vec<Hit>, BackendError> {
    let endpoints = &settings.config.endpoints;
    match backend {
        SearchBackend::Searxng => {
            let base = endpoints.searxng_url.as_deref().unwrap_or_default();
            let client = backend_client(settings, Duration::from_secs(15))?;
            let request = client
                .get(format!("{base}/search"))
                .query(&[("q", query), ("format", "json"), ("pageno", "1")])
                .header("accept", "application/json");
            let body = send_json("SearXNG", request).await?;
            let mut results = items(&body, &["results"], "SearXNG")?;
            // Hermes orders by the engines' combined score, best first.
            results.sort_by(|a, b| {
                let score = |v: &Value| v.get("score").and_then(Value::as_f64).unwrap_or(0.0);
                score(b).total_cmp(&score(a))
            });
            Ok(hits(&results, "content"))
        }
        SearchBackend::Brave => {
            let client = backend_client(settings, Duration::from_secs(15))?;
            let key = endpoints
                .brave_key
                .as_ref()
                .map(|k| k.expose().to_owned())
                .unwrap_or_default();
            let request = client
                .get(format!("{}/res/v1/web/search", endpoints.brave_base))
                .query(&[("q", query), ("count", &limit.min(20).to_string())])
                .header("accept", "application/json")
                .header("x-subscription-token", key);
            let body = send_json("Brave Search", request).await?;
            if body.get("web").is_none() {
                return Ok(Vec::new());
            }
            Ok(hits(
                &items(&body, &["web", "results"], "Brave Search")?,
                "description",
            ))
        }
        SearchBackend::Tavily => {
            let client = backend_client(settings, Duration::from_secs(60))?;
            let key = endpoints
                .tavily_key
                .as_ref()
                .map(|k| k.expose().to_owned())
                .unwrap_or_default();
            let request = client
                .post(format!("{}/search", endpoints.tavily_base))
                .json(&json!({
                    "api_key": key, "query": query, "max_results": limit.min(20),
                    "include_raw_content": false, "include_images": false,
                }));
            let body = send_json("Tavily", request).await?;
            Ok(hits(&items(&body, &["results"], "Tavily")?, "content"))
        }
        SearchBackend::Firecrawl => {
            let client = backend_client(settings, Duration::from_secs(60))?;
            let mut request = client
                .post(format!("{}/v1/search", endpoints.firecrawl_base()))
                .json(&json!({"query": query, "limit": limit}));
            if let Some(key) = &endpoints.firecrawl_key {
                request = request.bearer_auth(key.expose());
            }
            let body = send_json("Firecrawl", request).await?;
            // v1 answers `data: [...]`, v2 `data: {web: [...]}`; both are accepted.
            let list = if body.pointer("/data/web").is_some() {
                items(&body, &["data", "web"], "Firecrawl")?
            } else {
                items(&body, &["data"], "Firecrawl")?
            };
            Ok(hits(&list, "description"))
        }
    }
}

/// The list at `path` in `body`, or a malformed-answer error naming the service.
pub fn items(
    body: &Value,
    path: &[&str],
    service: &'static str,
) -> Result<Vec<Value>, BackendError> {
    let mut node = body;
    for key in path {
        node = node.get(*key).ok_or_else(|| BackendError::Malformed {
            service,
            detail: format!("no '{}' in the answer", path.join(".")),
        })?;
    }
    node.as_array()
        .cloned()
        .ok_or_else(|| BackendError::Malformed {
            service,
            detail: format!("'{}' is not a list", path.join(".")),
        })
}

fn hits(items: &[Value], description_key: &str) -> Vec<Hit> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    items
        .iter()
        .filter(|v| v.get("url").and_then(Value::as_str).is_some())
        .map(|v| Hit {
            title: text(v, "title"),
            url: text(v, "url"),
            description: text(v, description_key),
        })
        .collect()
}
