//! `web:` and the private-address switch — which backend answers `web_search` and
//! `web_extract`, each backend's endpoint and key (from the environment, as Hermes 0.19 reads
//! them), the per-page budget, and whether model-chosen URLs may reach private networks
//! (`security.allow_private_urls`, the legacy `browser.allow_private_urls`, and
//! `HERMES_ALLOW_PRIVATE_URLS`). See docs/web-tools.md.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::known_keys::{join, warn_unknown};
use super::parse::{Issues, at, kind};
use super::secret::Secret;
use super::shape::Unknown;

/// `security.*` keys Hermes has that hermesd accepts without acting on them.
#[rustfmt::skip]
pub const IGNORED_SECURITY: &[&str] = &[
    "acked_advisories", "allow_lazy_installs", "redact_secrets", "tirith_enabled",
    "tirith_fail_open", "tirith_path", "tirith_timeout", "website_blocklist",
];

/// Backend names Hermes knows that hermesd does not implement: set, they are reported as
/// not supported (and the automatic choice applies).
const UNSUPPORTED_BACKENDS: &[&str] = &["ddgs", "exa", "parallel", "xai"];

pub const DEFAULT_EXTRACT_CHAR_LIMIT: usize = 15_000;
pub const DEFAULT_TAVILY_BASE: &str = "https://api.tavily.com";
pub const DEFAULT_FIRECRAWL_BASE: &str = "https://api.firecrawl.dev";
pub const DEFAULT_BRAVE_BASE: &str = "https://api.search.brave.com";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SearchBackend {
    Searxng,
    Brave,
    Tavily,
    Firecrawl,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ExtractBackend {
    /// hermesd's own: fetch the page through the SSRF guard and extract it here.
    Native,
    Tavily,
    Firecrawl,
}

/// Where each backend lives and its key; the operator configured these, so they are not
/// subject to the private-address rule (`SEARXNG_URL=http://127.0.0.1:8888` is normal).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WebEndpoints {
    pub searxng_url: Option<String>,
    pub brave_key: Option<Secret>,
    /// `BRAVE_SEARCH_BASE_URL` (ours; Hermes hard-codes the public API).
    pub brave_base: String,
    pub tavily_key: Option<Secret>,
    pub tavily_base: String,
    pub firecrawl_key: Option<Secret>,
    /// `FIRECRAWL_API_URL`: a self-hosted Firecrawl needs no key.
    pub firecrawl_url: Option<String>,
}

impl WebEndpoints {
    pub fn firecrawl_base(&self) -> &str {
        self.firecrawl_url
            .as_deref()
            .unwrap_or(DEFAULT_FIRECRAWL_BASE)
    }

    fn has(&self, name: &str) -> bool {
        match name {
            "searxng" => self.searxng_url.is_some(),
            "brave" => self.brave_key.is_some(),
            "tavily" => self.tavily_key.is_some(),
            "firecrawl" => self.firecrawl_key.is_some() || self.firecrawl_url.is_some(),
            "native" => true,
            _ => false,
        }
    }
}

/// The validated web settings: the backend each tool uses (`None`: the tool is hidden).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WebConfig {
    pub search: Option<SearchBackend>,
    pub extract: Option<ExtractBackend>,
    /// `web.extract_char_limit`: the default per-page budget of `web_extract`.
    pub extract_char_limit: usize,
    /// Model-chosen URLs may reach private and loopback addresses (never cloud metadata).
    pub allow_private_urls: bool,
    pub endpoints: WebEndpoints,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            search: None,
            extract: None,
            extract_char_limit: DEFAULT_EXTRACT_CHAR_LIMIT,
            allow_private_urls: false,
            endpoints: WebEndpoints {
                brave_base: DEFAULT_BRAVE_BASE.to_owned(),
                tavily_base: DEFAULT_TAVILY_BASE.to_owned(),
                ..WebEndpoints::default()
            },
        }
    }
}

