//! The web tools: `web_search` and `web_extract` (toolsets `web` and `search`), Hermes's
//! `web.*` keys and backends (SearXNG, Brave, Tavily, Firecrawl, plus our `native`
//! extraction), every model-chosen URL behind the SSRF guard, every piece of page text fenced
//! as untrusted. See docs/web-tools.md and SECURITY.md.
//!
//! The tool entries themselves are in `tools/web_entry.rs`, so this module does not depend on
//! the tool context that holds its settings.

pub mod extract;
pub mod fence;
pub mod guard;
mod http;
pub mod native;
pub mod search;
pub mod truncate;

use std::sync::Arc;

use crate::config::WebConfig;

/// What the web tools need: the validated `web:` settings, the configured networking (CA
/// certificates; the proxy only for the configured services), and how names are resolved.
#[derive(Clone)]
pub struct WebSettings {
    pub config: WebConfig,
    pub net: hermes_adapter::net::Net,
    pub lookup: Arc<dyn guard::Lookup>,
    /// Replaces every per-service request timeout (Hermes's: 15 s SearXNG and Brave, 60 s
    /// Tavily and Firecrawl, 30 s our own fetch) when set; tests use a short one.
    pub timeout: Option<std::time::Duration>,
}

impl std::fmt::Debug for WebSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSettings")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl WebSettings {
    /// Settings using the system resolver.
    pub fn new(config: WebConfig, net: hermes_adapter::net::Net) -> Self {
        Self {
            config,
            net,
            lookup: Arc::new(guard::SystemLookup),
            timeout: None,
        }
    }
}

impl Default for WebSettings {
    /// No backend: both tools hidden.
    fn default() -> Self {
        Self::new(WebConfig::default(), hermes_adapter::net::Net::direct())
    }
}
