//! The validation `hermesd run` does after loading the configuration and before serving
//! (each enabled platform's adapter settings, the HTTP API's key and host), without starting
//! anything: `config check` and `doctor` run it too, so a home that `run` would refuse with
//! exit 78 never passes them.

use crate::config::LoadedConfig;
use crate::gateway::{api_server, platforms};
use crate::home::HermesHome;

/// What `run` would refuse, each message naming its key; empty when `run` would start.
/// Builds the adapters (pure: no connection is made) and checks the HTTP API's settings.
pub fn platform_errors(home: &HermesHome, loaded: &LoadedConfig) -> Vec<String> {
    let mut errors = match platforms::build_adapters(home, loaded) {
        Ok(_) => Vec::new(),
        Err(errors) => errors,
    };
    if loaded.config.api_server.enabled
        && let Err(e) = api_server::validate(&loaded.config.api_server)
    {
        errors.push(format!("HTTP API: {e}"));
    }
    errors
}