/// Reads `web`, `security` and `browser` (each as written, any shape) plus the environment.
pub fn web(
    issues: &mut Issues,
    web: Option<&Value>,
    security: Option<&Value>,
    browser: Option<&Value>,
    env: &BTreeMap<String, String>,
) -> WebConfig {
    let web = mapping(issues, "web", web);
    let mut unknown = web.clone();
    for key in [
        "backend",
        "search_backend",
        "extract_backend",
        "extract_char_limit",
    ] {
        unknown.remove(key);
    }
    warn_unknown(issues, "web", &unknown, &[]);
    let endpoints = endpoints(issues, env);
    let name = |issues: &mut Issues, key: &str| -> Option<(String, String)> {
        let path = join("web", key);
        let value = issues.string(at(path.clone(), web.get(key)))?;
        Some((path, value.to_ascii_lowercase()))
    };
    let shared = name(issues, "backend");
    let search_named = name(issues, "search_backend");
    let extract_named = name(issues, "extract_backend");
    let search = choose(issues, &endpoints, &[&search_named, &shared], SEARCH_NAMES)
        .and_then(|name| search_backend(&name));
    let extract = choose(
        issues,
        &endpoints,
        &[&extract_named, &shared],
        EXTRACT_NAMES,
    )
    .and_then(|name| extract_backend(&name));
    let extract_char_limit = issues.uint(
        at("web.extract_char_limit", web.get("extract_char_limit")),
        DEFAULT_EXTRACT_CHAR_LIMIT as u64,
        2000,
        500_000,
    ) as usize;
    WebConfig {
        search,
        extract,
        extract_char_limit,
        allow_private_urls: allow_private_urls(issues, security, browser, env),
        endpoints,
    }
}

const SEARCH_NAMES: &[&str] = &["tavily", "firecrawl", "searxng", "brave"];
const EXTRACT_NAMES: &[&str] = &["tavily", "firecrawl", "native"];

fn search_backend(name: &str) -> Option<SearchBackend> {
    Some(match name {
        "searxng" => SearchBackend::Searxng,
        "brave" => SearchBackend::Brave,
        "tavily" => SearchBackend::Tavily,
        "firecrawl" => SearchBackend::Firecrawl,
        _ => return None,
    })
}

fn extract_backend(name: &str) -> Option<ExtractBackend> {
    Some(match name {
        "native" => ExtractBackend::Native,
        "tavily" => ExtractBackend::Tavily,
        "firecrawl" => ExtractBackend::Firecrawl,
        _ => return None,
    })
}

/// The first named backend that this capability supports and whose endpoint is configured,
/// else Hermes's automatic order among those configured (`native` is never automatic: it
/// is ours and fetches from this host). Names that cannot be used are reported.
fn choose(
    issues: &mut Issues,
    endpoints: &WebEndpoints,
    named: &[&Option<(String, String)>],
    supported: &[&str],
) -> Option<String> {
    for (key, value) in named.iter().copied().flatten() {
        let value = if value == "brave-free" {
            "brave"
        } else {
            value.as_str()
        };
        if supported.contains(&value) {
            if endpoints.has(value) {
                return Some(value.to_owned());
            }
            warn_once(
                issues,
                format!(
                    "{key}: '{value}' has no endpoint or key configured ({}); choosing \
                     automatically",
                    needs(value)
                ),
            );
        } else if UNSUPPORTED_BACKENDS.contains(&value) {
            let entry = format!("{key}: {value}");
            if !issues.ignored.contains(&entry) {
                issues.ignored.push(entry);
            }
        } else if !(SEARCH_NAMES.contains(&value) || EXTRACT_NAMES.contains(&value)) {
            warn_once(
                issues,
                format!(
                    "{key}: unknown backend '{value}' (hermesd has searxng, brave-free, tavily, \
                     firecrawl, and native for extraction)"
                ),
            );
        }
    }
    supported
        .iter()
        .find(|name| **name != "native" && endpoints.has(name))
        .map(|name| (*name).to_owned())
}

/// `web.backend` is read for both tools: its complaint is made once.
fn warn_once(issues: &mut Issues, message: String) {
    if !issues.warnings.contains(&message) {
        issues.warn(message);
    }
}

