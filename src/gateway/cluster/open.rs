//! Opening the store the configuration names: `$HERMES_HOME/state.db`, or the PostgreSQL
//! database of `state.postgres_url` / `HERMES_DATABASE_URL` (its errors never show the
//! password). Shared by the daemon and the `sessions` / `chat` commands.

use crate::config::{LoadedConfig, StateBackend};
use crate::home::HermesHome;
use crate::state::{Store, StoreOptions};

/// Why the store could not be opened, as a line for the operator (secrets redacted).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OpenError(String);

/// Opens the store `loaded`'s `state:` section names, with default options otherwise.
pub async fn open_configured_store(
    home: &HermesHome,
    loaded: &LoadedConfig,
) -> Result<Store, OpenError> {
    let (state, env) = (&loaded.config.state, &loaded.env);
    let options = StoreOptions::default();
    match state.backend {
        StateBackend::Sqlite => {
            let options = StoreOptions {
                env: env.clone(),
                ..options
            };
            Store::open_with(&home.state_db(), options)
                .map_err(|e| OpenError(format!("cannot open {}: {e}", home.state_db().display())))
        }
        StateBackend::Postgres => {
            // Validation refuses the backend without a URL; this is only a second guard.
            let Some(url) = state.postgres_url.as_ref() else {
                return Err(OpenError(
                    "state.backend is postgres but state.postgres_url is not set".into(),
                ));
            };
            let options = StoreOptions {
                env: env.clone(),
                instance_id: state.instance_id.clone(),
                lease_ttl: state.lease_ttl,
                ..options
            };
            // The store's errors carry the redacted URL only; mask again in case a driver
            // message echoes part of it.
            Store::open_postgres(url.expose(), options)
                .await
                .map_err(|e| {
                    let text = e.to_string().replace(url.expose(), "***");
                    OpenError(format!(
                        "cannot open the PostgreSQL state database: {}",
                        crate::logging::mask(&text)
                    ))
                })
        }
    }
}
