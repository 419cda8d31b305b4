//! Building the enabled chat platforms' adapters from the configuration.

use std::sync::Arc;

use hermes_adapter::Adapter;

use crate::config::LoadedConfig;
use crate::home::HermesHome;

/// The adapters of every enabled chat platform, or every reason one cannot be built.
pub fn build_adapters(
    _home: &HermesHome,
    loaded: &LoadedConfig,
) -> Result<Vec<Arc<dyn Adapter>>, Vec<String>> {
    let platforms = &loaded.config.platforms;
    let mut errors = Vec::new();
    for (name, enabled) in [
        ("telegram", platforms.telegram.enabled),
        ("discord", platforms.discord.enabled),
        ("slack", platforms.slack.enabled),
    ] {
        if enabled {
            errors.push(format!("{name}: this build has no {name} adapter yet"));
        }
    }
    if errors.is_empty() {
        Ok(Vec::new())
    } else {
        Err(errors)
    }
}
