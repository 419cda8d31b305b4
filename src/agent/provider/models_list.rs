//! What models an endpoint's server says it serves: its models listing, which `/model`
//! consults for a name config.yaml does not configure.
//!
//! OpenAI-compatible servers (chat completions and the Responses API) answer
//! `GET {base_url}/models` with `{"object":"list","data":[{"id":…},…]}` and the same bearer
//! key a model call carries; Anthropic answers `GET …/v1/models` with `x-api-key` and
//! `anthropic-version`, in pages (`has_more`, `last_id`, asked for with `after_id`). One
//! fetch is bounded in time ([`LISTING_TIMEOUT`]), bytes and names; an answer is kept per
//! endpoint for [`LISTING_TTL`] in a [`ListingCache`] of at most [`MAX_CACHED`] listings. A
//! failed fetch is not kept. The key only ever travels in a sensitive header: it is in no
//! URL, error or log line, and the cache is keyed by its digest.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::endpoint::Endpoint;
use super::mode::{ApiMode, known_provider};
use super::transport::secret_header;

/// How long a listing is trusted before it is fetched again.
pub const LISTING_TTL: Duration = Duration::from_secs(10 * 60);
/// The most one fetch (every page, headers and bodies) may take.
pub const LISTING_TIMEOUT: Duration = Duration::from_secs(10);
/// The most listings kept at once (a client has a handful of endpoints).
pub const MAX_CACHED: usize = 32;
/// A listing page larger than this is refused (OpenRouter's full catalogue, with
/// descriptions and prices, is a few MB).
const MAX_PAGE_BYTES: usize = 16 * 1024 * 1024;
/// Names kept from one listing, across its pages.
const MAX_MODELS: usize = 10_000;
/// Anthropic pages followed at most (1000 models each).
const MAX_PAGES: usize = 10;
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Why an endpoint's listing could not be had. No variant carries the key or a URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListingError {
    #[error("the server answered HTTP {0}")]
    Status(u16),
    #[error("no complete answer within {}s", .0.as_secs())]
    Timeout(Duration),
    #[error("cannot reach the server ({0})")]
    Connect(&'static str),
    #[error("the answer is not a models listing ({0})")]
    Shape(&'static str),
    #[error("the answer is larger than {} MB", MAX_PAGE_BYTES / (1024 * 1024))]
    TooLarge,
}

/// Where an endpoint's listing is: `{base}/models`, or Anthropic's `/v1/models`.
pub fn listing_url(endpoint: &Endpoint) -> String {
    let base = endpoint.base_url.trim().trim_end_matches('/');
    match endpoint.mode {
        ApiMode::AnthropicMessages if base.ends_with("/v1") => format!("{base}/models"),
        ApiMode::AnthropicMessages => format!("{base}/v1/models"),
        ApiMode::ChatCompletions | ApiMode::CodexResponses => format!("{base}/models"),
    }
}

/// The headers a listing request carries: the endpoint's own authentication.
fn listing_headers(endpoint: &Endpoint) -> Vec<(HeaderName, HeaderValue)> {
    let key = endpoint.api_key.as_ref().map(|key| key.expose());
    match endpoint.mode {
        ApiMode::AnthropicMessages => {
            let mut headers = vec![(
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static(ANTHROPIC_VERSION),
            )];
            headers.extend(
                key.and_then(|key| secret_header(HeaderName::from_static("x-api-key"), key)),
            );
            headers
        }
        ApiMode::ChatCompletions | ApiMode::CodexResponses => key
            .and_then(|key| secret_header(AUTHORIZATION, &format!("Bearer {key}")))
            .into_iter()
            .collect(),
    }
}

/// One page of a listing: the model names, and where the next page starts (Anthropic).
#[derive(Debug, PartialEq)]
pub struct Page {
    pub ids: Vec<String>,
    pub next_after: Option<String>,
}

/// Reads a listing page: `{"data":[{"id":…}]}` (OpenAI, Anthropic, OpenRouter, vLLM, Ollama,
/// LM Studio…) or a bare array of such objects. Gemini's OpenAI-compatible listing names
/// its models `models/<id>`; the prefix is dropped for the `gemini` provider, whose calls
/// take the bare id.
pub fn parse_page(body: &[u8], provider: &str) -> Result<Page, ListingError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| ListingError::Shape("not JSON"))?;
    let items = match &value {
        Value::Array(items) => items,
        Value::Object(map) => match map.get("data") {
            Some(Value::Array(items)) => items,
            _ => return Err(ListingError::Shape("no `data` list")),
        },
        _ => return Err(ListingError::Shape("neither an object nor a list")),
    };
    let gemini = provider.eq_ignore_ascii_case("gemini");
    let ids = items
        .iter()
        .filter_map(|item| item.get("id")?.as_str())
        .map(|id| match id.strip_prefix("models/") {
            Some(bare) if gemini => bare,
            _ => id,
        })
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .collect();
    let next_after = (value.get("has_more") == Some(&Value::Bool(true)))
        .then(|| value.get("last_id")?.as_str().map(str::to_owned))
        .flatten();
    Ok(Page { ids, next_after })
}

