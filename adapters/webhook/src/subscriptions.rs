//! The routes in effect: config.yaml's, plus the subscriptions in the home's
//! `webhook_subscriptions.json` (written by `hermesd webhook subscribe` or Hermes's `hermes
//! webhook subscribe`), re-read when the file's modification time changes. A route in
//! config.yaml wins over a subscription of the same name; a subscription that is not valid
//! is left out with a warning, never half-applied.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde_json::Value;

use crate::route::Route;
use crate::settings::{Settings, check_route};

#[derive(Debug, Default)]
struct Loaded {
    modified: Option<SystemTime>,
    routes: BTreeMap<String, Arc<Route>>,
}

/// Looks routes up by name (see the module docs).
#[derive(Debug)]
pub struct RouteTable {
    fixed: BTreeMap<String, Arc<Route>>,
    dynamic: Mutex<Loaded>,
}

impl RouteTable {
    pub fn new(settings: &Settings) -> Self {
        Self {
            fixed: settings
                .routes
                .iter()
                .map(|(name, route)| (name.clone(), Arc::new(route.clone())))
                .collect(),
            dynamic: Mutex::new(Loaded::default()),
        }
    }

    /// The route `name`, with the subscription file re-read first if it changed.
    pub fn get(&self, name: &str, settings: &Settings) -> Option<Arc<Route>> {
        if let Some(route) = self.fixed.get(name) {
            return Some(route.clone());
        }
        let mut loaded = self.dynamic.lock().unwrap_or_else(|p| p.into_inner());
        let path = settings.subscriptions_file();
        let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        if modified != loaded.modified {
            loaded.routes = match modified {
                Some(_) => read(settings, &self.fixed),
                None => BTreeMap::new(),
            };
            loaded.modified = modified;
        }
        loaded.routes.get(name).cloned()
    }

    /// Names of every route in effect (config first), for the log at start.
    pub fn names(&self, settings: &Settings) -> Vec<String> {
        let _ = self.get("", settings);
        let loaded = self.dynamic.lock().unwrap_or_else(|p| p.into_inner());
        self.fixed
            .keys()
            .chain(loaded.routes.keys())
            .cloned()
            .collect()
    }
}

fn read(settings: &Settings, fixed: &BTreeMap<String, Arc<Route>>) -> BTreeMap<String, Arc<Route>> {
    let path = settings.subscriptions_file();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read webhook subscriptions");
            return BTreeMap::new();
        }
    };
    let Ok(Value::Object(entries)) = serde_json::from_str::<Value>(&text) else {
        tracing::warn!(path = %path.display(), "webhook subscriptions file is not a JSON object; no subscription is served");
        return BTreeMap::new();
    };
    let mut routes = BTreeMap::new();
    for (name, block) in entries {
        if fixed.contains_key(&name) {
            continue;
        }
        let mut warnings = Vec::new();
        let parsed = Route::parse(
            "webhook_subscriptions.json",
            &name,
            &block,
            settings.global_secret.as_ref(),
            &mut warnings,
        )
        .and_then(|route| {
            check_route(
                &route,
                settings.addr.ip(),
                &settings.targets,
                "webhook_subscriptions.json",
            )?;
            Ok(route)
        });
        match parsed {
            Ok(route) => {
                routes.insert(name, Arc::new(route));
            }
            Err(errors) => {
                tracing::warn!(route = %name, problems = %errors.join("; "), "webhook subscription left out");
            }
        }
    }
    tracing::info!(count = routes.len(), "webhook subscriptions loaded");
    routes
}