fn needs(backend: &str) -> &'static str {
    match backend {
        "searxng" => "SEARXNG_URL",
        "brave" => "BRAVE_SEARCH_API_KEY",
        "tavily" => "TAVILY_API_KEY",
        _ => "FIRECRAWL_API_KEY or FIRECRAWL_API_URL",
    }
}

fn endpoints(issues: &mut Issues, env: &BTreeMap<String, String>) -> WebEndpoints {
    let var = |name: &str| env.get(name).map(|v| Value::String(v.clone()));
    let url = |issues: &mut Issues, name: &str| issues.url(at(name, var(name).as_ref()));
    let searxng_url = url(issues, "SEARXNG_URL");
    let brave_base = url(issues, "BRAVE_SEARCH_BASE_URL");
    let tavily_base = url(issues, "TAVILY_BASE_URL");
    let firecrawl_url = url(issues, "FIRECRAWL_API_URL");
    let trim = |u: Option<String>, default: &str| {
        u.unwrap_or_else(|| default.to_owned())
            .trim_end_matches('/')
            .to_owned()
    };
    WebEndpoints {
        searxng_url: searxng_url.map(|u| u.trim_end_matches('/').to_owned()),
        brave_key: issues.secret(at(
            "BRAVE_SEARCH_API_KEY",
            var("BRAVE_SEARCH_API_KEY").as_ref(),
        )),
        brave_base: trim(brave_base, DEFAULT_BRAVE_BASE),
        tavily_key: issues.secret(at("TAVILY_API_KEY", var("TAVILY_API_KEY").as_ref())),
        tavily_base: trim(tavily_base, DEFAULT_TAVILY_BASE),
        firecrawl_key: issues.secret(at("FIRECRAWL_API_KEY", var("FIRECRAWL_API_KEY").as_ref())),
        firecrawl_url: firecrawl_url.map(|u| u.trim_end_matches('/').to_owned()),
    }
}

/// Hermes's precedence: `HERMES_ALLOW_PRIVATE_URLS` true wins, false stops the lookup; then
/// `security.allow_private_urls`, then the legacy `browser.allow_private_urls`.
fn allow_private_urls(
    issues: &mut Issues,
    security: Option<&Value>,
    browser: Option<&Value>,
    env: &BTreeMap<String, String>,
) -> bool {
    let security = mapping(issues, "security", security);
    let browser = mapping(issues, "browser", browser);
    let mut rest = security.clone();
    rest.remove("allow_private_urls");
    warn_unknown(issues, "security", &rest, &[IGNORED_SECURITY]);
    // The browser tool is not implemented: its other keys are accepted and reported as one
    // entry (a Hermes-written config.yaml sets a dozen of them).
    if browser
        .iter()
        .any(|(key, value)| key != "allow_private_urls" && super::unsupported::is_set(value))
    {
        issues.ignored.push("browser".to_owned());
    }
    let from_env = env
        .get("HERMES_ALLOW_PRIVATE_URLS")
        .filter(|v| !v.trim().is_empty())
        .map(|v| Value::String(v.clone()));
    if let Some(allowed) = issues.opt_bool(at("HERMES_ALLOW_PRIVATE_URLS", from_env.as_ref())) {
        return allowed;
    }
    if let Some(allowed) = issues.opt_bool(at(
        "security.allow_private_urls",
        security.get("allow_private_urls"),
    )) {
        return allowed;
    }
    issues.bool(
        at(
            "browser.allow_private_urls",
            browser.get("allow_private_urls"),
        ),
        false,
    )
}

fn mapping(issues: &mut Issues, key: &str, value: Option<&Value>) -> Unknown {
    match value {
        None | Some(Value::Null) => Unknown::new(),
        Some(Value::Object(map)) => map.clone().into_iter().collect(),
        Some(other) => {
            issues.error(key, format!("expected a mapping, got {}", kind(other)));
            Unknown::new()
        }
    }
}

#[cfg(test)]
#[path = "web_tests.rs"]
mod tests;