/// Fetches `endpoint`'s whole listing (every page, bounded) within [`LISTING_TIMEOUT`].
pub async fn fetch_listing(
    client: &reqwest::Client,
    endpoint: &Endpoint,
) -> Result<Vec<String>, ListingError> {
    tokio::time::timeout(LISTING_TIMEOUT, fetch_pages(client, endpoint))
        .await
        .map_err(|_| ListingError::Timeout(LISTING_TIMEOUT))?
}

async fn fetch_pages(
    client: &reqwest::Client,
    endpoint: &Endpoint,
) -> Result<Vec<String>, ListingError> {
    let url = listing_url(endpoint);
    let anthropic = endpoint.mode == ApiMode::AnthropicMessages;
    let mut models: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut after: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut request = client.get(&url);
        if anthropic {
            // https://docs.anthropic.com/en/api/models-list: `limit` 1–1000 (default 20).
            request = request.query(&[("limit", "1000")]);
            if let Some(after) = &after {
                request = request.query(&[("after_id", after.as_str())]);
            }
        }
        for (name, value) in listing_headers(endpoint) {
            request = request.header(name, value);
        }
        let page = parse_page(&read_page(request).await?, &endpoint.provider)?;
        for id in page.ids {
            if models.len() < MAX_MODELS && seen.insert(id.clone()) {
                models.push(id);
            }
        }
        match page.next_after {
            Some(next) if anthropic && models.len() < MAX_MODELS => after = Some(next),
            _ => break,
        }
    }
    Ok(models)
}

async fn read_page(request: reqwest::RequestBuilder) -> Result<Vec<u8>, ListingError> {
    let response = request.send().await.map_err(|error| {
        ListingError::Connect(if error.is_connect() {
            "connection refused or unreachable"
        } else if error.is_timeout() {
            "connect timeout"
        } else {
            "request failed"
        })
    })?;
    let status = response.status();
    if !status.is_success() {
        return Err(ListingError::Status(status.as_u16()));
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|_| ListingError::Connect("the connection broke"))?;
        if body.len() + chunk.len() > MAX_PAGE_BYTES {
            return Err(ListingError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Whether a name may be switched to when `endpoint`'s listing cannot be fetched, as Hermes
/// decides: a cloud provider at its own address (its listing is down, its names are its
/// own) and Anthropic-protocol servers (many proxies have no Models API) take the name
/// unverified; any other server — a custom or local one — must list it.
pub fn unverified_switch_allowed(endpoint: &Endpoint) -> bool {
    if endpoint.mode == ApiMode::AnthropicMessages {
        return true;
    }
    known_provider(&endpoint.provider).is_some_and(|known| {
        known.needs_key
            && known.base_url.is_some_and(|own| {
                own.trim_end_matches('/') == endpoint.base_url.trim().trim_end_matches('/')
            })
    })
}

/// Which listing an entry is: the server, its protocol, and a digest of the key (two keys
/// on one server may see different models).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ListingKey {
    mode: &'static str,
    base_url: String,
    key_digest: [u8; 32],
}

impl ListingKey {
    pub fn of(endpoint: &Endpoint) -> Self {
        let key = endpoint.api_key.as_ref().map(|key| key.expose());
        Self {
            mode: endpoint.mode.as_str(),
            base_url: endpoint.base_url.trim().trim_end_matches('/').to_owned(),
            key_digest: Sha256::digest(key.unwrap_or_default().as_bytes()).into(),
        }
    }
}

/// Listings fetched recently, each trusted for [`LISTING_TTL`]; at most [`MAX_CACHED`]
/// (the oldest goes first).
#[derive(Debug, Default)]
pub struct ListingCache {
    entries: Mutex<HashMap<ListingKey, Fetched>>,
}

/// A listing and when it was fetched.
type Fetched = (Instant, Arc<[String]>);

impl ListingCache {
    /// The listing kept for `key`, if it was fetched less than [`LISTING_TTL`] before `now`.
    pub fn get(&self, key: &ListingKey, now: Instant) -> Option<Arc<[String]>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (fetched, models) = entries.get(key)?;
        (now.saturating_duration_since(*fetched) < LISTING_TTL).then(|| models.clone())
    }

    /// Keeps `models` as `key`'s listing fetched at `now`, dropping expired entries and,
    /// when full, the oldest.
    pub fn put(&self, key: ListingKey, models: Arc<[String]>, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|_, (fetched, _)| now.saturating_duration_since(*fetched) < LISTING_TTL);
        if entries.len() >= MAX_CACHED && !entries.contains_key(&key) {
            let oldest = entries
                .iter()
                .min_by_key(|(_, (fetched, _))| *fetched)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                entries.remove(&oldest);
            }
        }
        entries.insert(key, (now, models));
    }

    /// How many listings are kept (expired ones included until the next `put`).
    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
#[path = "models_list_tests.rs"]
mod tests;
