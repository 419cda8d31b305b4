//! The tool definitions a model is offered, remembered between model calls.
//!
//! Building them means resolving toolsets, running every tool's availability check against a
//! fresh tool context (a copy of the whole child environment) and copying each schema into a
//! new JSON tree — per model call, that was the largest share of the daemon's own CPU in the
//! gateway benchmark. An offer is kept per (platform, toolsets, depth cap) for a short time,
//! and for as long as the registry's dynamic tools (an MCP server's list) are the same
//! snapshot, so a server's new list is offered on the next call and a check that depends on
//! the machine (bash installed) is re-run within [`OFFER_TTL`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::tools::registry::ToolEntry;

/// How long an offer is reused before the availability checks run again.
pub const OFFER_TTL: Duration = Duration::from_secs(30);

/// What an offer depends on besides time: everything `AgentDeps::tool_definitions` reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OfferKey {
    pub platform: String,
    pub enabled: Vec<String>,
    pub disabled: Vec<String>,
    /// Past the delegation depth the model may not delegate further.
    pub depth_capped: bool,
}

#[derive(Debug)]
struct Offer {
    key: OfferKey,
    made: Instant,
    /// Held so its address cannot be reused by a later snapshot while this offer lives.
    dynamic: Arc<BTreeMap<String, ToolEntry>>,
    tools: Arc<Vec<Value>>,
}

/// A small memo of offers; a handful of platforms at most, so a list is enough.
#[derive(Debug, Default)]
pub struct OfferCache {
    offers: Mutex<Vec<Offer>>,
}

/// At most this many offers are kept (platforms × depth caps × job toolsets).
const MAX_OFFERS: usize = 16;

impl OfferCache {
    /// The offer for `key` while `dynamic` is the registry's current dynamic snapshot, made
    /// by `build` when none is fresh.
    pub fn get_or_build(
        &self,
        key: OfferKey,
        dynamic: Arc<BTreeMap<String, ToolEntry>>,
        build: impl FnOnce() -> Vec<Value>,
    ) -> Arc<Vec<Value>> {
        let now = Instant::now();
        {
            let offers = self.offers.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(offer) = offers.iter().find(|o| {
                o.key == key
                    && Arc::ptr_eq(&o.dynamic, &dynamic)
                    && now.duration_since(o.made) < OFFER_TTL
            }) {
                return Arc::clone(&offer.tools);
            }
        }
        // Built outside the lock: the checks may touch the file system.
        let tools = Arc::new(build());
        let mut offers = self.offers.lock().unwrap_or_else(|p| p.into_inner());
        offers.retain(|o| o.key != key && now.duration_since(o.made) < OFFER_TTL);
        if offers.len() >= MAX_OFFERS {
            offers.remove(0);
        }
        offers.push(Offer {
            key,
            made: now,
            dynamic,
            tools: Arc::clone(&tools),
        });
        tools
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn key(platform: &str) -> OfferKey {
        OfferKey {
            platform: platform.into(),
            enabled: vec!["terminal".into()],
            disabled: Vec::new(),
            depth_capped: false,
        }
    }

    #[test]
    fn an_offer_is_built_once_per_key_and_snapshot() {
        let cache = OfferCache::default();
        let builds = AtomicUsize::new(0);
        let build = || {
            builds.fetch_add(1, Ordering::SeqCst);
            vec![serde_json::json!({"name": "x"})]
        };
        let snapshot = Arc::new(BTreeMap::new());
        let first = cache.get_or_build(key("telegram"), Arc::clone(&snapshot), build);
        let again = cache.get_or_build(key("telegram"), Arc::clone(&snapshot), build);
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(builds.load(Ordering::SeqCst), 1);

        cache.get_or_build(key("slack"), Arc::clone(&snapshot), build);
        assert_eq!(
            builds.load(Ordering::SeqCst),
            2,
            "another platform is its own offer"
        );

        let mut other_toolsets = key("telegram");
        other_toolsets.enabled.push("web".into());
        cache.get_or_build(other_toolsets, Arc::clone(&snapshot), build);
        assert_eq!(
            builds.load(Ordering::SeqCst),
            3,
            "changed toolsets are a new offer"
        );

        let new_snapshot = Arc::new(BTreeMap::new());
        cache.get_or_build(key("telegram"), new_snapshot, build);
        assert_eq!(
            builds.load(Ordering::SeqCst),
            4,
            "a new dynamic tool list (an MCP server's) is offered at once"
        );
    }
}
